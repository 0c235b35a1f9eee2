// The resident form of each host layer an executor can run, and the
// helpers the layers share.
//
//   Mamba2Mixer             -> SSD mixer (conv tail + SSM state per slot)
//   BaseConv                -> gated short convolution (conv tail per slot)
//   BasedLinearAttention    -> Taylor linear attention (S and z per slot)
//   PrefixLinearAttention   -> the same with JRT-RNN's prefix encoder
//   SlidingWindowAttention  -> window attention (key/value ring per slot)
//   LlamaAttention          -> causal GQA attention over a paged KV cache
//                              (blocks of the executor's KvBlockTable)
//   SwiGluMlp, LlamaMlp     -> SwiGLU MLPs (fused fc1 / gate and up)
//   RatAttention            -> RAT: open chunk per slot, closed chunks in
//                              a paged pool (the chunk block table)
//   RatSwaAttention         -> window attention (RAT-SWA's window layers)
//   Relu2Mlp, GeluMlp       -> non-gated MLPs (Nemotron-H, RAT)
//   FusedSwiGluMlp          -> Granite-4.0-H's SwiGLU (gate rows first)
//   TopKMoeMlp              -> Granite-4.0-H's mixture of experts: shared
//                              MLP + top-k experts, routed on the device
//                              in steps and on the host in prefill
//   FeedForwardMixer        -> any of those MLPs as a layer of its own
//
// Any other layer is UNIMPLEMENTED: a model holding one runs on the offload
// path.
#ifndef TWICE_ENGINE_EXECUTOR_RESIDENT_LAYERS_H_
#define TWICE_ENGINE_EXECUTOR_RESIDENT_LAYERS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/executor/executor_device.h"
#include "engine/executor/resident_layer.h"
#include "engine/layers/base_conv.h"
#include "engine/layers/based_linear_attention.h"
#include "engine/layers/feed_forward.h"
#include "engine/layers/feed_forward_mixer.h"
#include "engine/layers/fused_swiglu_mlp.h"
#include "engine/layers/gelu_mlp.h"
#include "engine/layers/llama_attention.h"
#include "engine/layers/llama_mlp.h"
#include "engine/layers/mamba2_mixer.h"
#include "engine/layers/mixer.h"
#include "engine/layers/prefix_linear_attention.h"
#include "engine/layers/rat_attention.h"
#include "engine/layers/rat_swa_attention.h"
#include "engine/layers/relu2_mlp.h"
#include "engine/layers/sliding_window_attention.h"
#include "engine/layers/swiglu_mlp.h"
#include "engine/layers/top_k_moe_mlp.h"

namespace twice::engine {

// The resident form of `mixer` / `ffn` (which must outlive it), or
// UNIMPLEMENTED naming the layer.
[[nodiscard]] absl::StatusOr<std::unique_ptr<ResidentMixer>> NewResidentMixer(
    const Mixer& mixer);
[[nodiscard]] absl::StatusOr<std::unique_ptr<ResidentFeedForward>>
NewResidentFeedForward(const FeedForward& ffn);

std::unique_ptr<ResidentMixer> NewResidentMamba2Mixer(const Mamba2Mixer& m);
std::unique_ptr<ResidentMixer> NewResidentBaseConv(const BaseConv& m);
std::unique_ptr<ResidentMixer> NewResidentLinearAttention(
    const BasedLinearAttention& m);
std::unique_ptr<ResidentMixer> NewResidentPrefixLinearAttention(
    const PrefixLinearAttention& m);
std::unique_ptr<ResidentMixer> NewResidentWindowAttention(
    const SlidingWindowAttention& m);
std::unique_ptr<ResidentMixer> NewResidentFullAttention(
    const LlamaAttention& m);
std::unique_ptr<ResidentFeedForward> NewResidentSwiGlu(const SwiGluMlp& m);
std::unique_ptr<ResidentFeedForward> NewResidentLlamaMlp(const LlamaMlp& m);
std::unique_ptr<ResidentMixer> NewResidentRatAttention(const RatAttention& m);
std::unique_ptr<ResidentMixer> NewResidentRatSwaAttention(
    const RatSwaAttention& m);
std::unique_ptr<ResidentFeedForward> NewResidentRelu2Mlp(const Relu2Mlp& m);
std::unique_ptr<ResidentFeedForward> NewResidentGeluMlp(const GeluMlp& m);
std::unique_ptr<ResidentFeedForward> NewResidentFusedSwiGlu(
    const FusedSwiGluMlp& m);
std::unique_ptr<ResidentFeedForward> NewResidentTopKMoe(const TopKMoeMlp& m);
std::unique_ptr<ResidentMixer> NewResidentFeedForwardMixer(
    std::unique_ptr<ResidentFeedForward> ffn);

// A host vector as a new device array.
[[nodiscard]] absl::StatusOr<std::unique_ptr<DeviceArray>> UploadVector(
    ExecutorDevice& device, absl::Span<const float> values);
// Bytes of a device array's floats.
int64_t ArrayBytes(const DeviceArray& array);

}  // namespace twice::engine

#endif  // TWICE_ENGINE_EXECUTOR_RESIDENT_LAYERS_H_
