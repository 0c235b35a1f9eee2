// Encodes a fixed list of texts with the gpt-3-encoder package (an
// independent GPT-2 encoder) and writes {"texts": [...], "ids": [[...]]} so
// the C++ byte-level BPE can be checked id for id.
//
// The package does not treat <|endoftext|> as special (it splits it like
// ordinary text), so no text here contains it; the C++ tests check the added
// token separately.
//
// Usage: node make_fixture.js [output path]
// Default output: tests/data/gpt2_tokenizer_fixture.json (repository root).
'use strict';

const fs = require('fs');
const path = require('path');
const {encode, decode} = require('gpt-3-encoder');

const kRepoRoot = path.resolve(__dirname, '..', '..');

const kParagraph =
    'The quick brown fox jumps over the lazy dog. In 1878, the telephone ' +
    'was still new; by 2024 nearly 8.1 billion people shared roughly ' +
    '1.5e9 smartphones. "Don\'t panic," she said -- and didn\'t. ' +
    'Prices rose 3.75% (from $12.40 to $12.87) while the index fell by ' +
    '-0.3 points.\n\nSecond paragraph: tabs\there, trailing spaces   \n' +
    'and a final line without newline';

const kTexts = [
  // ASCII words and sentence punctuation.
  'Hello world',
  'Hello, world!',
  'hello',
  ' hello',
  'The quick brown fox jumps over the lazy dog.',
  // Contractions, including ones the pattern only splits in lower case.
  "I'm sure you're right; it's what we'd've done, isn't it?",
  "She'll say they've gone. I'd go. It's, 'tis, 'S, 'LL and 'Re.",
  "rock 'n' roll",
  // Numbers.
  '1234567890',
  'Pi is 3.14159, e is 2.71828, and 1e-9 is small.',
  'Call 555-0100 or +1 (800) 555-0199 before 12:30pm on 2024-06-01.',
  '١٢٣ and ½ and Ⅻ',
  // Whitespace runs and newlines.
  'two  spaces',
  'many      spaces    here',
  'trailing spaces   ',
  '   leading spaces',
  'line one\nline two\n\nline four\n',
  '\n\n\n',
  'tab\tseparated\tvalues\t\t!',
  'windows\r\nline\r\nendings',
  ' ',
  '    ',
  // Punctuation and symbols.
  '!!!???...,,,;;;',
  'a+b=c; x*y/z; (a[0] {b} <c>) | d & e ^ f ~ g',
  'email@example.com http://example.com/path?q=1&r=2#frag',
  '#include <stdio.h>\nint main(void) { return 0; }',
  '"quoted" \'single\' `back`',
  '____init____ --flag --no-flag',
  // Accented Latin and other alphabets.
  'café naïve résumé coöperate',
  'Ærøskøbing, Ångström, Straße, œuvre',
  'Привет, мир! Как дела?',
  'Γειά σου Κόσμε',
  'שלום עולם',
  'مرحبا بالعالم',
  'नमस्ते दुनिया',
  // CJK.
  '你好，世界！',
  '日本語のテキストです。',
  '한국어 텍스트',
  // Emoji, including sequences joined by ZWJ and with modifiers.
  'I love 🍕 and 🍣!',
  '👍🏽👨‍👩‍👧‍👦🇺🇸',
  '😀😃😄',
  // Mixed scripts.
  'Tokyo 東京 Moscow Москва Cairo القاهرة 123',
  'mixed中文and English混合text',
  'naïve—dash–en “curly” ‘quotes’ … ellipsis',
  // A long paragraph.
  kParagraph,
];

function main() {
  const out = process.argv[2] ||
      path.join(kRepoRoot, 'tests', 'data', 'gpt2_tokenizer_fixture.json');
  const ids = kTexts.map((text) => {
    const tokens = encode(text);
    if (tokens.some((id) => !Number.isInteger(id))) {
      throw new Error(`unknown token while encoding ${JSON.stringify(text)}`);
    }
    if (decode(tokens) !== text) {
      throw new Error(`round trip failed for ${JSON.stringify(text)}`);
    }
    return tokens;
  });
  // One text per line keeps diffs readable.
  const texts = kTexts.map((t) => '    ' + JSON.stringify(t)).join(',\n');
  const rows = ids.map((r) => '    ' + JSON.stringify(r)).join(',\n');
  const body = `{\n  "texts": [\n${texts}\n  ],\n  "ids": [\n${rows}\n  ]\n}\n`;
  JSON.parse(body);  // Fail here rather than in the C++ test.
  fs.mkdirSync(path.dirname(out), {recursive: true});
  fs.writeFileSync(out, body);
  console.log(`wrote ${out}: ${kTexts.length} texts`);
}

main();
