// The steps every random-model writer (init_model.h) shares: reading the
// tokenizer it ships, drawing weights, and writing the model directory
// (config.json, model.safetensors in the requested dtype, tokenizer.json).
#ifndef TWICE_ENGINE_MODELS_RANDOM_MODEL_DIR_H_
#define TWICE_ENGINE_MODELS_RANDOM_MODEL_DIR_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/models/init_model.h"
#include "engine/tensor/tensor.h"

namespace twice::engine {

struct InitTokenizer {
  std::string json;
  int64_t vocab = 0;
  int64_t eos = -1;  // "<|endoftext|>" or "</s>"; -1 when it has neither
};

// N(0, std²) values of the tensor `name`: a splitmix64 stream seeded by
// `seed` and the FNV-1a hash of the name (so a tensor's values do not
// depend on which other tensors exist), Box-Muller from 53-bit uniforms.
// Byte-identical on every platform.
Tensor RandomNormal(const std::string& name, Shape shape, double std,
                    uint64_t seed);
// Every element `value`.
Tensor Filled(Shape shape, float value);

// Named random tensors whose values depend only on the seed and the
// tensor's name (splitmix64 streams seeded by its FNV-1a hash), identically
// on every platform: adding a tensor never changes another.
class RandomWeights {
 public:
  explicit RandomWeights(uint64_t seed) : seed_(seed) {}
  // RandomNormal(name, shape, std, seed).
  void Normal(const std::string& name, Shape shape, double std);
  void Ones(const std::string& name, int64_t n);
  // Every value log(U[lo, hi]) (RAT's forget-gate bias, Mamba-2's A_log).
  void LogUniform(const std::string& name, Shape shape, double lo, double hi);
  // A tensor drawn before, to adjust its values in place.
  Tensor& at(const std::string& name) { return w_.at(name); }
  const std::map<std::string, Tensor>& tensors() const { return w_; }

 private:
  uint64_t seed_;
  std::map<std::string, Tensor> w_;
};

// INVALID_ARGUMENT "init-model: unknown <arch> preset ... (expected ...)".
[[nodiscard]] absl::Status UnknownPreset(std::string_view arch,
                                         std::string_view preset,
                                         std::string_view expected);

// NOT_FOUND when `path` cannot be read; INVALID_ARGUMENT naming it when it
// does not parse.
[[nodiscard]] absl::StatusOr<InitTokenizer> ReadInitTokenizer(
    const std::string& path);

// Creates options.out_dir and writes the three files, every tensor stored
// in options.weights_dtype (F32 when unset). INVALID_ARGUMENT for I8 (no
// file format of ours holds its scales) or an empty out_dir; UNAVAILABLE
// for I/O errors.
[[nodiscard]] absl::Status WriteModelDir(
    const InitModelOptions& options, const std::string& config_text,
    const std::string& tokenizer_json,
    const std::map<std::string, Tensor>& weights);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_MODELS_RANDOM_MODEL_DIR_H_
