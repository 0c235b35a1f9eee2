// Prefill timings of the CUDA kernels on one GPU, printed as a Markdown
// table beside the device's measured ceilings (tests/cuda/device_check.sh
// runs it and stores the table under bench/results/).
//
//   cuda_prefill_bench [--tokens=2048,8192,16384,32768] [--batch=16]
//                      [--reps=3] [--sdpa=FILE] [--out=FILE]
//
// Rows (bf16 inputs/outputs, f32 accumulation and states):
//   based       fused Taylor feature map + chunked causal linear attention,
//               H 16, F 16, hd 64 (the Based 360M mixer core; q, k, v in,
//               y out)
//   based+proj  the whole Based linear-attention layer: q/k/v projections
//               (cuBLASLt, d 1024), the kernel, the output projection
//   jrt         the JRT-RNN prefix linear attention core: encoder pass over
//               E = T prefix tokens (non-causal, summed into the state), then
//               the causal scan over T tokens from it (the merge)
//   flash       the in-repo flash-style causal softmax attention (wmma), same
//               B, H, hd, T: the softmax baseline without PyTorch
//   sdpa        PyTorch scaled_dot_product_attention (flash), read from
//               --sdpa (lines "T ms"), or "skipped: no torch"
//   window      Based's sliding-window attention (window 256, H 16, hd 64,
//               f32), one sequence: the tiled kernel of a prefill pass
//   ssd         the Mamba-2 SSD scan of one 130M-shape layer (H 24, P 64,
//               N 128, f32), one sequence: the chunked form (Q 256) on the
//               tensor cores (TF32) and on the CUDA cores, and the
//               recurrent form (what reads under 64 tokens run); FLOPs are
//               the recurrence's 4·P·N per token and head for all three, so
//               their TFLOP/s compare directly
//   sample      kernels/sampling.h on logits [B, 50304] (GPT-2's vocabulary
//               50257, "T" is the vocabulary): greedy and temperature 0.8 with
//               top-k 50 and top-p 0.95, the per-step cost of a decode batch
// Whole models are the engine's, timed by cuda_engine_bench (there is one
// implementation of the model forward).
// FLOPs are the algorithm's (chunked form: 4·D·hd + C·(D + hd) per token
// and head, C = 32, D = 273; causal softmax: 2·T²·hd per head; GEMMs
// 2·m·n·k); bytes are the compulsory global traffic. Ceilings: a device-to-
// device copy (GB/s) and a 8192³ bf16 cuBLASLt GEMM (TFLOP/s).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/stream.h"
#include "kernels/sampling.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/status_macros.h"

namespace twice::kernels::cuda {
namespace {

constexpr int64_t kHeads = 16;
constexpr int64_t kF = 16;
constexpr int64_t kD = 1 + kF + kF * kF;
constexpr int64_t kHd = 64;
constexpr int64_t kModel = kHeads * kHd;  // d = 1024
constexpr int64_t kChunk = 32;
constexpr float kEps = 1e-12f;

struct Options {
  std::vector<int64_t> tokens = {2048, 8192, 16384, 32768};
  int64_t batch = 16;
  int reps = 3;
  std::string sdpa_file;
  std::string out_file;
};

struct Row {
  std::string name;
  int64_t batch = 0;
  int64_t tokens = 0;
  double ms = 0.0;
  double flops = 0.0;
  double bytes = 0.0;
  std::string note;
};

class Bench {
 public:
  Bench(const Options& options, Stream& stream, DeviceAllocator& allocator,
        GemmRunner& gemm)
      : o_(options), stream_(stream), alloc_(allocator), gemm_(gemm) {}

  absl::Status Run();
  void Print(std::FILE* f) const;

