#include "engine/executor/resident_layers.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<ResidentMixer>> NewResidentMixer(
    const Mixer& mixer) {
  if (const auto* m = dynamic_cast<const Mamba2Mixer*>(&mixer)) {
    return NewResidentMamba2Mixer(*m);
  }
  if (const auto* m = dynamic_cast<const BaseConv*>(&mixer)) {
    return NewResidentBaseConv(*m);
  }
  if (const auto* m = dynamic_cast<const BasedLinearAttention*>(&mixer)) {
    return NewResidentLinearAttention(*m);
  }
  if (const auto* m = dynamic_cast<const PrefixLinearAttention*>(&mixer)) {
    return NewResidentPrefixLinearAttention(*m);
  }
  if (const auto* m = dynamic_cast<const SlidingWindowAttention*>(&mixer)) {
    return NewResidentWindowAttention(*m);
  }
  if (const auto* m = dynamic_cast<const LlamaAttention*>(&mixer)) {
    return NewResidentFullAttention(*m);
  }
  if (const auto* m = dynamic_cast<const RatAttention*>(&mixer)) {
    return NewResidentRatAttention(*m);
  }
  if (const auto* m = dynamic_cast<const RatSwaAttention*>(&mixer)) {
    return NewResidentRatSwaAttention(*m);
  }
  if (const auto* m = dynamic_cast<const FeedForwardMixer*>(&mixer)) {
    TWICE_ASSIGN_OR_RETURN(std::unique_ptr<ResidentFeedForward> ffn,
                           NewResidentFeedForward(m->ffn()));
    return NewResidentFeedForwardMixer(std::move(ffn));
  }
  return absl::UnimplementedError(
      absl::StrCat("the resident executor has no form yet of a mixer with \"",
                   std::string(mixer.NewState()->kind()), "\" states"));
}

absl::StatusOr<std::unique_ptr<ResidentFeedForward>> NewResidentFeedForward(
    const FeedForward& ffn) {
  if (const auto* m = dynamic_cast<const SwiGluMlp*>(&ffn)) {
    return NewResidentSwiGlu(*m);
  }
  if (const auto* m = dynamic_cast<const LlamaMlp*>(&ffn)) {
    return NewResidentLlamaMlp(*m);
  }
  if (const auto* m = dynamic_cast<const Relu2Mlp*>(&ffn)) {
    return NewResidentRelu2Mlp(*m);
  }
  if (const auto* m = dynamic_cast<const GeluMlp*>(&ffn)) {
    return NewResidentGeluMlp(*m);
  }
  if (const auto* m = dynamic_cast<const FusedSwiGluMlp*>(&ffn)) {
    return NewResidentFusedSwiGlu(*m);
  }
  if (const auto* m = dynamic_cast<const TopKMoeMlp*>(&ffn)) {
    return NewResidentTopKMoe(*m);
  }
  return absl::UnimplementedError(
      "the resident executor has no form yet of this model's feed-forward "
      "layers (SwiGLU, squared-ReLU, GELU MLPs and top-k experts only)");
}

absl::StatusOr<std::unique_ptr<DeviceArray>> UploadVector(
    ExecutorDevice& device, absl::Span<const float> values) {
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceArray> array,
                         device.Allocate(static_cast<int64_t>(values.size())));
  TWICE_RETURN_IF_ERROR(device.CopyToDevice(values, array->floats()));
  return array;
}

int64_t ArrayBytes(const DeviceArray& array) {
  return array.floats().size * static_cast<int64_t>(sizeof(float));
}

}  // namespace twice::engine
