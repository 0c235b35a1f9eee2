// Granite-4.0-H's MLPs on a device, s its residual multiplier:
// - FusedSwiGluMlp, dense: x += s · MLP(h) (device_fused_swiglu.h);
// - TopKMoeMlp, experts: x += s · (Shared(h) + Σ_k g_k · Expert_k(h)).
// The mixture routes on the host: the router logits [rows, E] come back
// (one wait per layer and pass), RouteTopK (kernels/top_k_routing.h, the
// host layer's own routing) groups the rows by expert, and the table goes
// up once; then the gathered rows of each expert are one contiguous block
// and one GEMM pair, and the combine adds each row's k gated results in
// ascending expert order, as the host layer does.
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
  absl::Status Forward(ExecutorDevice& dev, const LayerInput& in,
                       DeviceFloats scratch, DeviceFloats x) override {
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
    for (DeviceFusedSwiGlu& expert : experts_) {
      TWICE_RETURN_IF_ERROR(expert.Load(dev));
    }
    return absl::OkStatus();
  }
  // shared sum o [rows, d] | router logits [rows, E] | gathered rows and
  // expert results [rows·k, d] each | one MLP's workspace.
  int64_t ScratchFloats(int64_t rows) const override {
    const TopKMoeShape& s = moe_.shape();
    int64_t mlp = shared_.ScratchFloats(rows);
    if (!experts_.empty()) {
      mlp = std::max(mlp, experts_.front().ScratchFloats(rows));
    }
    return rows * s.dim + rows * s.experts + 2 * rows * s.top_k * s.dim + mlp;
  }
  int64_t weight_bytes() const override {
    int64_t bytes = router_->bytes() + shared_.weight_bytes();
    for (const DeviceFusedSwiGlu& expert : experts_) {
      bytes += expert.weight_bytes();
    }
    return bytes;
  }
  // The router's logits come back to the host for the routing.
  bool routes_on_host() const override { return true; }
  absl::Status Forward(ExecutorDevice& dev, const LayerInput& in,
                       DeviceFloats scratch, DeviceFloats x) override {
    const int64_t rows = in.rows;
    const TopKMoeShape& s = moe_.shape();
    const int64_t d = s.dim, n = rows * s.top_k;
    const DeviceFloats o = scratch.sub(0, rows * d);
    const DeviceFloats logits = scratch.sub(o.size, rows * s.experts);
    const DeviceFloats gathered = scratch.sub(o.size + logits.size, n * d);
    const DeviceFloats results =
        scratch.sub(o.size + logits.size + gathered.size, n * d);
    const int64_t used = o.size + logits.size + gathered.size + results.size;
    const DeviceFloats mlp = scratch.sub(used, scratch.size - used);

    // The router's product normalizes h; the shared expert reads it then.
    const LinearOutput router[] = {{router_.get(), logits, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, router));
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

 private:
  const TopKMoeMlp& moe_;
  DeviceFusedSwiGlu shared_;
  std::vector<DeviceFusedSwiGlu> experts_;
  std::unique_ptr<DeviceMatrix> router_;
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
