// The CUDA executor device's sequence-mixer and element-wise operations
// (cuda_executor_device.h): convolutions, Mamba-2's gating and SSD scans,
// linear and window attention, each a cuda_ops.h call on the device's
// stream.
#if TWICE_HAVE_CUDA
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/executor/cuda_device_arrays.h"
#include "engine/executor/cuda_executor_device.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/status_macros.h"

namespace twice::engine::cuda_executor {

absl::Status CudaExecutorDevice::CausalConv1d(
    DeviceFloats x, int64_t tokens, int64_t channels, int64_t x_stride,
    DeviceFloats weight, int64_t kernel_size, DeviceFloats tail,
    DeviceFloats out) {
  return cuda::CausalConv1d(*stream_, ConstSpan(x), tokens, channels, x_stride,
                            ConstSpan(weight), kernel_size, Span(tail),
                            Span(out));
}

absl::Status CudaExecutorDevice::BiasSiluRows(DeviceFloats x, int64_t rows,
                                              DeviceFloats bias) {
  return cuda::BiasSiluRows(*stream_, Span(x), rows, ConstSpan(bias));
}

absl::Status CudaExecutorDevice::SoftplusBiasRows(DeviceFloats raw,
                                                  int64_t rows, int64_t stride,
                                                  DeviceFloats bias,
                                                  DeviceFloats out) {
  return cuda::SoftplusBiasRows(*stream_, ConstSpan(raw), rows, stride,
                                ConstSpan(bias), Span(out));
}

absl::Status CudaExecutorDevice::GatedGroupRmsNorm(
    DeviceFloats z, int64_t z_stride, DeviceFloats y, int64_t rows,
    int64_t width, int64_t groups, DeviceFloats weight, double eps,
    DeviceFloats out) {
  return cuda::GatedGroupRmsNorm(*stream_, ConstSpan(z), z_stride, ConstSpan(y),
                                 rows, width, groups, ConstSpan(weight), eps,
                                 Span(out));
}

absl::Status CudaExecutorDevice::SsdChunkScan(
    const kernels::SsdShape& shape, int64_t tokens, int64_t chunk,
    DeviceFloats x, int64_t x_stride, DeviceFloats b, DeviceFloats c,
    int64_t bc_stride, DeviceFloats dt, DeviceFloats a, DeviceFloats d,
    DeviceFloats state, DeviceFloats y) {
  return cuda::SsdChunkScan(*stream_, allocator_, shape, tokens, chunk,
                            ConstSpan(x), x_stride, ConstSpan(b), ConstSpan(c),
                            bc_stride, ConstSpan(dt), ConstSpan(a),
                            ConstSpan(d), Span(state), Span(y));
}

absl::StatusOr<std::unique_ptr<DevicePassSegments>>
CudaExecutorDevice::UploadPassSegments(
    absl::Span<const kernels::PassSegment> segments, int64_t rows,
    int64_t slots) {
  TWICE_RETURN_IF_ERROR(
      kernels::CheckPassSegments("UploadPassSegments", segments, rows, slots));
  std::vector<int64_t> packed;
  packed.reserve(4 * segments.size());
  for (const kernels::PassSegment& s : segments) {
    packed.insert(packed.end(), {s.first_row, s.rows, s.slot, s.start});
  }
  const int64_t bytes = static_cast<int64_t>(packed.size() * sizeof(int64_t));
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceBuffer device, allocator_.Allocate(bytes));
  if (bytes > 0) {
    TWICE_RETURN_IF_ERROR(stream_->Upload(packed.data(), device.data(), bytes));
  }
  traffic_.bytes_to_device += bytes;
  return std::unique_ptr<DevicePassSegments>(
      std::make_unique<CudaPassSegments>(segments, rows, std::move(device)));
}

