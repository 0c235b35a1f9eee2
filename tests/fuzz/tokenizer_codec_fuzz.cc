// Fuzzes Encode and Decode of the shipped GPT-2 BPE tokenizer and a small
// WordLevel tokenizer with arbitrary bytes: text (any bytes, not only valid
// UTF-8) and token ids (the same bytes read as int32). Every id Encode
// returns must be in the vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

std::unique_ptr<twice::engine::Tokenizer> g_bpe;
std::unique_ptr<twice::engine::Tokenizer> g_word_level;

void Exercise(const twice::engine::Tokenizer& t, std::string_view text,
              const std::vector<int32_t>& ids) {
  auto encoded = t.Encode(text);
  if (encoded.ok()) {
    for (int32_t id : *encoded) {
      if (id < 0 || id >= t.vocab_size()) {
        twice::fuzz::Die("Encode returned id " + std::to_string(id) +
                         " outside the vocabulary");
      }
    }
    (void)t.Decode(*encoded);
  }
  (void)t.Decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  auto bpe = twice::engine::Tokenizer::FromFile(
      twice::fuzz::SourcePath("models/tokenizers/gpt2/tokenizer.json"));
  twice::fuzz::CheckOk(bpe.status(), "GPT-2 tokenizer");
  g_bpe = *std::move(bpe);
  auto wl = twice::engine::Tokenizer::FromJson(
      twice::fuzz::WordLevelTokenizerJson(300));
  twice::fuzz::CheckOk(wl.status(), "WordLevel tokenizer");
  g_word_level = *std::move(wl);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  Exercise(*g_bpe, text, ids);
  Exercise(*g_word_level, text, ids);
  return 0;
}
