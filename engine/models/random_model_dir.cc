#include "engine/models/random_model_dir.h"

#include <filesystem>
#include <fstream>
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

}  // namespace

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