 private:
  // Best-of-reps milliseconds of `body` (one warm-up run first).
  absl::StatusOr<double> Time(const std::function<absl::Status()>& body,
                              int reps);
  absl::StatusOr<DeviceBuffer> Random(int64_t count, bool bf16, float scale);
  absl::Status Ceilings();
  absl::Status BasedRows(int64_t t);
  absl::Status FlashRow(int64_t t);
  absl::Status WindowRow(int64_t t);
  absl::Status SsdRows(int64_t t);
  absl::Status SampleRows();

  const Options& o_;
  Stream& stream_;
  DeviceAllocator& alloc_;
  GemmRunner& gemm_;
  uint64_t seed_ = 1;
  double peak_gbs_ = 0.0;
  double peak_tflops_ = 0.0;
  std::map<int64_t, double> sdpa_ms_;
  std::vector<Row> rows_;
};

absl::StatusOr<double> Bench::Time(const std::function<absl::Status()>& body,
                                   int reps) {
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<EventTimer> timer,
                         EventTimer::Create());
  TWICE_RETURN_IF_ERROR(body());
  TWICE_RETURN_IF_ERROR(stream_.Synchronize());
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    TWICE_RETURN_IF_ERROR(timer->Start(stream_));
    TWICE_RETURN_IF_ERROR(body());
    TWICE_RETURN_IF_ERROR(timer->Stop(stream_));
    TWICE_ASSIGN_OR_RETURN(float ms, timer->ElapsedMs());
    best = std::min(best, static_cast<double>(ms));
  }
  return best;
}

absl::StatusOr<DeviceBuffer> Bench::Random(int64_t count, bool bf16,
                                           float scale) {
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer buf,
                         alloc_.Allocate(count * (bf16 ? 2 : 4)));
  if (bf16) {
    TWICE_RETURN_IF_ERROR(
        FillUniform(stream_, buf.span<Bf16>(), seed_++, scale));
  } else {
    TWICE_RETURN_IF_ERROR(
        FillUniform(stream_, buf.span<float>(), seed_++, scale));
  }
  return buf;
}

absl::Status Bench::Ceilings() {
  const int64_t bytes = int64_t{2} << 30;
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer a, alloc_.Allocate(bytes));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer b, alloc_.Allocate(bytes));
  TWICE_ASSIGN_OR_RETURN(
      double copy_ms, Time(
                          [&]() -> absl::Status {
                            if (cudaMemcpyAsync(b.data(), a.data(), bytes,
                                                cudaMemcpyDeviceToDevice,
                                                stream_.get()) != cudaSuccess) {
                              return absl::InternalError("cudaMemcpyAsync");
                            }
                            return absl::OkStatus();
                          },
                          5));
  peak_gbs_ = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
  const int64_t n = 8192;
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer x, Random(n * n, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer w, Random(n * n, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer y, alloc_.Allocate(n * n * 2));
  TWICE_ASSIGN_OR_RETURN(
      double gemm_ms, Time(
                          [&] {
                            return gemm_.Linear(x.span<Bf16>(), w.span<Bf16>(),
                                                DeviceSpan<const Bf16>{},
                                                {n, n, n}, false,
                                                y.span<Bf16>());
                          },
                          5));
  peak_tflops_ = 2.0 * n * n * n / (gemm_ms * 1e-3) / 1e12;
  return absl::OkStatus();
}

double LinearAttentionFlops(int64_t tokens_heads) {
  return static_cast<double>(tokens_heads) *
         (4.0 * kD * kHd + kChunk * static_cast<double>(kD + kHd));
}

