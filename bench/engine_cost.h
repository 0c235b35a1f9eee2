// EngineCost: analytic work of a Based / JRT-RNN model, from its config,
// for benchmarks that print achieved rates next to measured ceilings.
//
// FLOPs count multiply-adds as 2 and only the useful work:
//   projections and MLP        2·m·n·k per GEMM (m = tokens read)
//   BaseConv                   + 2·K·C per token (depthwise taps)
//   Taylor feature map         (2F^2 + F) per featurized vector (q and k)
//   linear attention           the state form per token and head: 4·hd·D
//                              (S read and update) + 4·D (z, denominator).
//                              The chunked kernel also computes a C x C
//                              block (~1.6x this); that extra is not counted.
//   sliding-window attention   4·hd per (query, visible key) and head, over
//                              the causal band only (no masked corners)
//   JRT encoder (prefix read)  k_enc / v_enc projections, feature map and
//                              state fold 2·hd·D + D per encoder token, head
//   LM head                    2·d·V for the last position only
// Norms, SiLU, rotary and residual adds are not counted (< 1 %).
// Mamba-2 (config recognised by engine::IsMamba2ConfigJson), per layer:
//   in_proj / out_proj         2·T·D·(2E + 2GN + H) + 2·T·E·D
//   conv                       2·K·(E + 2GN) per token
//   SSD, chunked (Q = chunk)   per chunk of q tokens: C·B^T causal
//                              G·N·q(q+1), L·X causal H·P·q(q+1); per token
//                              and head 2·P·N (state -> output) + 2·P·N
//                              (chunk state update)
// Llama (HF LlamaForCausalLM), per layer:
//   q / k / v / o projections  2·T·D·(Hq·hd + 2·Hkv·hd) + 2·T·Hq·hd·D
//   causal attention           4·hd per (query, visible key) and query head:
//                              2·Hq·hd·T(T+1) for a read from position 0
//   SwiGLU MLP                 6·T·D·I
// RAT (CLAIRE-Labo layout), per RAT layer:
//   in_proj / out_proj         2·T·D·(3D + 2·G·hd) + 2·T·D·D
//   chunk attention            4·D per (token, key): token t sees its
//                              ⌊t/L⌋ closed chunks and its own open chunk
//   GELU FFN                   4·T·D·F
//   per SWA layer (RAT-SWA)    in_proj 2·T·D·3D, out 2·T·D·D, 4·D per
//                              (query, key in the window band)
//   The intra-chunk EMA, gates and RoPE are O(T·D) and not counted.
// Nemotron-H (transformers NemotronHForCausalLM), per layer of its kind:
//   M  as a Mamba-2 layer with E = mamba_num_heads · mamba_head_dim
//   *  as a Llama attention layer (no rotary), no MLP in the layer
//   -  relu² MLP 4·T·D·I
// Granite-4.0-H (dense), per layer: its Mamba-2 or attention mixer as
// above, plus the shared SwiGLU MLP 6·T·D·I.
//
// Bytes: weights at the bytes of the dtype they are held in (the caller
// says which). A decode step reads every weight once except the embedding rows
// (one row; the tied LM head reads the whole matrix) and, for JRT, the
// encoder projections.
#ifndef TWICE_BENCH_ENGINE_COST_H_
#define TWICE_BENCH_ENGINE_COST_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/config/based_config.h"
#include "engine/config/granite_hybrid_config.h"
#include "engine/config/llama_config.h"
#include "engine/config/mamba2_config.h"
#include "engine/config/nemotron_h_config.h"
#include "engine/config/rat_config.h"
#include "kernels/dtype.h"

namespace twice::bench {

class EngineCost {
 public:
  // `config_json` is the model's config.json (for the JRT encoder length,
  // enc_length, default 1024, which BasedConfig may not carry).
  [[nodiscard]] static absl::StatusOr<EngineCost> FromConfigJson(
      absl::string_view config_json);

  bool is_jrt() const { return jrt_; }
  // JRT encoder length M (0 for Based).
  int64_t encoder_length() const { return encoder_length_; }

  // Tokens a prefill of `prompt` tokens reads: a JRT prefix read left-pads a
  // prompt shorter than M to M.
  int64_t ReadTokens(int64_t prompt) const;
  // FLOPs of one prefill of `prompt` tokens into an empty state (JRT: a
  // prefix read), LM head of the last position included.
  double PrefillFlops(int64_t prompt) const;

  // All weights as held in memory, at `bytes_per_weight` (4 for f32, 2 for
  // bf16 / f16, Int8BytesPerWeight() for int8; the small f32 tensors of a
  // low-precision load are not counted).
  int64_t weight_bytes(double bytes_per_weight = 4) const {
    return static_cast<int64_t>(bytes_per_weight *
                                static_cast<double>(params_));
  }
  // Weights one decode step reads.
  int64_t decode_weight_bytes(double bytes_per_weight = 4) const {
    return static_cast<int64_t>(bytes_per_weight *
                                static_cast<double>(decode_params_));
  }
  // An int8 weight with its share of its block's f32 scale
  // (kernels/dtype.h), both of which a product reads.
  static constexpr double Int8BytesPerWeight() {
    return 1.0 + 4.0 / static_cast<double>(kernels::kI8Block);
  }

 private:
  EngineCost() = default;

  static int64_t LlamaParams(const engine::LlamaConfig& c);
  static int64_t RatParams(const engine::RatConfig& c);
  static int64_t NemotronHParams(const engine::NemotronHConfig& c);
  static int64_t GraniteParams(const engine::GraniteHybridConfig& c);
  // One expert of a mixture-of-experts layer (0 without experts).
  static int64_t GraniteExpertParams(const engine::GraniteHybridConfig& c);
  static double GranitePrefillFlops(const engine::GraniteHybridConfig& c,
                                    int64_t prompt);
  static double NemotronHPrefillFlops(const engine::NemotronHConfig& c,
                                      int64_t prompt);
  static double LlamaPrefillFlops(const engine::LlamaConfig& c, double t);
  static double RatPrefillFlops(const engine::RatConfig& c, int64_t prompt);

  engine::BasedConfig config_;
  std::optional<engine::Mamba2Config> mamba2_;  // set for a Mamba-2 model
  std::optional<engine::LlamaConfig> llama_;    // set for a Llama model
  std::optional<engine::RatConfig> rat_;        // set for a RAT model
  std::optional<engine::NemotronHConfig> nemotron_h_;   // a Nemotron-H model
  std::optional<engine::GraniteHybridConfig> granite_;  // a Granite-4.0-H
  bool jrt_ = false;
  int64_t encoder_length_ = 0;
  int64_t params_ = 0;
  int64_t decode_params_ = 0;
};

}  // namespace twice::bench

#endif  // TWICE_BENCH_ENGINE_COST_H_
