// ResidentExecutor's reads of whole token lists (resident_executor.h):
// Prefill, PrefillBatch and the pass packing they share. Load, slots,
// state moves and decode steps are in resident_executor.cc.
#include <algorithm>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "engine/executor/resident_executor.h"
#include "engine/models/state_checks.h"
#include "kernels/status_macros.h"

namespace twice::engine {

absl::StatusOr<std::vector<float>> ResidentExecutor::Prefill(
    SlotId slot, absl::Span<const int32_t> tokens,
    const PrefixEncoding* prefix) {
  TWICE_RETURN_IF_ERROR(CheckTokenIds(tokens, model_.description().vocab_size));
  const int64_t total = static_cast<int64_t>(tokens.size());
  int64_t first = options_.prefill_chunk;
  if (prefix != nullptr) {
    first = std::min(
        total, StackedModel::FirstPrefixPass(*prefix, options_.prefill_chunk));
    if (model_.description().prefix_length <= 0 ||
        !(0 <= prefix->masked_tokens &&
          prefix->masked_tokens <= prefix->encoder_tokens &&
          prefix->encoder_tokens <= model_.description().prefix_length &&
          prefix->encoder_tokens <= total)) {
      return absl::InvalidArgumentError(
          "ResidentExecutor: a prefix read needs a model with a prefix "
          "encoder and 0 <= masked <= encoder <= min(prefix length, tokens)");
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(device_->MakeCurrent());
  const SlotId one[] = {slot};
  TWICE_RETURN_IF_ERROR(CheckSlots(one));
  if (prefix != nullptr && slot_info_[slot.index].tokens != 0) {
    return absl::FailedPreconditionError(
        "ResidentExecutor: a prefix read needs an empty sequence");
  }
  const absl::Span<const int32_t> reads[] = {tokens};
  return ReadSequences(one, reads, prefix, first);
}

absl::StatusOr<std::vector<float>> ResidentExecutor::PrefillBatch(
    absl::Span<const SlotId> slots,
    absl::Span<const absl::Span<const int32_t>> tokens) {
  if (slots.empty() || tokens.size() != slots.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ResidentExecutor::PrefillBatch: ", slots.size(), " slots and ",
        tokens.size(), " token lists; need one list per slot, at least one"));
  }
  for (size_t b = 0; b < tokens.size(); ++b) {
    absl::Status s = CheckTokenIds(tokens[b], model_.description().vocab_size);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", b, ": ", s.message()));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  TWICE_RETURN_IF_ERROR(device_->MakeCurrent());
  TWICE_RETURN_IF_ERROR(CheckSlots(slots));
  return ReadSequences(slots, tokens, nullptr, options_.prefill_chunk);
}

bool ResidentExecutor::UsesRowForm(absl::Span<const PrefillSegment> segments,
                                   int64_t rows) const {
  if (!reads_pass_rows_ || segments.size() < 2) return false;
  int64_t attended = 0;  // (row, position) pairs the rows walk
  std::vector<int32_t> slots;
  for (const PrefillSegment& seg : segments) {
    if (seg.rows >= kRowFormMaxSegmentRows) return false;
    // Rows at positions start .. start + rows - 1 attend p + 1 each.
    attended += seg.rows * seg.start + seg.rows * (seg.rows + 1) / 2;
    slots.push_back(seg.slot);
  }
  return attended <= options_.row_form_max_attended_positions &&
         rows * kv_tables_.LongestList(slots) <=
             options_.row_form_max_table_entries;
}

absl::StatusOr<ResidentExecutor::PassRowForm> ResidentExecutor::UploadRowForm(
    absl::Span<const PrefillSegment> segments, int64_t rows) {
  std::vector<int32_t> slots;
  std::vector<int64_t> positions;
  slots.reserve(static_cast<size_t>(rows));
  positions.reserve(static_cast<size_t>(rows));
  for (const PrefillSegment& seg : segments) {
    for (int64_t i = 0; i < seg.rows; ++i) {
      slots.push_back(seg.slot);
      positions.push_back(seg.start + i);
    }
  }
  PassRowForm form;
  TWICE_ASSIGN_OR_RETURN(form.map, device_->UploadSlotMap(slots, positions));
  TWICE_ASSIGN_OR_RETURN(form.tables.owned, kv_tables_.Upload(*device_, slots));
  for (const auto& t : form.tables.owned) {
    form.tables.views.push_back(t.get());
  }
  return form;
}

absl::StatusOr<std::vector<float>> ResidentExecutor::ReadSequences(
    absl::Span<const SlotId> slots,
    absl::Span<const absl::Span<const int32_t>> tokens,
    const PrefixEncoding* prefix, int64_t first_pass_rows) {
  const size_t batch = slots.size();
  std::vector<int64_t> extra(batch);
  for (size_t b = 0; b < batch; ++b) {
    extra[b] = static_cast<int64_t>(tokens[b].size());
  }
  TWICE_RETURN_IF_ERROR(ReserveKv(slots, extra));
  // Each sequence's tables serve all its passes: the blocks for all its
  // tokens are reserved, and a read that fails gives them back.
  // Failing to upload them leaves every state as it was.
  absl::Cleanup unreserve = [&] { ReturnUnreadKv(slots); };
  std::vector<PassTables> tables(batch);
  for (size_t b = 0; b < batch; ++b) {
    TWICE_ASSIGN_OR_RETURN(tables[b], PassKvTables(slots.subspan(b, 1)));
  }
  absl::Status s;
  bool ran = false;  // whether a pass has written the states
  std::vector<float> logits(batch * static_cast<size_t>(vocab_rows_));
  const DeviceFloats x = x_->floats();
  std::vector<PrefillSegment> segments;
  size_t next = 0;   // the sequence the next pass continues
  int64_t done = 0;  // its tokens read so far
  bool first_pass = true;
  while (next < batch && s.ok()) {
    const int64_t capacity =
        first_pass ? first_pass_rows : options_.prefill_chunk;
    const size_t first_finished = next;
    segments.clear();
    int64_t rows = 0;
    // Whole sequences (or what is left of one) while the pass has room;
    // one that does not fit continues in the next pass.
    while (next < batch && rows < capacity && s.ok()) {
      const absl::Span<const int32_t> t = tokens[next];
      const int64_t n =
          std::min(capacity - rows, static_cast<int64_t>(t.size()) - done);
      const int32_t slot = slots[next].index;
      segments.push_back(
          {slot, slot_info_[slot].tokens + done, rows, n, tables[next].views});
      s = device_->Embedding(t.subspan(done, n), *embedding_,
                             model_.embedding_scale(),
                             x.sub(rows * dim_, n * dim_));
      rows += n;
      done += n;
      if (done == static_cast<int64_t>(t.size())) {
        ++next;
        done = 0;
      }
    }
    if (!s.ok()) break;
    std::vector<kernels::PassSegment> on_device;
    for (const PrefillSegment& seg : segments) {
      on_device.push_back({seg.first_row, seg.rows, seg.slot, seg.start});
    }
    absl::StatusOr<std::unique_ptr<DevicePassSegments>> segment_rows =
        device_->UploadPassSegments(on_device, rows, options_.slots);
    s = segment_rows.status();
    if (!s.ok()) break;
    ResidentPass pass{rows, segments};
    pass.segment_rows = segment_rows->get();
    PassRowForm row_form;
    if (UsesRowForm(segments, rows)) {
      // The row form only saves launches: a pass whose map or tables do
      // not reach the device (out of memory) goes by segments instead of
      // failing, and damaging the states of earlier passes.
      absl::StatusOr<PassRowForm> uploaded = UploadRowForm(segments, rows);
      if (uploaded.ok()) {
        row_form = *std::move(uploaded);
        pass.row_map = row_form.map.get();
        pass.row_kv_tables = row_form.tables.views;
      }
    }
    if (first_pass) pass.prefix = prefix;
    first_pass = false;
    ran = true;
    s = RunBlocks(pass);
    // The last position's logits of the sequences that ended here (they
    // are consecutive: sequences are read in order): one head product over
    // their last rows, gathered into the scratch (free after the blocks).
    const int64_t finished = static_cast<int64_t>(next - first_finished);
    if (finished == 1 && s.ok()) {
      const PrefillSegment& seg = segments[0];
      s = Head(x.sub((seg.first_row + seg.rows - 1) * dim_, dim_), 1, 0);
    } else if (finished > 1 && s.ok()) {
      const DeviceFloats last_rows = scratch_->floats().sub(0, finished * dim_);
      for (int64_t i = 0; i < finished && s.ok(); ++i) {
        const PrefillSegment& seg = segments[i];
        s = device_->CopyRows(
            x.sub((seg.first_row + seg.rows - 1) * dim_, dim_), dim_,
            last_rows.sub(i * dim_, dim_), dim_, 1, dim_);
      }
      if (s.ok()) s = Head(last_rows, finished, 0);
    }
    if (finished > 0 && s.ok()) {
      const size_t floats =
          static_cast<size_t>(finished) * static_cast<size_t>(vocab_rows_);
      s = device_->CopyToHost(
          logits_->floats().sub(0, static_cast<int64_t>(floats)),
          absl::MakeSpan(logits).subspan(
              first_finished * static_cast<size_t>(vocab_rows_), floats));
    }
  }
  if (!s.ok()) return ran ? Damaged(slots, s) : s;
  std::move(unreserve).Cancel();
  for (size_t b = 0; b < batch; ++b) {
    slot_info_[slots[b].index].tokens += extra[b];
  }
  return logits;
}

}  // namespace twice::engine