namespace {

// `segments` as this device uploaded them.
absl::StatusOr<cuda::DevicePassSegments> OnDevice(
    const DevicePassSegments& segments) {
  const auto* own = dynamic_cast<const CudaPassSegments*>(&segments);
  if (own == nullptr) {
    return absl::InvalidArgumentError(
        "the pass's segments were not uploaded by this CUDA device");
  }
  return own->view();
}

}  // namespace

absl::Status CudaExecutorDevice::CausalConv1dSegments(
    DeviceFloats x, int64_t channels, int64_t x_stride, DeviceFloats weight,
    int64_t kernel_size, DeviceFloats tails, const DevicePassSegments& segments,
    DeviceFloats out) {
  // One sequence, or no tail to carry: the one-sequence kernel per segment.
  if (segments.segments().size() < 2 || kernel_size < 2) {
    return ExecutorDevice::CausalConv1dSegments(
        x, channels, x_stride, weight, kernel_size, tails, segments, out);
  }
  TWICE_ASSIGN_OR_RETURN(const cuda::DevicePassSegments on_device,
                         OnDevice(segments));
  return cuda::CausalConv1dSegments(
      *stream_, ConstSpan(x), segments.rows(), channels, x_stride,
      ConstSpan(weight), kernel_size, Span(tails), on_device, Span(out));
}

absl::Status CudaExecutorDevice::RatChunkScanSegments(
    DeviceFloats proj, int64_t proj_stride, DeviceFloats gate_bias,
    const DevicePassSegments& segments, const kernels::RatPagedDims& dims,
    const DeviceBlockTable& row_table, DeviceFloats open, DeviceFloats closed,
    DeviceFloats q_out, DeviceFloats k_out, DeviceFloats v_out,
    DeviceFloats z_out) {
  TWICE_ASSIGN_OR_RETURN(const cuda::DevicePassSegments on_device,
                         OnDevice(segments));
  return cuda::RatChunkScanSegments(
      *stream_, ConstSpan(proj), proj_stride, ConstSpan(gate_bias),
      segments.rows(), on_device, WithTableWidth(dims, row_table),
      static_cast<const CudaBlockTable&>(row_table).view(), Span(open),
      Span(closed), Span(q_out), Span(k_out), Span(v_out), Span(z_out));
}

absl::Status CudaExecutorDevice::SsdChunkScanSegments(
    const kernels::SsdShape& shape, int64_t chunk, DeviceFloats x,
    int64_t x_stride, DeviceFloats b, DeviceFloats c, int64_t bc_stride,
    DeviceFloats dt, DeviceFloats a, DeviceFloats d, DeviceFloats states,
    const DevicePassSegments& segments, DeviceFloats y) {
  // SsdChunkScan runs a read this short in the recurrent form anyway;
  // a longer one is faster chunked, one segment at a time.
  const auto list = segments.segments();
  const bool all_short =
      std::all_of(list.begin(), list.end(), [](const kernels::PassSegment& s) {
        return s.rows < cuda::kSsdChunkedMinTokens;
      });
  if (list.size() < 2 || !all_short || shape.state > 128) {
    return ExecutorDevice::SsdChunkScanSegments(shape, chunk, x, x_stride, b, c,
                                                bc_stride, dt, a, d, states,
                                                segments, y);
  }
  TWICE_ASSIGN_OR_RETURN(const cuda::DevicePassSegments on_device,
                         OnDevice(segments));
  return cuda::SsdScanSegments(*stream_, shape, segments.rows(), ConstSpan(x),
                               x_stride, ConstSpan(b), ConstSpan(c), bc_stride,
                               ConstSpan(dt), ConstSpan(a), ConstSpan(d),
                               Span(states), on_device, Span(y));
}

