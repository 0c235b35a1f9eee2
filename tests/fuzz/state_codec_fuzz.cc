// Fuzzes the whole-state codec (DecodeStateInto) against the empty states of
// tiny random models of every architecture. Input: one control byte (bit 0:
// recompute the trailing checksum so the field checks are reached; the rest
// picks the model) followed by the encoded state. A state that decodes must
// be usable by its model (one more token is read).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/state/state_codec.h"
#include "tests/fuzz/tiny_models.h"

namespace {
std::vector<twice::fuzz::TinyModel>* g_models = nullptr;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  g_models = new std::vector<twice::fuzz::TinyModel>(
      twice::fuzz::WriteAndLoadTinyModels());
  for (size_t m = 0; m < g_models->size(); ++m) {
    const auto& model = *(*g_models)[m].model;
    for (int n : {0, 3, 40}) {
      auto state =
          n == 0 ? model.NewState() : twice::fuzz::StateAfter(model, n);
      std::string seed(1, static_cast<char>(m << 1));
      seed += twice::engine::EncodeState(*state);
      twice::fuzz::MaybeWriteSeed(
          (*g_models)[m].name + "_" + std::to_string(n) + ".state", seed);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& tiny = (*g_models)[(data[0] >> 1) % g_models->size()];
  std::string blob(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) twice::fuzz::FixTrailingChecksum(blob);
  std::unique_ptr<twice::engine::SequenceState> state = tiny.model->NewState();
  if (twice::engine::DecodeStateInto(blob, *state).ok()) {
    twice::fuzz::StepDecoded(*tiny.model, *state);
  }
  return 0;
}
