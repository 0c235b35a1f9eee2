// RatAttention on a device (rat_attention.h has the equations):
// proj = h · W_in^T; the gated EMA inside chunks, the rotations by chunk
// index and each closed chunk's key and value (RatChunkScan); one softmax
// over the closed chunks and the token's own key, gated by z
// (RatPagedAttention); x += y · W_out^T.
//
// Per slot: the open chunk's running k̄ | v̄ [2, D] (a fixed array), and the
// closed chunks' rows [2, D] in a paged pool of the executor's chunk table
// (one row per L tokens, the same block indices in every RAT layer). A host
// RatChunkKvState crosses row run by row run.
#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/executor/resident_layers.h"
#include "engine/layers/rat_chunk_kv_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentRatAttention final : public ResidentMixer {
 public:
  explicit ResidentRatAttention(const RatAttention& mixer)
      : mixer_(mixer), o_(mixer.options()), d_(o_.dim) {}

  absl::Status Load(ExecutorDevice& dev, const ResidentPools& pools) override {
    if (pools.kv_blocks == nullptr) {
      return absl::FailedPreconditionError(
          "a RAT layer needs the executor's chunk block table");
    }
    blocks_ = pools.kv_blocks;
    table_ = pools.kv_table;
    TWICE_ASSIGN_OR_RETURN(in_proj_, dev.UploadMatrix(mixer_.in_proj()));
    TWICE_ASSIGN_OR_RETURN(out_proj_, dev.UploadMatrix(mixer_.out_proj()));
    TWICE_ASSIGN_OR_RETURN(gate_bias_,
                           UploadVector(dev, mixer_.gate_bias().span()));
    TWICE_ASSIGN_OR_RETURN(open_, dev.Allocate(pools.slots * 2 * d_));
    TWICE_ASSIGN_OR_RETURN(
        closed_,
        dev.Allocate(blocks_->blocks() * blocks_->block_size() * 2 * d_));
    return absl::OkStatus();
  }
  int64_t kv_tokens_per_row() const override { return o_.chunk_size; }
  bool reads_pass_rows() const override { return true; }
  int64_t ScratchFloats(int64_t rows) const override {
    return rows * (Dims(0).proj_width() + 5 * d_);  // proj | q k v z y
  }
  int64_t weight_bytes() const override {
    return in_proj_->bytes() + out_proj_->bytes() + ArrayBytes(*gate_bias_);
  }
  int64_t state_floats_per_slot() const override { return 2 * d_; }

  absl::Status ZeroSlot(ExecutorDevice& dev, int32_t slot) override {
    return dev.Zero(open_->floats().sub(slot * 2 * d_, 2 * d_));
  }
  absl::Status CheckState(const LayerState& state,
                          int64_t tokens) const override {
    const auto* s = dynamic_cast<const RatChunkKvState*>(&state);
    if (s == nullptr || s->dim() != d_ || s->chunk_size() != o_.chunk_size) {
      return absl::FailedPreconditionError(
          "the layer state is not a matching rat_chunk_kv state");
    }
    if (tokens >= 0 && (s->count() != tokens ||
                        s->closed_chunks() != tokens / o_.chunk_size)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the RAT state has read ", s->count(), " tokens in ",
          s->closed_chunks(), " closed chunks but the sequence ", tokens));
    }
    return absl::OkStatus();
  }
  absl::Status Upload(ExecutorDevice& dev, const LayerState& state,
                      int32_t slot) override {
    const auto& s = static_cast<const RatChunkKvState&>(state);
    TWICE_RETURN_IF_ERROR(
        dev.CopyToDevice(s.open(), open_->floats().sub(slot * 2 * d_, 2 * d_)));
    TWICE_ASSIGN_OR_RETURN(std::vector<KvBlockTable::Run> runs,
                           blocks_->Runs(slot, s.closed_chunks()));
    for (const KvBlockTable::Run& run : runs) {
      TWICE_RETURN_IF_ERROR(dev.CopyToDevice(
          s.closed().subspan(run.first * 2 * d_, run.count * 2 * d_),
          PoolRows(run.pool_row, run.count)));
    }
    return absl::OkStatus();
  }
  absl::Status AddDownloads(int32_t slot, int64_t tokens, LayerState& state,
                            std::vector<HostCopy>& copies) override {
    auto& s = static_cast<RatChunkKvState&>(state);
    const int64_t chunks = tokens / o_.chunk_size;
    s.ResizeClosed(chunks);
    s.set_count(tokens);
    copies.push_back(
        {open_->floats().sub(slot * 2 * d_, 2 * d_), s.mutable_open()});
    TWICE_ASSIGN_OR_RETURN(std::vector<KvBlockTable::Run> runs,
                           blocks_->Runs(slot, chunks));
    for (const KvBlockTable::Run& run : runs) {
      copies.push_back(
          {PoolRows(run.pool_row, run.count),
           s.mutable_closed().subspan(run.first * 2 * d_, run.count * 2 * d_)});
    }
    return absl::OkStatus();
  }

  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = pass.rows, w = proj_width();
    const DeviceFloats proj = scratch.sub(0, rows * w);
    DeviceFloats at = scratch.sub(proj.size, rows * 5 * d_);
    const DeviceFloats q = at.sub(0, rows * d_);
    const DeviceFloats k = at.sub(rows * d_, rows * d_);
    const DeviceFloats v = at.sub(2 * rows * d_, rows * d_);
    const DeviceFloats z = at.sub(3 * rows * d_, rows * d_);
    const DeviceFloats y = at.sub(4 * rows * d_, rows * d_);
    const LinearOutput in_proj[] = {{in_proj_.get(), proj, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, in_proj));
    if (pass.step != nullptr) {
      TWICE_ASSIGN_OR_RETURN(const DeviceBlockTable* table,
                             pass.kv_table(table_));
      TWICE_RETURN_IF_ERROR(
          Scan(dev, pass.step_rows(), -1, *table, proj, q, k, v, z));
      TWICE_RETURN_IF_ERROR(
          Attend(dev, pass.step_rows(), *table, q, k, v, z, y));
    } else if (pass.row_map != nullptr && pass.segment_rows != nullptr) {
      // A pass as rows: every segment's scan in one call (the EMA runs
      // along each sequence, closing the chunks its rows complete), then
      // the attention over all the pass's rows (every chunk a row reads is
      // closed by then).
      TWICE_ASSIGN_OR_RETURN(const DeviceBlockTable* table,
                             pass.row_kv_table(table_));
      const kernels::RatPagedDims dims = Dims(table->width());
      TWICE_RETURN_IF_ERROR(dev.RatChunkScanSegments(
          proj, w, gate_bias_->floats(), *pass.segment_rows, dims, *table,
          open_->floats(), closed_->floats(), q, k, v, z));
      TWICE_RETURN_IF_ERROR(Attend(dev, DevicePassRows{rows, 0, pass.row_map},
                                   *table, q, k, v, z, y));
    } else {
      for (const PrefillSegment& seg : pass.segments) {
        TWICE_ASSIGN_OR_RETURN(const DeviceBlockTable* table,
                               seg.kv_table(table_));
        TWICE_RETURN_IF_ERROR(Scan(dev, seg.pass_rows(), seg.slot, *table,
                                   seg.Rows(proj, w), seg.Rows(q, d_),
                                   seg.Rows(k, d_), seg.Rows(v, d_),
                                   seg.Rows(z, d_)));
        TWICE_RETURN_IF_ERROR(Attend(
            dev, seg.pass_rows(), *table, seg.Rows(q, d_), seg.Rows(k, d_),
            seg.Rows(v, d_), seg.Rows(z, d_), seg.Rows(y, d_)));
      }
    }
    return dev.Linear(y, rows, *out_proj_, x, ResidualAdd());
  }

 private:
  int64_t proj_width() const { return Dims(1).proj_width(); }
  // The rows' chunk scan: their open chunk in `prefill_slot` for a
  // prefill segment, the map's slots for a step; q, k, v, z the rows'.
  absl::Status Scan(ExecutorDevice& dev, const DevicePassRows& rows,
                    int32_t prefill_slot, const DeviceBlockTable& table,
                    DeviceFloats proj, DeviceFloats q, DeviceFloats k,
                    DeviceFloats v, DeviceFloats z) {
    const kernels::RatPagedDims dims = Dims(table.width());
    return dev.RatChunkScan(proj, dims.proj_width(), gate_bias_->floats(), rows,
                            prefill_slot, dims, table, open_->floats(),
                            closed_->floats(), q, k, v, z);
  }
  // The rows' attention over their closed chunks and their own key and
  // value (q, k, v, z, y the rows').
  absl::Status Attend(ExecutorDevice& dev, const DevicePassRows& rows,
                      const DeviceBlockTable& table, DeviceFloats q,
                      DeviceFloats k, DeviceFloats v, DeviceFloats z,
                      DeviceFloats y) {
    const kernels::RatPagedDims dims = Dims(table.width());
    const float scale = 1.0f / std::sqrt(static_cast<float>(dims.head_dim()));
    return dev.RatPagedAttention(q, k, v, z, rows, dims, table,
                                 closed_->floats(), scale, y);
  }
  kernels::RatPagedDims Dims(int64_t table_width) const {
    return {o_.dim,
            o_.heads,
            o_.groups,
            o_.chunk_size,
            blocks_ != nullptr ? blocks_->block_size() : 1,
            table_width,
            o_.rope_base};
  }
  DeviceFloats PoolRows(int64_t row, int64_t rows) const {
    return closed_->floats().sub(row * 2 * d_, rows * 2 * d_);
  }
  const RatAttention& mixer_;
  const RatAttentionOptions o_;
  const int64_t d_;
  const KvBlockTable* blocks_ = nullptr;
  int table_ = -1;  // in ResidentPass::kv_tables
  std::unique_ptr<DeviceMatrix> in_proj_, out_proj_;
  std::unique_ptr<DeviceArray> gate_bias_;
  std::unique_ptr<DeviceArray> open_;    // [slots, 2, D]
  std::unique_ptr<DeviceArray> closed_;  // [blocks, block_size, 2, D]
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentRatAttention(const RatAttention& m) {
  return std::make_unique<ResidentRatAttention>(m);
}

}  // namespace twice::engine