absl::Status CudaExecutorDevice::LinearAttentionSegments(
    DeviceFloats q, DeviceFloats k, DeviceFloats v,
    const kernels::TaylorAttentionDims& dims, float eps, DeviceFloats kv_states,
    DeviceFloats k_states, const DevicePassSegments& segments, DeviceFloats y) {
  // Short reads, several: every segment in one launch of the recurrent
  // form (f32) on feature maps of the whole pass. Otherwise each segment
  // as LinearAttention runs it (the chunked bf16 kernel at the published
  // shape).
  const auto list = segments.segments();
  const int64_t fs = 1 + dims.feature_dim + dims.feature_dim * dims.feature_dim;
  const bool all_short =
      std::all_of(list.begin(), list.end(), [](const kernels::PassSegment& s) {
        return s.rows < cuda::kLinearAttentionSegmentMaxRows;
      });
  if (list.size() < 2 || !all_short ||
      !cuda::LinearAttentionSegmentsFit(dims.head_dim, fs)) {
    return ExecutorDevice::LinearAttentionSegments(
        q, k, v, dims, eps, kv_states, k_states, segments, y);
  }
  const int64_t map_rows = segments.rows() * dims.heads;
  if (q.size != map_rows * dims.feature_dim || k.size != q.size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinearAttentionSegments: q and k need ", map_rows * dims.feature_dim,
        " floats; got ", q.size, " and ", k.size));
  }
  TWICE_ASSIGN_OR_RETURN(const cuda::DevicePassSegments on_device,
                         OnDevice(segments));
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceSpan<float> phi,
                         F32Scratch(2 * map_rows * fs));
  const cuda::DeviceSpan<float> phi_q{phi.data, map_rows * fs};
  const cuda::DeviceSpan<float> phi_k{phi.data + map_rows * fs, map_rows * fs};
  TWICE_RETURN_IF_ERROR(cuda::TaylorFeatureMap(*stream_, ConstSpan(q), map_rows,
                                               dims.feature_dim, phi_q));
  TWICE_RETURN_IF_ERROR(cuda::TaylorFeatureMap(*stream_, ConstSpan(k), map_rows,
                                               dims.feature_dim, phi_k));
  return cuda::LinearAttentionSegments(
      *stream_, phi_q, phi_k, ConstSpan(v), segments.rows(),
      kernels::LinearAttentionDims{dims.heads, dims.head_dim, fs}, eps,
      Span(kv_states), Span(k_states), on_device, Span(y));
}

absl::Status CudaExecutorDevice::WindowAttentionSegments(
    DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
    float rope_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
    const DevicePassSegments& segments, DeviceFloats context, DeviceFloats y) {
  // Short reads, several: rotation, attention over ring and rows, and the
  // rings' new rows in three launches for the pass. Otherwise each
  // segment's context gathered for the window kernel (tiles for a long
  // one).
  const auto list = segments.segments();
  const bool all_short =
      std::all_of(list.begin(), list.end(), [](const kernels::PassSegment& s) {
        return s.rows < cuda::kWindowSegmentMaxRows;
      });
  if (list.size() < 2 || !all_short || dims.head_dim % 2 != 0 ||
      dims.head_dim > 128) {
    return ExecutorDevice::WindowAttentionSegments(
        qkv, qkv_stride, dims, rope_base, scale, ring_k, ring_v, segments,
        context, y);
  }
  TWICE_ASSIGN_OR_RETURN(const cuda::DevicePassSegments on_device,
                         OnDevice(segments));
  return cuda::WindowAttentionSegments(
      *stream_, Span(qkv), segments.rows(), qkv_stride, dims, rope_base, scale,
      Span(ring_k), Span(ring_v), on_device, Span(y));
}

absl::Status CudaExecutorDevice::CausalConv1dStepSlots(
    DeviceFloats x, int64_t channels, int64_t x_stride, DeviceFloats weight,
    int64_t kernel_size, DeviceFloats tails, const DeviceSlotMap& slots,
    DeviceFloats out) {
  return cuda::CausalConv1dStepSlots(*stream_, ConstSpan(x), channels, x_stride,
                                     ConstSpan(weight), kernel_size,
                                     Span(tails), SlotRowsOf(slots), Span(out));
}