absl::Status Bench::BasedRows(int64_t t) {
  const int64_t b = o_.batch;
  const int64_t bth = b * t * kHeads;
  const FusedLinearAttentionDims dims{b, kHeads, kHd, kF};
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer q, Random(bth * kF, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer k, Random(bth * kF, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer v, Random(bth * kHd, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer y, alloc_.Allocate(bth * kHd * 2));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer kv,
                         alloc_.Allocate(b * kHeads * kHd * kD * 4));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer z, alloc_.Allocate(b * kHeads * kD * 4));
  auto reset = [&]() -> absl::Status {
    if (cudaMemsetAsync(kv.data(), 0, kv.bytes(), stream_.get()) !=
            cudaSuccess ||
        cudaMemsetAsync(z.data(), 0, z.bytes(), stream_.get()) != cudaSuccess) {
      return absl::InternalError("cudaMemsetAsync");
    }
    return absl::OkStatus();
  };
  const double state_bytes = 2.0 * (kv.bytes() + z.bytes());
  TWICE_ASSIGN_OR_RETURN(double ms, Time(
                                        [&]() -> absl::Status {
                                          TWICE_RETURN_IF_ERROR(reset());
                                          return LinearAttentionPrefillBf16(
                                              stream_, q.span<Bf16>(),
                                              k.span<Bf16>(), v.span<Bf16>(), t,
                                              dims, kEps, kv.span<float>(),
                                              z.span<float>(), y.span<Bf16>());
                                        },
                                        o_.reps));
  rows_.push_back({"based", b, t, ms, LinearAttentionFlops(bth),
                   bth * 2.0 * (2 * kF + 2 * kHd) + state_bytes,
                   "target <= 4.5 ms at 32k"});

  // JRT: encoder over E = T tokens, then the causal scan.
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer ke, Random(bth * kF, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer ve, Random(bth * kHd, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(
      ms, Time(
              [&]() -> absl::Status {
                TWICE_RETURN_IF_ERROR(reset());
                return PrefixLinearAttentionPrefillBf16(
                    stream_, q.span<Bf16>(), k.span<Bf16>(), v.span<Bf16>(), t,
                    ke.span<Bf16>(), ve.span<Bf16>(), t, dims, kEps,
                    kv.span<float>(), z.span<float>(), y.span<Bf16>());
              },
              o_.reps));
  rows_.push_back({"jrt", b, t, ms,
                   LinearAttentionFlops(bth) + bth * 2.0 * kD * kHd,
                   bth * 2.0 * (3 * kF + 3 * kHd) + state_bytes,
                   "E = T; target <= 5.6 ms at 32k"});
  ke = DeviceBuffer();
  ve = DeviceBuffer();

  // The whole layer with projections: x [B·T, d] bf16 -> out [B·T, d] f32.
  const int64_t n = b * t;
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer x, Random(n * kModel, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer wq,
                         Random(kHeads * kF * kModel, true, 0.03f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer wk,
                         Random(kHeads * kF * kModel, true, 0.03f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer wv, Random(kModel * kModel, true, 0.03f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer wo, Random(kModel * kModel, true, 0.03f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer out, alloc_.Allocate(n * kModel * 4));
  const DeviceSpan<const Bf16> none{};
  TWICE_ASSIGN_OR_RETURN(
      ms,
      Time(
          [&]() -> absl::Status {
            TWICE_RETURN_IF_ERROR(reset());
            TWICE_RETURN_IF_ERROR(gemm_.Linear(x.span<Bf16>(), wq.span<Bf16>(),
                                               none, {n, kHeads * kF, kModel},
                                               false, q.span<Bf16>()));
            TWICE_RETURN_IF_ERROR(gemm_.Linear(x.span<Bf16>(), wk.span<Bf16>(),
                                               none, {n, kHeads * kF, kModel},
                                               false, k.span<Bf16>()));
            TWICE_RETURN_IF_ERROR(gemm_.Linear(x.span<Bf16>(), wv.span<Bf16>(),
                                               none, {n, kModel, kModel}, false,
                                               v.span<Bf16>()));
            TWICE_RETURN_IF_ERROR(LinearAttentionPrefillBf16(
                stream_, q.span<Bf16>(), k.span<Bf16>(), v.span<Bf16>(), t,
                dims, kEps, kv.span<float>(), z.span<float>(), y.span<Bf16>()));
            return gemm_.Linear(y.span<Bf16>(), wo.span<Bf16>(),
                                DeviceSpan<const float>{}, {n, kModel, kModel},
                                false, out.span<float>());
          },
          o_.reps));
  const double gemm_flops =
      2.0 * n * kModel * (2.0 * kHeads * kF + 2.0 * kModel);
  rows_.push_back({"based+proj", b, t, ms,
                   gemm_flops + LinearAttentionFlops(bth),
                   n * 2.0 * kModel * 3 + n * 4.0 * kModel +
                       bth * 2.0 * (2 * kF + 2 * kHd) * 2 + state_bytes,
                   "layer incl. q/k/v/out projections"});
  return absl::OkStatus();
}

absl::Status Bench::FlashRow(int64_t t) {
  const int64_t b = o_.batch;
  const int64_t count = b * t * kHeads * kHd;
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer q, Random(count, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer k, Random(count, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer v, Random(count, true, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer y, alloc_.Allocate(count * 2));
  const int reps = t >= 16384 ? 1 : o_.reps;
  TWICE_ASSIGN_OR_RETURN(double ms, Time(
                                        [&] {
                                          return FlashAttentionBf16(
                                              stream_, q.span<Bf16>(),
                                              k.span<Bf16>(), v.span<Bf16>(), b,
                                              t, kHeads, kHd, 0.125f,
                                              y.span<Bf16>());
                                        },
                                        reps));
  rows_.push_back({"flash (in-repo)", b, t, ms,
                   2.0 * b * kHeads * static_cast<double>(t) * t * kHd,
                   4.0 * count * 2, "causal softmax baseline"});
  return absl::OkStatus();
}

// Based's sliding-window attention (window 256, 16 heads of 64, f32) over
// one sequence of t tokens: the tiled kernel (softmax_tiles_cuda.cu).
absl::Status Bench::WindowRow(int64_t t) {
  constexpr int64_t kWindow = 256;
  const int64_t count = t * kHeads * kHd;
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer q, Random(count, false, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer k, Random(count, false, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer v, Random(count, false, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer y, alloc_.Allocate(count * 4));
  const WindowAttentionDims dims{t, 0, kHeads, kHd, kWindow};
  TWICE_ASSIGN_OR_RETURN(double ms, Time(
                                        [&] {
                                          return WindowAttention(
                                              stream_, q.span<float>(),
                                              kHeads * kHd, k.span<float>(),
                                              v.span<float>(), dims, 0.125f,
                                              y.span<float>());
                                        },
                                        o_.reps));
  rows_.push_back({"window attention", 1, t, ms,
                   4.0 * kHeads * static_cast<double>(t) * (kWindow + 1) * kHd,
                   4.0 * count * 4, "Based 360M layer, window 256, f32"});
  return absl::OkStatus();
}

absl::Status Bench::SsdRows(int64_t t) {
  const SsdShape shape{24, 64, 1, 128};  // H, P, G, N
  const int64_t hp = shape.heads * shape.head_dim;
  const int64_t gn = shape.groups * shape.state;
  const int64_t stride = hp + 2 * gn;  // x, B, C side by side as in xBC
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer xbc, Random(t * stride, false, 1.0f));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer d, Random(shape.heads, false, 1.0f));
  // dt > 0 and A < 0, as the layer forms them (softplus, -exp).
  std::vector<float> dt_host(static_cast<size_t>(t * shape.heads));
  std::vector<float> a_host(static_cast<size_t>(shape.heads));
  for (size_t i = 0; i < dt_host.size(); ++i)
    dt_host[i] = 0.01f + 0.001f * (i % 97);
  for (size_t h = 0; h < a_host.size(); ++h) a_host[h] = -1.0f - 0.5f * h;
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer dt,
                         alloc_.AllocateArray<float>(t * shape.heads));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer a,
                         alloc_.AllocateArray<float>(shape.heads));
  TWICE_RETURN_IF_ERROR(Upload(dt_host, dt.span<float>(), stream_.get()));
  TWICE_RETURN_IF_ERROR(Upload(a_host, a.span<float>(), stream_.get()));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer state,
                         alloc_.Allocate(hp * shape.state * 4));
  TWICE_ASSIGN_OR_RETURN(DeviceBuffer y, alloc_.Allocate(t * hp * 4));
  const DeviceSpan<const float> x = xbc.span<float>();
  const double flops = 4.0 * t * shape.heads * shape.head_dim * shape.state;
  const double bytes = 4.0 * t * (stride + shape.heads + hp);
  // The chunked form on the tensor cores and on the CUDA cores; a chunk
  // longer than the chunked kernels take runs the recurrent form.
  struct Variant {
    const char* name;
    int64_t chunk;
    SsdMath math;
    const char* note;
  };
  const Variant variants[] = {
      {"ssd chunked (tensor cores)", 256, SsdMath::kTensorCores,
       "Mamba-2 130M layer, Q 256, TF32 products"},
      {"ssd chunked (f32)", 256, SsdMath::kF32,
       "Mamba-2 130M layer, Q 256, CUDA cores"},
      {"ssd recurrent", int64_t{1} << 20, SsdMath::kF32,
       "Mamba-2 130M layer, token by token"},
  };
  for (const Variant& variant : variants) {
    TWICE_ASSIGN_OR_RETURN(double ms,
                           Time(
                               [&]() -> absl::Status {
                                 return SsdChunkScan(
                                     stream_, alloc_, shape, t, variant.chunk,
                                     x, stride, x.subspan(hp, x.size - hp),
                                     x.subspan(hp + gn, x.size - hp - gn),
                                     stride, dt.span<float>(), a.span<float>(),
                                     d.span<float>(), state.span<float>(),
                                     y.span<float>(), variant.math);
                               },
                               t >= 16384 ? 1 : o_.reps));
    rows_.push_back({variant.name, 1, t, ms, flops, bytes, variant.note});
  }
  return absl::OkStatus();
}

absl::Status Bench::SampleRows() {
  constexpr int64_t kVocab = 50257, kStride = 50304;
  for (const int64_t b : {int64_t{1}, int64_t{64}, int64_t{256}}) {
    TWICE_ASSIGN_OR_RETURN(DeviceBuffer logits,
                           Random(b * kStride, false, 8.0f));
    TWICE_ASSIGN_OR_RETURN(DeviceBuffer ids, alloc_.Allocate(b * 4));
    for (const bool greedy : {true, false}) {
      SamplingRule rule;
      if (!greedy) rule = {.temperature = 0.8f, .top_k = 50, .top_p = 0.95f};
      std::vector<SamplingRule> rules(static_cast<size_t>(b), rule);
      for (int64_t i = 0; i < b; ++i) rules[i].seed = static_cast<uint64_t>(i);
      TWICE_ASSIGN_OR_RETURN(
          double ms, Time(
                         [&] {
                           return cuda::SampleRows(
                               stream_, alloc_, logits.span<float>(), b,
                               kStride, kVocab, rules, ids.span<int32_t>());
                         },
                         o_.reps));
      rows_.push_back({greedy ? "sample greedy" : "sample top-k/top-p", b,
                       kVocab, ms, 0.0, 4.0 * b * kVocab,
                       "T is the vocabulary"});
    }
  }
  return absl::OkStatus();
}

absl::Status Bench::Run() {
  if (!o_.sdpa_file.empty()) {
    std::ifstream in(o_.sdpa_file);
    int64_t t = 0;
    double ms = 0.0;
    while (in >> t >> ms) sdpa_ms_[t] = ms;
  }
  TWICE_RETURN_IF_ERROR(Ceilings());
  for (int64_t t : o_.tokens) {
    std::fprintf(stderr, "timing T=%lld\n", static_cast<long long>(t));
    TWICE_RETURN_IF_ERROR(BasedRows(t));
    TWICE_RETURN_IF_ERROR(FlashRow(t));
    TWICE_RETURN_IF_ERROR(WindowRow(t));
    TWICE_RETURN_IF_ERROR(SsdRows(t));
  }
  TWICE_RETURN_IF_ERROR(SampleRows());
  return stream_.Synchronize();
}

void Bench::Print(std::FILE* f) const {
  std::fprintf(f, "Device: %s\n\n", DeviceName(0).c_str());
  std::fprintf(f,
               "Measured ceilings: copy %.0f GB/s, bf16 GEMM (cuBLASLt "
               "8192^3) %.1f TFLOP/s\n\n",
               peak_gbs_, peak_tflops_);
  std::fprintf(f,
               "| case | B | T | ms | TFLOP/s | %% GEMM peak | GB/s | %% copy "
               "BW | SDPA ms | speed-up vs SDPA | note |\n");
  std::fprintf(f, "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows_) {
    const double tflops = r.flops / (r.ms * 1e-3) / 1e12;
    const double gbs = r.bytes / (r.ms * 1e-3) / 1e9;
    std::string sdpa = "-";
    std::string speedup = "-";
    const bool attention_row =
        r.name == "based" || r.name == "jrt" || r.name == "flash (in-repo)";
    if (attention_row && r.batch == o_.batch) {
      if (auto it = sdpa_ms_.find(r.tokens); it != sdpa_ms_.end()) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.2f", it->second);
        sdpa = buf;
        std::snprintf(buf, sizeof(buf), "%.1fx", it->second / r.ms);
        speedup = buf;
      } else {
        sdpa = "skipped: no torch";
      }
    }
    std::fprintf(f,
                 "| %s | %lld | %lld | %.3f | %.1f | %.0f%% | %.0f | %.0f%% | "
                 "%s | %s | %s |\n",
                 r.name.c_str(), static_cast<long long>(r.batch),
                 static_cast<long long>(r.tokens), r.ms, tflops,
                 100.0 * tflops / peak_tflops_, gbs, 100.0 * gbs / peak_gbs_,
                 sdpa.c_str(), speedup.c_str(), r.note.c_str());
  }
}

bool ParseArgs(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key) -> const char* {
      const std::string k = std::string(key) + "=";
      return a.rfind(k, 0) == 0 ? argv[i] + k.size() : nullptr;
    };
    if (const char* v = value("--tokens")) {
      o.tokens.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) o.tokens.push_back(std::stoll(item));
    } else if (const char* v = value("--batch")) {
      o.batch = std::stoll(v);
    } else if (const char* v = value("--reps")) {
      o.reps = std::max(1, std::atoi(v));
    } else if (const char* v = value("--sdpa")) {
      o.sdpa_file = v;
    } else if (const char* v = value("--out")) {
      o.out_file = v;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return false;
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, options)) return 2;
  if (DeviceCount() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  auto stream = Stream::Create(0);
  if (!stream.ok()) {
    std::fprintf(stderr, "%s\n", stream.status().ToString().c_str());
    return 1;
  }
  DeviceAllocator allocator(0);
  auto gemm = GemmRunner::Create(**stream, allocator);
  if (!gemm.ok()) {
    std::fprintf(stderr, "%s\n", gemm.status().ToString().c_str());
    return 1;
  }
  Bench bench(options, **stream, allocator, **gemm);
  const absl::Status status = bench.Run();
  bench.Print(stdout);
  if (!options.out_file.empty()) {
    if (std::FILE* f = std::fopen(options.out_file.c_str(), "a")) {
      bench.Print(f);
      std::fclose(f);
    }
  }
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace twice::kernels::cuda

int main(int argc, char** argv) {
  return twice::kernels::cuda::Main(argc, argv);
}
