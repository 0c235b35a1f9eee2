// LlamaAttention on a device (llama_attention.h has the equations):
// q = h · Wq^T, k = h · Wk^T, v = h · Wv^T; rotary q and k at each row's
// position; the new keys and values written into the layer's paged KV
// cache; causal GQA attention of each row over its sequence's cache;
// x += y · Wo^T.
//
// The cache is a pool of KvBlockTable blocks ([blocks, block_size, H_kv,
// hd] for keys and for values), the same block indices in every
// full-attention layer; a slot's blocks are the executor's to reserve and
// free, so this layer keeps no per-slot state of its own. A host
// FullKvState crosses block by block (consecutive blocks in one copy).
#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/executor/resident_layers.h"
#include "engine/layers/full_kv_state.h"
#include "kernels/status_macros.h"

namespace twice::engine {
namespace {

class ResidentFullAttention final : public ResidentMixer {
 public:
  explicit ResidentFullAttention(const LlamaAttention& mixer)
      : mixer_(mixer),
        o_(mixer.options()),
        qw_(o_.heads * o_.head_dim),
        kvw_(o_.kv_heads * o_.head_dim) {}

  absl::Status Load(ExecutorDevice& dev, const ResidentPools& pools) override {
    if (pools.kv_blocks == nullptr) {
      return absl::FailedPreconditionError(
          "a full-attention layer needs the executor's KV block table");
    }
    blocks_ = pools.kv_blocks;
    table_ = pools.kv_table;
    TWICE_ASSIGN_OR_RETURN(wq_, dev.UploadMatrix(mixer_.wq()));
    TWICE_ASSIGN_OR_RETURN(wk_, dev.UploadMatrix(mixer_.wk()));
    TWICE_ASSIGN_OR_RETURN(wv_, dev.UploadMatrix(mixer_.wv()));
    TWICE_ASSIGN_OR_RETURN(wo_, dev.UploadMatrix(mixer_.wo()));
    const int64_t pool = blocks_->blocks() * blocks_->block_size() * kvw_;
    TWICE_ASSIGN_OR_RETURN(k_pool_, dev.Allocate(pool));
    TWICE_ASSIGN_OR_RETURN(v_pool_, dev.Allocate(pool));
    return absl::OkStatus();
  }
  int64_t kv_tokens_per_row() const override { return 1; }
  bool reads_pass_rows() const override { return true; }
  int64_t ScratchFloats(int64_t rows) const override {
    return rows * (2 * qw_ + 2 * kvw_);  // q | k | v | y
  }
  int64_t weight_bytes() const override {
    return wq_->bytes() + wk_->bytes() + wv_->bytes() + wo_->bytes();
  }
  int64_t state_floats_per_slot() const override { return 2 * kvw_; }

  absl::Status ZeroSlot(ExecutorDevice&, int32_t) override {
    return absl::OkStatus();  // a new sequence owns no blocks
  }
  absl::Status CheckState(const LayerState& state,
                          int64_t tokens) const override {
    const auto* s = dynamic_cast<const FullKvState*>(&state);
    if (s == nullptr || s->kv_heads() != o_.kv_heads ||
        s->head_dim() != o_.head_dim) {
      return absl::FailedPreconditionError(
          "the layer state is not a matching full_kv state");
    }
    if (tokens >= 0 && s->count() != tokens) {
      return absl::FailedPreconditionError(
          absl::StrCat("the KV cache holds ", s->count(),
                       " tokens but the sequence has read ", tokens));
    }
    return absl::OkStatus();
  }
  absl::Status Upload(ExecutorDevice& dev, const LayerState& state,
                      int32_t slot) override {
    const auto& s = static_cast<const FullKvState&>(state);
    TWICE_ASSIGN_OR_RETURN(std::vector<KvBlockTable::Run> runs,
                           blocks_->Runs(slot, s.count()));
    for (const KvBlockTable::Run& run : runs) {
      const int64_t at = run.first * kvw_, n = run.count * kvw_;
      TWICE_RETURN_IF_ERROR(
          dev.CopyToDevice(s.keys().subspan(at, n),
                           PoolRows(*k_pool_, run.pool_row, run.count)));
      TWICE_RETURN_IF_ERROR(
          dev.CopyToDevice(s.values().subspan(at, n),
                           PoolRows(*v_pool_, run.pool_row, run.count)));
    }
    return absl::OkStatus();
  }
  absl::Status AddDownloads(int32_t slot, int64_t tokens, LayerState& state,
                            std::vector<HostCopy>& copies) override {
    auto& s = static_cast<FullKvState&>(state);
    s.Resize(tokens);
    TWICE_ASSIGN_OR_RETURN(std::vector<KvBlockTable::Run> runs,
                           blocks_->Runs(slot, tokens));
    for (const KvBlockTable::Run& run : runs) {
      const int64_t at = run.first * kvw_, n = run.count * kvw_;
      copies.push_back({PoolRows(*k_pool_, run.pool_row, run.count),
                        s.mutable_keys().subspan(at, n)});
      copies.push_back({PoolRows(*v_pool_, run.pool_row, run.count),
                        s.mutable_values().subspan(at, n)});
    }
    return absl::OkStatus();
  }