absl::Status CudaExecutorDevice::SsdStepSlots(
    const kernels::SsdShape& shape, DeviceFloats x, int64_t x_stride,
    DeviceFloats b, DeviceFloats c, int64_t bc_stride, DeviceFloats dt,
    DeviceFloats a, DeviceFloats d, DeviceFloats states,
    const DeviceSlotMap& slots, DeviceFloats y) {
  return cuda::SsdStepSlots(*stream_, shape, ConstSpan(x), x_stride,
                            ConstSpan(b), ConstSpan(c), bc_stride,
                            ConstSpan(dt), ConstSpan(a), ConstSpan(d),
                            Span(states), SlotRowsOf(slots), Span(y));
}

absl::Status CudaExecutorDevice::RopeRotateHalf(DeviceFloats x, int64_t rows,
                                                int64_t row_stride,
                                                int64_t heads, int64_t head_dim,
                                                int64_t start_pos, float base) {
  return cuda::RopeRotateHalf(*stream_, Span(x), rows, row_stride, heads,
                              head_dim, start_pos, base);
}

absl::Status CudaExecutorDevice::SiluMul(DeviceFloats gate, int64_t gate_stride,
                                         DeviceFloats mult, int64_t mult_stride,
                                         int64_t rows, int64_t cols,
                                         DeviceFloats out) {
  return cuda::SiluMul(*stream_, ConstSpan(gate), gate_stride, ConstSpan(mult),
                       mult_stride, rows, cols, Span(out));
}

// The published shape (F = 16, hd = 64) runs the fused chunk-parallel
// bf16 kernel (with JRT-RNN's encoder pass when E > 0) on bf16 copies of
// the inputs where the GPU gives a block its shared memory; other shapes
// (and GPUs) the feature maps into scratch, then the recurrent featurized
// form.
absl::Status CudaExecutorDevice::LinearAttention(
    DeviceFloats q, DeviceFloats k, DeviceFloats v, int64_t tokens,
    DeviceFloats k_enc, DeviceFloats v_enc, int64_t encoder_tokens,
    const kernels::TaylorAttentionDims& dims, float eps, DeviceFloats kv,
    DeviceFloats k_sum, DeviceFloats y) {
  const int64_t f = dims.feature_dim;
  const int64_t fs = 1 + f + f * f;
  const int64_t rows = tokens * dims.heads;
  const int64_t enc_rows = encoder_tokens * dims.heads;
  if (tokens < 1 || f < 1 || encoder_tokens < 0 || q.size != rows * f ||
      k.size != rows * f || v.size != rows * dims.head_dim ||
      y.size != v.size || k_enc.size != enc_rows * f ||
      v_enc.size != enc_rows * dims.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinearAttention: q and k need ", rows * f, " floats, v and y ",
        rows * dims.head_dim, ", k_enc ", enc_rows * f, ", v_enc ",
        enc_rows * dims.head_dim, "; got ", q.size, ", ", k.size, ", ", v.size,
        ", ", y.size, ", ", k_enc.size, " and ", v_enc.size));
  }
  if (f == 16 && dims.head_dim == 64 && fused_linear_attention_fits_) {
    // bf16 copies of the inputs, one scratch block: q | k | v | y | k_enc
    // | v_enc.
    TWICE_ASSIGN_OR_RETURN(
        cuda::DeviceSpan<cuda::Bf16> block,
        Scratch(2 * q.size + 2 * v.size + k_enc.size + v_enc.size));
    int64_t used = 0;
    auto carve = [&](int64_t count) {
      const cuda::DeviceSpan<cuda::Bf16> part{block.data + used, count};
      used += count;
      return part;
    };
    const cuda::DeviceSpan<cuda::Bf16> q16 = carve(q.size), k16 = carve(k.size),
                                       v16 = carve(v.size), y16 = carve(y.size),
                                       ke16 = carve(k_enc.size),
                                       ve16 = carve(v_enc.size);
    auto convert = [&](DeviceFloats from, cuda::DeviceSpan<cuda::Bf16> to) {
      return from.size == 0
                 ? absl::OkStatus()
                 : cuda::ConvertToBf16(*stream_, ConstSpan(from), to);
    };
    TWICE_RETURN_IF_ERROR(convert(q, q16));
    TWICE_RETURN_IF_ERROR(convert(k, k16));
    TWICE_RETURN_IF_ERROR(convert(v, v16));
    TWICE_RETURN_IF_ERROR(convert(k_enc, ke16));
    TWICE_RETURN_IF_ERROR(convert(v_enc, ve16));
    TWICE_RETURN_IF_ERROR(cuda::PrefixLinearAttentionPrefillBf16(
        *stream_, q16, k16, v16, tokens, ke16, ve16, encoder_tokens,
        cuda::FusedLinearAttentionDims{1, dims.heads, dims.head_dim, f}, eps,
        Span(kv), Span(k_sum), y16));
    return cuda::ConvertToF32(*stream_, y16, Span(y));
  }
  TWICE_ASSIGN_OR_RETURN(cuda::DeviceSpan<float> phi,
                         F32Scratch((2 * rows + enc_rows) * fs));
  const cuda::DeviceSpan<float> phi_q{phi.data, rows * fs};
  const cuda::DeviceSpan<float> phi_k{phi.data + rows * fs, rows * fs};
  const cuda::DeviceSpan<float> phi_k_enc{phi.data + 2 * rows * fs,
                                          enc_rows * fs};
  TWICE_RETURN_IF_ERROR(
      cuda::TaylorFeatureMap(*stream_, ConstSpan(q), rows, f, phi_q));
  TWICE_RETURN_IF_ERROR(
      cuda::TaylorFeatureMap(*stream_, ConstSpan(k), rows, f, phi_k));
  if (enc_rows > 0) {
    TWICE_RETURN_IF_ERROR(cuda::TaylorFeatureMap(*stream_, ConstSpan(k_enc),
                                                 enc_rows, f, phi_k_enc));
  }
  return cuda::FeaturizedLinearAttention(
      *stream_, phi_q, phi_k, ConstSpan(v), tokens, phi_k_enc, ConstSpan(v_enc),
      encoder_tokens,
      kernels::LinearAttentionDims{dims.heads, dims.head_dim, fs}, eps,
      Span(kv), Span(k_sum), Span(y));
}

