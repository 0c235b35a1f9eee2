#include "engine/layers/mamba2_mixer.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/causal_conv1d.h"
#include "kernels/linear.h"
#include "kernels/ssd_chunk_scan.h"
#include "kernels/ssm_gating.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::unique_ptr<Mamba2Mixer>> Mamba2Mixer::Load(
    const WeightMap& weights, const std::string& module,
    const Mamba2MixerOptions& o) {
  if (o.dim < 1 || o.head_dim < 1 || o.inner < o.head_dim ||
      o.inner % o.head_dim != 0 || o.n_groups < 1 ||
      o.heads() % o.n_groups != 0 || o.d_state < 1 || o.d_conv < 1 ||
      o.chunk < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Mamba2Mixer: the head dimension (", o.head_dim,
                     ") must divide the inner width (", o.inner,
                     ") and the groups (", o.n_groups, ") the heads"));
  }
  std::unique_ptr<Mamba2Mixer> m(new Mamba2Mixer());
  const std::string& p = module;
  const int64_t d = o.dim;
  const int64_t e = o.inner;
  const int64_t h = o.heads();
  const int64_t conv_dim = o.conv_dim();
  TWICE_ASSIGN_OR_RETURN(m->in_proj_, weights.GetMatrix(p + "in_proj.weight",
                                                        {o.in_proj_dim(), d}));
  TWICE_ASSIGN_OR_RETURN(
      m->conv_w_, weights.Get(p + "conv1d.weight", {conv_dim, 1, o.d_conv}));
  TWICE_ASSIGN_OR_RETURN(m->conv_b_,
                         weights.Get(p + "conv1d.bias", {conv_dim}));
  TWICE_ASSIGN_OR_RETURN(m->dt_bias_, weights.Get(p + "dt_bias", {h}));
  TWICE_ASSIGN_OR_RETURN(Tensor a_log, weights.Get(p + "A_log", {h}));
  TWICE_ASSIGN_OR_RETURN(m->d_, weights.Get(p + "D", {h}));
  TWICE_ASSIGN_OR_RETURN(m->norm_w_, weights.Get(p + "norm.weight", {e}));
  TWICE_ASSIGN_OR_RETURN(m->out_proj_,
                         weights.GetMatrix(p + "out_proj.weight", {d, e}));
  m->a_.resize(h);
  for (int64_t i = 0; i < h; ++i) m->a_[i] = -std::exp(a_log.data()[i]);
  m->dim_ = d;
  m->inner_ = e;
  m->groups_ = o.n_groups;
  m->chunk_ = o.chunk;
  m->in_proj_dim_ = o.in_proj_dim();
  m->gated_norm_eps_ = o.gated_norm_eps;
  m->shape_ = Mamba2StateShape{o.d_conv, conv_dim, h, o.head_dim, o.d_state};
  return m;
}

std::unique_ptr<LayerState> Mamba2Mixer::NewState() const {
  return std::make_unique<Mamba2State>(shape_);
}

absl::Status Mamba2Mixer::ValidateState(LayerState& state,
                                        int64_t start_pos) const {
  return CheckState(state).status();
}

absl::StatusOr<Mamba2State*> Mamba2Mixer::CheckState(LayerState& state) const {
  auto* s = dynamic_cast<Mamba2State*>(&state);
  if (s == nullptr || !(s->shape() == shape_)) {
    return absl::FailedPreconditionError(
        "Mamba2Mixer: layer state is not a matching mamba2 state");
  }
  return s;
}

absl::Status Mamba2Mixer::GateNormOut(absl::Span<const float> zxbcdt,
                                      std::vector<float>& y, int64_t rows,
                                      absl::Span<float> out) const {
  TWICE_RETURN_IF_ERROR(kernels::GatedGroupRmsNorm(
      zxbcdt, in_proj_dim_, y, rows, inner_, groups_, norm_w_.span(),
      gated_norm_eps_, absl::MakeSpan(y)));
  return kernels::Linear(y, rows, inner_, out_proj_, dim_, {}, out);
}

