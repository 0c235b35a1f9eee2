// Fuzzes tokenizer.json loading (Tokenizer::FromJson): WordLevel and BPE
// models, added tokens, pre-tokenizers and decoders. A tokenizer that loads
// is then used once on a fixed text and on ids around its vocabulary.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tokenizer = twice::engine::Tokenizer::FromJson(json);
  if (!tokenizer.ok()) return 0;
  const twice::engine::Tokenizer& t = **tokenizer;
  (void)t.Encode("Hello world, w1 w2 <|endoftext|> \xc3\xa9\xe2\x82\xac!");
  const int32_t vocab = t.vocab_size();
  const std::vector<int32_t> ids = {0, vocab - 1, vocab, -1, vocab / 2};
  (void)t.Decode(ids);
  (void)t.TokenToId("<|endoftext|>");
  return 0;
}
