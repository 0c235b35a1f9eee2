// Granite-4.0-H's MLPs on a device, s its residual multiplier:
// - FusedSwiGluMlp, dense: x += s · MLP(h) (device_fused_swiglu.h);
// - TopKMoeMlp, experts: x += s · (Shared(h) + Σ_k g_k · Expert_k(h)).
// A decode step routes on the device, per (row, choice) pair: the router's
// logits become each row's k experts and gates there (RouteTopKPairs),
// each expert's products run over its pairs (RoutedLinear, every used
// expert's weights read once), and the combine adds each row's k gated
// results in ascending expert order, as the host layer does; nothing
// comes back, so the step can be recorded. The rows a step pads its
// batch with take no expert (their products are zeros), so padding reads
// no expert's weights that the real rows do not. A prefill pass routes on the
// host: the router logits [rows, E] come back (one wait per layer and
// pass), RouteTopK (kernels/top_k_routing.h, the host layer's own routing)
// groups the rows by expert, the table goes up once, and the gathered rows
// of each expert are one contiguous block and one GEMM pair (what many
// rows per expert want).
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "engine/executor/device_fused_swiglu.h"
#include "engine/executor/resident_layers.h"
#include "kernels/status_macros.h"
#include "kernels/top_k_routing.h"

namespace twice::engine {
namespace {

class ResidentFusedSwiGlu final : public ResidentFeedForward {
 public:
  explicit ResidentFusedSwiGlu(const FusedSwiGluMlp& mlp) : mlp_(mlp) {}

  absl::Status Load(ExecutorDevice& dev) override { return mlp_.Load(dev); }
  int64_t ScratchFloats(int64_t rows) const override {
    return mlp_.ScratchFloats(rows);
  }
  int64_t weight_bytes() const override { return mlp_.weight_bytes(); }
  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& /*pass*/,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    return mlp_.Forward(dev, in, scratch, x, ResidualAdd());
  }

 private:
  DeviceFusedSwiGlu mlp_;
};

class ResidentTopKMoe final : public ResidentFeedForward {
 public:
  explicit ResidentTopKMoe(const TopKMoeMlp& moe)
      : moe_(moe), shared_(moe.shared()) {
    for (int64_t e = 0; e < moe.shape().experts; ++e) {
      experts_.emplace_back(moe.expert(e));
    }
  }

  absl::Status Load(ExecutorDevice& dev) override {
    TWICE_ASSIGN_OR_RETURN(router_, dev.UploadMatrix(moe_.router()));
    TWICE_RETURN_IF_ERROR(shared_.Load(dev));
    std::vector<const DeviceMatrix*> inputs, outputs;
    for (DeviceFusedSwiGlu& expert : experts_) {
      TWICE_RETURN_IF_ERROR(expert.Load(dev));
      inputs.push_back(&expert.input());
      outputs.push_back(&expert.output());
    }
    TWICE_ASSIGN_OR_RETURN(inputs_, dev.UploadMatrixTable(inputs));
    TWICE_ASSIGN_OR_RETURN(outputs_, dev.UploadMatrixTable(outputs));
    return absl::OkStatus();
  }
  // shared sum o [rows, d] | router logits [rows, E] | then a prefill's
  // gathered rows and expert results [rows·k, d] each, or a step's pair
  // experts and gates [rows·k] each, expert inputs [rows·k, 2 ff], their
  // SwiGLU [rows·k, ff] and results [rows·k, d] | one MLP's workspace.
  int64_t ScratchFloats(int64_t rows) const override {
    const TopKMoeShape& s = moe_.shape();
    const int64_t n = rows * s.top_k;
    int64_t mlp = shared_.ScratchFloats(rows);
    int64_t pairs = 0;
    if (!experts_.empty()) {
      mlp = std::max(mlp, experts_.front().ScratchFloats(rows));
      pairs = 2 * n + 3 * n * experts_.front().hidden() + n * s.dim;
    }
    return rows * s.dim + rows * s.experts + std::max(2 * n * s.dim, pairs) +
           mlp;
  }
  int64_t weight_bytes() const override {
    int64_t bytes = router_->bytes() + shared_.weight_bytes();
    for (const DeviceFusedSwiGlu& expert : experts_) {
      bytes += expert.weight_bytes();
    }
    return bytes;
  }
  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = in.rows;
    const TopKMoeShape& s = moe_.shape();
    const int64_t d = s.dim;
    const DeviceFloats o = scratch.sub(0, rows * d);
    const DeviceFloats logits = scratch.sub(o.size, rows * s.experts);
    const DeviceFloats rest =
        scratch.sub(o.size + logits.size, scratch.size - o.size - logits.size);
    // The router's product normalizes h; the shared expert reads it then.
    const LinearOutput router[] = {{router_.get(), logits, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, router));
    if (pass.step != nullptr) {
      return RouteOnDevice(dev, pass.pad_rows(), in, o, logits, rest, x);
    }
    return RouteOnHost(dev, in, o, logits, rest, x);
  }

