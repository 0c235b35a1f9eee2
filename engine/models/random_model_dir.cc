#include "engine/models/random_model_dir.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/weights/safetensors_writer.h"
#include "kernels/status_macros.h"
#include "kernels/tensor_convert.h"

namespace twice::engine {
namespace {

[[nodiscard]] absl::Status WriteText(const std::string& path,
                                     std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

uint64_t SplitMix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t NameSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  uint64_t s = seed ^ h;
  return SplitMix64(s);
}

double Uniform(uint64_t& s) {  // in (0, 1]
  return (static_cast<double>(SplitMix64(s) >> 11) + 1.0) * 0x1p-53;
}

}  // namespace

Tensor RandomNormal(const std::string& name, Shape shape, double std,
                    uint64_t seed) {
  Tensor t = Tensor::Zeros(std::move(shape));
  uint64_t s = NameSeed(seed, name);
  float* out = t.mutable_data();
  const int64_t n = t.size();
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = Uniform(s);  // (0, 1]: log(u1) is finite
    const double u2 = static_cast<double>(SplitMix64(s) >> 11) * 0x1p-53;
    const double r = std * std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(r * std::cos(2.0 * std::numbers::pi * u2));
    if (i + 1 < n) {
      out[i + 1] =
          static_cast<float>(r * std::sin(2.0 * std::numbers::pi * u2));
    }
  }
  return t;
}

Tensor Filled(Shape shape, float value) {
  Tensor t = Tensor::Zeros(std::move(shape));
  for (float& v : t.mutable_span()) v = value;
  return t;
}

void RandomWeights::Normal(const std::string& name, Shape shape, double std) {
  w_.emplace(name, RandomNormal(name, std::move(shape), std, seed_));
}

void RandomWeights::Ones(const std::string& name, int64_t n) {
  w_.emplace(name, Filled({n}, 1.0f));
}

void RandomWeights::LogUniform(const std::string& name, Shape shape, double lo,
                               double hi) {
  Tensor t = Tensor::Zeros(std::move(shape));
  uint64_t s = NameSeed(seed_, name);
  for (float& v : t.mutable_span()) {
    v = static_cast<float>(std::log(lo + (hi - lo) * Uniform(s)));
  }
  w_.emplace(name, std::move(t));
}

absl::Status UnknownPreset(std::string_view arch, std::string_view preset,
                           std::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat(
      "init-model: unknown ", std::string(arch), " preset \"",
      std::string(preset), "\" (expected ", std::string(expected), ")"));
}

absl::StatusOr<InitTokenizer> ReadInitTokenizer(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("init-model: cannot read ", path));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  InitTokenizer info;
  info.json = std::move(buf).str();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok =
      Tokenizer::FromJson(info.json);
  if (!tok.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("init-model: ", path, ": ", tok.status().message()));
  }
  info.vocab = (*tok)->vocab_size();
  info.eos = (*tok)
                 ->TokenToId("<|endoftext|>")
                 .value_or((*tok)->TokenToId("</s>").value_or(-1));
  return info;
}

absl::Status WriteModelDir(const InitModelOptions& options,
                           const std::string& config_text,
                           const std::string& tokenizer_json,
                           const std::map<std::string, Tensor>& weights) {
  if (options.out_dir.empty()) {
    return absl::InvalidArgumentError("init-model: out_dir is empty");
  }
  const DType dtype = options.weights_dtype.value_or(DType::kF32);
  if (dtype == DType::kI8) {
    return absl::InvalidArgumentError(
        "init-model: int8 is not a stored format (it is made at load: "
        "--weights_dtype=int8 on twice-server and twice-bench engine)");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat(
        "init-model: cannot create ", options.out_dir, ": ", ec.message()));
  }
  // As a published bf16 / f16 checkpoint: every tensor in that dtype.
  std::map<std::string, Tensor> stored;
  for (const auto& [name, tensor] : weights) {
    TWICE_ASSIGN_OR_RETURN(stored[name], kernels::ConvertTensor(tensor, dtype));
  }
  std::vector<NamedTensor> named;
  named.reserve(stored.size());
  for (const auto& [name, tensor] : stored) named.push_back({name, &tensor});
  TWICE_RETURN_IF_ERROR(WriteSafetensors(options.out_dir + "/model.safetensors",
                                         std::move(named), {{"format", "pt"}}));
  TWICE_RETURN_IF_ERROR(
      WriteText(options.out_dir + "/tokenizer.json", tokenizer_json));
  return WriteText(options.out_dir + "/config.json", config_text);
}

}  // namespace twice::engine