  absl::Status Forward(ExecutorDevice& dev, const ResidentPass& pass,
                       const LayerInput& in, DeviceFloats scratch,
                       DeviceFloats x) override {
    const int64_t rows = pass.rows;
    const DeviceFloats q = scratch.sub(0, rows * qw_);
    const DeviceFloats k = scratch.sub(q.size, rows * kvw_);
    const DeviceFloats v = scratch.sub(q.size + k.size, rows * kvw_);
    const DeviceFloats y = scratch.sub(q.size + k.size + v.size, rows * qw_);
    const LinearOutput qkv[] = {
        {wq_.get(), q, {}}, {wk_.get(), k, {}}, {wv_.get(), v, {}}};
    TWICE_RETURN_IF_ERROR(in.Project(dev, qkv));
    if (pass.step != nullptr || pass.row_map != nullptr) {
      // A step, or a prefill pass as rows: each row at its map position,
      // in its own table row.
      const DeviceSlotMap& map =
          pass.step != nullptr ? *pass.step : *pass.row_map;
      TWICE_ASSIGN_OR_RETURN(const DeviceBlockTable* table,
                             pass.step != nullptr ? pass.kv_table(table_)
                                                  : pass.row_kv_table(table_));
      if (o_.rotary) {
        TWICE_RETURN_IF_ERROR(dev.RopeRotateHalfAt(
            q, qw_, o_.heads, o_.head_dim, map, o_.rope_theta));
        TWICE_RETURN_IF_ERROR(dev.RopeRotateHalfAt(
            k, kvw_, o_.kv_heads, o_.head_dim, map, o_.rope_theta));
      }
      TWICE_RETURN_IF_ERROR(
          Attend(dev, DevicePassRows{rows, 0, &map}, *table, q, k, v, y));
    } else {
      for (const PrefillSegment& seg : pass.segments) {
        TWICE_ASSIGN_OR_RETURN(const DeviceBlockTable* table,
                               seg.kv_table(table_));
        const DeviceFloats seg_q = seg.Rows(q, qw_), seg_k = seg.Rows(k, kvw_);
        if (o_.rotary) {
          TWICE_RETURN_IF_ERROR(dev.RopeRotateHalf(seg_q, seg.rows, qw_,
                                                   o_.heads, o_.head_dim,
                                                   seg.start, o_.rope_theta));
          TWICE_RETURN_IF_ERROR(dev.RopeRotateHalf(seg_k, seg.rows, kvw_,
                                                   o_.kv_heads, o_.head_dim,
                                                   seg.start, o_.rope_theta));
        }
        TWICE_RETURN_IF_ERROR(Attend(dev, seg.pass_rows(), *table, seg_q, seg_k,
                                     seg.Rows(v, kvw_), seg.Rows(y, qw_)));
      }
    }
    return dev.Linear(y, rows, *wo_, x, ResidualAdd());
  }

 private:
  // The rows' keys and values into the cache, then their attention over
  // it (rows: a step's, or one prefill segment's, with q, k, v, y theirs).
  absl::Status Attend(ExecutorDevice& dev, const DevicePassRows& rows,
                      const DeviceBlockTable& table, DeviceFloats q,
                      DeviceFloats k, DeviceFloats v, DeviceFloats y) {
    const kernels::PagedKvDims dims{o_.heads, o_.kv_heads, o_.head_dim,
                                    blocks_->block_size(), 0};
    TWICE_RETURN_IF_ERROR(dev.PagedKvWrite(k, kvw_, v, kvw_, rows, dims, table,
                                           k_pool_->floats(),
                                           v_pool_->floats()));
    const float scale = o_.scale > 0.0f
                            ? o_.scale
                            : 1.0f / std::sqrt(static_cast<float>(o_.head_dim));
    return dev.PagedAttention(q, qw_, rows, dims, table, k_pool_->floats(),
                              v_pool_->floats(), scale, y);
  }
  DeviceFloats PoolRows(const DeviceArray& pool, int64_t row,
                        int64_t rows) const {
    return pool.floats().sub(row * kvw_, rows * kvw_);
  }
  const LlamaAttention& mixer_;
  const LlamaAttentionOptions o_;
  const int64_t qw_;   // H · hd
  const int64_t kvw_;  // H_kv · hd
  const KvBlockTable* blocks_ = nullptr;
  int table_ = -1;  // in ResidentPass::kv_tables
  std::unique_ptr<DeviceMatrix> wq_, wk_, wv_, wo_;
  std::unique_ptr<DeviceArray> k_pool_, v_pool_;  // [blocks, bs, H_kv, hd]
};

}  // namespace

std::unique_ptr<ResidentMixer> NewResidentFullAttention(
    const LlamaAttention& m) {
  return std::make_unique<ResidentFullAttention>(m);
}

}  // namespace twice::engine