absl::Status Mamba2Mixer::Forward(absl::Span<const float> x, int64_t tokens,
                                  int64_t /*start_pos*/, LayerState& state,
                                  absl::Span<float> out) const {
  TWICE_ASSIGN_OR_RETURN(Mamba2State * s, CheckState(state));
  const int64_t c = shape_.conv_dim;
  const int64_t gn = groups_ * shape_.state_dim;
  std::vector<float> zxbcdt(tokens * in_proj_dim_);
  TWICE_RETURN_IF_ERROR(kernels::Linear(x, tokens, dim_, in_proj_, in_proj_dim_,
                                        {}, absl::MakeSpan(zxbcdt)));
  std::vector<float> conv(tokens * c);  // [T, conv_dim] = x | B | C
  TWICE_RETURN_IF_ERROR(
      kernels::CausalConv1d(absl::MakeConstSpan(zxbcdt).subspan(inner_), tokens,
                            c, in_proj_dim_, conv_w_.span(), shape_.conv_kernel,
                            s->conv_tail(), absl::MakeSpan(conv)));
  TWICE_RETURN_IF_ERROR(
      kernels::BiasSiluRows(absl::MakeSpan(conv), tokens, conv_b_.span()));
  std::vector<float> delta(tokens * shape_.heads);
  TWICE_RETURN_IF_ERROR(kernels::SoftplusBiasRows(
      absl::MakeConstSpan(zxbcdt).subspan(inner_ + c), tokens, in_proj_dim_,
      dt_bias_.span(), absl::MakeSpan(delta)));
  std::vector<float> y(tokens * inner_);
  const kernels::SsdShape ssd{shape_.heads, shape_.head_dim, groups_,
                              shape_.state_dim};
  const absl::Span<const float> conv_view = conv;
  TWICE_RETURN_IF_ERROR(kernels::SsdChunkScan(
      ssd, tokens, chunk_, conv_view, c, conv_view.subspan(inner_),
      conv_view.subspan(inner_ + gn), c, delta, a_, d_.span(), s->ssm(),
      absl::MakeSpan(y)));
  return GateNormOut(zxbcdt, y, tokens, out);
}

absl::Status Mamba2Mixer::StepBatch(absl::Span<const float> x,
                                    absl::Span<LayerState* const> states,
                                    absl::Span<const int64_t> /*positions*/,
                                    absl::Span<float> out) const {
  const int64_t rows = static_cast<int64_t>(states.size());
  std::vector<Mamba2State*> ss(states.size());
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_ASSIGN_OR_RETURN(ss[b], CheckState(*states[b]));
  }
  const int64_t c = shape_.conv_dim;
  const int64_t gn = groups_ * shape_.state_dim;
  std::vector<float> zxbcdt(rows * in_proj_dim_);
  TWICE_RETURN_IF_ERROR(kernels::Linear(x, rows, dim_, in_proj_, in_proj_dim_,
                                        {}, absl::MakeSpan(zxbcdt)));
  std::vector<float> conv(rows * c);
  for (int64_t b = 0; b < rows; ++b) {
    TWICE_RETURN_IF_ERROR(kernels::CausalConv1d(
        absl::MakeConstSpan(zxbcdt).subspan(b * in_proj_dim_ + inner_, c), 1, c,
        in_proj_dim_, conv_w_.span(), shape_.conv_kernel, ss[b]->conv_tail(),
        absl::MakeSpan(conv).subspan(b * c, c)));
  }
  TWICE_RETURN_IF_ERROR(
      kernels::BiasSiluRows(absl::MakeSpan(conv), rows, conv_b_.span()));
  std::vector<float> delta(rows * shape_.heads);
  TWICE_RETURN_IF_ERROR(kernels::SoftplusBiasRows(
      absl::MakeConstSpan(zxbcdt).subspan(inner_ + c), rows, in_proj_dim_,
      dt_bias_.span(), absl::MakeSpan(delta)));
  std::vector<float> y(rows * inner_);
  const kernels::SsdShape ssd{shape_.heads, shape_.head_dim, groups_,
                              shape_.state_dim};
  const absl::Span<const float> conv_view = conv;
  for (int64_t b = 0; b < rows; ++b) {
    const absl::Span<const float> row = conv_view.subspan(b * c, c);
    TWICE_RETURN_IF_ERROR(kernels::SsdStep(
        ssd, row.subspan(0, inner_), row.subspan(inner_, gn),
        row.subspan(inner_ + gn, gn),
        absl::MakeConstSpan(delta).subspan(b * shape_.heads, shape_.heads), a_,
        d_.span(), ss[b]->ssm(),
        absl::MakeSpan(y).subspan(b * inner_, inner_)));
  }
  return GateNormOut(zxbcdt, y, rows, out);
}

}  // namespace twice::engine