absl::Status CudaExecutorDevice::WindowAttention(
    DeviceFloats q, int64_t q_stride, DeviceFloats k, DeviceFloats v,
    const kernels::WindowAttentionDims& dims, float scale, DeviceFloats out) {
  return cuda::WindowAttention(*stream_, ConstSpan(q), q_stride, ConstSpan(k),
                               ConstSpan(v), dims, scale, Span(out));
}

absl::Status CudaExecutorDevice::LinearAttentionStepSlots(
    DeviceFloats q, DeviceFloats k, DeviceFloats v,
    const kernels::TaylorAttentionDims& dims, float eps, DeviceFloats kv_states,
    DeviceFloats k_states, const DeviceSlotMap& slots, DeviceFloats y) {
  return cuda::LinearAttentionStepSlots(
      *stream_, ConstSpan(q), ConstSpan(k), ConstSpan(v), dims, eps,
      Span(kv_states), Span(k_states), SlotRowsOf(slots), Span(y));
}

absl::Status CudaExecutorDevice::WindowAttentionStepSlots(
    DeviceFloats qkv, int64_t qkv_stride, const kernels::WindowStepDims& dims,
    float rotary_base, float scale, DeviceFloats ring_k, DeviceFloats ring_v,
    const DeviceSlotMap& slots, DeviceFloats y) {
  const auto& map = static_cast<const CudaSlotMap&>(slots);
  return cuda::WindowAttentionStepSlots(
      *stream_, ConstSpan(qkv), qkv_stride, dims, rotary_base, scale,
      map.device_positions_span(), map.positions(), Span(ring_k), Span(ring_v),
      map.rows(), Span(y));
}

}  // namespace twice::engine::cuda_executor
#endif  // TWICE_HAVE_CUDA
