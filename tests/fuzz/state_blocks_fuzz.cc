// Fuzzes the block codec (DecodeStateBlocksInto) against the empty states of
// tiny random models, RAT's chunk-KV layers first of all. Input: one control
// byte (bit 0: recompute each block's trailing checksum; the rest picks the
// model), then blocks, each a u32 little-endian length and its bytes (the
// last one takes what is left). A state that decodes must be usable.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/state/state_blocks.h"
#include "tests/fuzz/tiny_models.h"

namespace {

std::vector<twice::fuzz::TinyModel>* g_models = nullptr;

std::string Frame(size_t model, const std::vector<std::string>& blocks) {
  std::string out(1, static_cast<char>(model << 1));
  for (const std::string& b : blocks) {
    const uint32_t n = static_cast<uint32_t>(b.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
    out += b;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  g_models = new std::vector<twice::fuzz::TinyModel>(
      twice::fuzz::WriteAndLoadTinyModels());
  for (size_t m = 0; m < g_models->size(); ++m) {
    const auto& model = *(*g_models)[m].model;
    const std::string& name = (*g_models)[m].name;
    auto base = twice::fuzz::StateAfter(model, 20);
    auto blocks = twice::engine::EncodeStateBlocks(*base, {});
    twice::fuzz::CheckOk(blocks.status(), name + " blocks");
    twice::fuzz::MaybeWriteSeed(name + "_20.blocks", Frame(m, *blocks));
    if (!twice::engine::HasBlockRows(*base)) continue;
    // A chain: the base's blocks, then those of an extension of it.
    auto longer = twice::fuzz::StateAfter(model, 50);
    auto more = twice::engine::EncodeStateBlocks(
        *longer, twice::engine::StateRowCounts(*base));
    twice::fuzz::CheckOk(more.status(), name + " extension blocks");
    std::vector<std::string> chain = *blocks;
    chain.insert(chain.end(), more->begin(), more->end());
    twice::fuzz::MaybeWriteSeed(name + "_20_50.blocks", Frame(m, chain));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& tiny = (*g_models)[(data[0] >> 1) % g_models->size()];
  const bool fix = data[0] & 1;
  std::vector<std::string> blocks;
  size_t at = 1;
  while (at < size && blocks.size() < 16) {
    size_t n = size - at;
    if (n >= 4) {
      uint32_t len = 0;
      for (int i = 0; i < 4; ++i) len |= uint32_t{data[at + i]} << (8 * i);
      at += 4;
      n = std::min<size_t>(len, size - at);
    } else {
      at = size - n;
    }
    blocks.emplace_back(reinterpret_cast<const char*>(data) + at, n);
    if (fix) twice::fuzz::FixTrailingChecksum(blocks.back());
    at += n;
  }
  std::unique_ptr<twice::engine::SequenceState> state = tiny.model->NewState();
  if (twice::engine::DecodeStateBlocksInto(blocks, *state).ok()) {
    twice::fuzz::StepDecoded(*tiny.model, *state);
  }
  return 0;
}