 private:
  // A step: routes, products and combine on the device (see the top).
  absl::Status RouteOnDevice(ExecutorDevice& dev, const StepPadRows& padding,
                             const LayerInput& in, DeviceFloats o,
                             DeviceFloats logits, DeviceFloats rest,
                             DeviceFloats x) {
    const int64_t rows = in.rows;
    const TopKMoeShape& s = moe_.shape();
    const int64_t n = rows * s.top_k, ff = experts_.front().hidden();
    int64_t at = 0;
    auto take = [&](int64_t floats) {
      const DeviceFloats part = rest.sub(at, floats);
      at += floats;
      return part;
    };
    const DeviceFloats experts = take(n), gates = take(n);
    const DeviceFloats u = take(n * 2 * ff), a = take(n * ff);
    const DeviceFloats results = take(n * s.dim);
    const DeviceFloats mlp = rest.sub(at, rest.size - at);
    TWICE_RETURN_IF_ERROR(shared_.Forward(
        dev, LayerInput::Normalized(in.h, rows, s.dim), mlp, o, {}));
    TWICE_RETURN_IF_ERROR(dev.RouteTopKPairs(logits, rows, s.experts, s.top_k,
                                             padding, experts, gates));
    // Each pair reads its row of h: pairs r·k .. r·k + k - 1 share row r.
    TWICE_RETURN_IF_ERROR(
        dev.RoutedLinear(in.h, s.top_k, *inputs_, experts, n, u));
    // The gate is the first half of each row of u, as in an expert.
    TWICE_RETURN_IF_ERROR(
        dev.SiluMul(u, 2 * ff, u.sub(ff, u.size - ff), 2 * ff, n, ff, a));
    TWICE_RETURN_IF_ERROR(
        dev.RoutedLinear(a, 1, *outputs_, experts, n, results));
    return dev.CombineRoutedPairs(o, results, s.dim, rows, s.top_k, gates,
                                  residual_scale(), x);
  }

  // A prefill pass: routes on the host, one GEMM pair per expert's block.
  absl::Status RouteOnHost(ExecutorDevice& dev, const LayerInput& in,
                           DeviceFloats o, DeviceFloats logits,
                           DeviceFloats rest, DeviceFloats x) {
    const int64_t rows = in.rows;
    const TopKMoeShape& s = moe_.shape();
    const int64_t d = s.dim, n = rows * s.top_k;
    const DeviceFloats gathered = rest.sub(0, n * d);
    const DeviceFloats results = rest.sub(n * d, n * d);
    const DeviceFloats mlp = rest.sub(2 * n * d, rest.size - 2 * n * d);
    const DeviceFloats h = in.h;
    TWICE_RETURN_IF_ERROR(
        shared_.Forward(dev, LayerInput::Normalized(h, rows, d), mlp, o, {}));
    host_logits_.resize(static_cast<size_t>(logits.size));
    TWICE_RETURN_IF_ERROR(dev.CopyToHost(logits, absl::MakeSpan(host_logits_)));
    TWICE_ASSIGN_OR_RETURN(
        kernels::TopKRoutes routes,
        kernels::RouteTopK(host_logits_, rows, s.experts, s.top_k));
    TWICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceRoutes> device_routes,
                           dev.UploadRoutes(std::move(routes)));
    const kernels::TopKRoutes& table = device_routes->routes();
    TWICE_RETURN_IF_ERROR(dev.GatherRows(h, d, *device_routes, gathered));
    for (int64_t e = 0; e < s.experts; ++e) {
      const int64_t begin = table.expert_begin[e];
      const int64_t count = table.expert_begin[e + 1] - begin;
      if (count == 0) continue;
      TWICE_RETURN_IF_ERROR(experts_[e].Forward(
          dev,
          LayerInput::Normalized(gathered.sub(begin * d, count * d), count, d),
          mlp, results.sub(begin * d, count * d), {}));
    }
    return dev.CombineRoutedRows(o, results, d, *device_routes,
                                 residual_scale(), x);
  }

  const TopKMoeMlp& moe_;
  DeviceFusedSwiGlu shared_;
  std::vector<DeviceFusedSwiGlu> experts_;
  std::unique_ptr<DeviceMatrix> router_;
  // The experts' input and output matrices, indexed on the device.
  std::unique_ptr<DeviceMatrixTable> inputs_, outputs_;
  std::vector<float> host_logits_;
};

}  // namespace

std::unique_ptr<ResidentFeedForward> NewResidentFusedSwiGlu(
    const FusedSwiGluMlp& m) {
  return std::make_unique<ResidentFusedSwiGlu>(m);
}

std::unique_ptr<ResidentFeedForward> NewResidentTopKMoe(const TopKMoeMlp& m) {
  return std::make_unique<ResidentTopKMoe>(m);
}

}  // namespace twice::engine
