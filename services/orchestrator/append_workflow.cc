#include "services/orchestrator/append_workflow.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/orchestrator/document_ids.h"
#include "services/orchestrator/document_states.h"
#include "services/orchestrator/document_writes.h"

namespace twice::services {

grpc::Status AppendWorkflow::Run(
    grpc::ServerContext& server,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::AppendRequest>& stream) {
  const auto started = std::chrono::steady_clock::now();
  v1::AppendRequest request;
  if (!stream.Read(&request) || request.document_id().empty()) {
    return InvalidRequest("Append: the first message must name the document");
  }
  if (absl::Status valid = ValidateSegmentTokens(request.segment_tokens());
      !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  const std::string document_id = request.document_id();
  const int64_t requested_segment = request.segment_tokens();
  absl::StatusOr<storage::DocumentRecord> found =
      FindDocumentOf(*context_.store, {tenant_, document_id});
  if (!found.ok()) return ToGrpcStatus(found.status());
  // Held from reading the record to writing the new one, so appends
  // through this process queue instead of conflicting.
  std::shared_ptr<void> lock = context_.locks->Lock(storage::RefOf(*found));
  // Re-read under the lock: another append may have just finished.
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocumentOf(*context_.store, {tenant_, document_id});
  if (!record.ok()) return ToGrpcStatus(record.status());
  absl::StatusOr<const ModelCard*> model =
      DocumentStates(context_).ModelOfDocument(server, *record,
                                               /*locked=*/true);
  if (!model.ok()) return ToGrpcStatus(model.status());

  absl::StatusOr<Collected> collected = Collect<v1::AppendRequest>(
      request, [&](v1::AppendRequest* next) { return stream.Read(next); },
      context_.limits->max_document_bytes, request.total_size());
  if (!collected.ok()) return ToGrpcStatus(collected.status());
  // Appended text is tokenized on its own (see AppendRequest).
  absl::StatusOr<std::vector<int32_t>> appended =
      DocumentTokens(**model, *std::move(collected), record->token_count);
  if (!appended.ok()) return ToGrpcStatus(appended.status());
  if (appended->empty()) return InvalidRequest("Append: nothing to append");

  // Another orchestrator replica may append to the same document at the
  // same time: the record is committed only if it is still the one this
  // append read (a conditional write), otherwise the append starts again
  // from the new end of the document.
  absl::StatusOr<Appended> done = absl::AbortedError("not attempted");
  for (int attempt = 0; attempt < kCommitAttempts; ++attempt) {
    if (attempt > 0) {
      if (server.IsCancelled()) {
        return ToGrpcStatus(absl::CancelledError("Append cancelled"));
      }
      // The winner is committing its own appends back to back: step aside
      // for a random, growing moment so the two do not collide again.
      absl::SleepFor(CommitBackoff(attempt));
      Log(LogLevel::kInfo, "append.conflict",
          absl::StrCat(
              "doc=", document_id, " attempt=", attempt + 1,
              " reason=", LogValue(std::string(done.status().message()))));
      record = FindDocumentOf(*context_.store, {tenant_, document_id});
      if (!record.ok()) return ToGrpcStatus(record.status());
      model = DocumentStates(context_).ModelOfDocument(server, *record,
                                                       /*locked=*/true);
      if (!model.ok()) return ToGrpcStatus(model.status());
    }
    done = AppendOnce(
        server, *record, *appended, requested_segment,
        /*charge=*/attempt == 0,
        [&](const v1::IngestResponse& progress) { stream.Write(progress); });
    if (done.status().code() != absl::StatusCode::kAborted) break;
  }
  if (!done.ok()) return ToGrpcStatus(done.status());

  const storage::DocumentRecord& updated = done->record;
  const double seconds = SecondsSince(started);
  const int64_t total = updated.token_count;
  v1::IngestResponse finished;
  finished.set_document_id(updated.document_id);
  finished.set_segments_done(static_cast<int64_t>(updated.segments.size()));
  finished.set_segments_total(static_cast<int64_t>(updated.segments.size()));
  finished.set_tokens_done(total);
  finished.set_tokens_total(total);
  finished.set_tokens_per_second(
      seconds > 0 ? static_cast<double>(done->tokens_computed) / seconds : 0);
  finished.set_segments_reused(done->segments_reused);
  *finished.mutable_done() = ToDocumentInfo(updated);
  stream.Write(finished);
  Log(LogLevel::kInfo, "append.done",
      absl::StrCat("doc=", updated.document_id,
                   " from=", total - static_cast<int64_t>(appended->size()),
                   " tokens=", total, " computed_tokens=",
                   done->tokens_computed, " reused=", done->segments_reused));
  return grpc::Status::OK;
}

absl::StatusOr<AppendWorkflow::Appended> AppendWorkflow::AppendOnce(
    grpc::ServerContext& server, const storage::DocumentRecord& record,
    absl::Span<const int32_t> appended, int64_t requested_segment, bool charge,
    const std::function<void(const v1::IngestResponse&)>& progress) {
  const int64_t old_total = record.token_count;
  const int64_t new_tokens = static_cast<int64_t>(appended.size());
  const int64_t total = old_total + new_tokens;
  if (total > context_.limits->max_document_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the document would have ", total, " tokens; the limit is ",
        context_.limits->max_document_tokens, " (max_document_tokens)"));
  }
  const int64_t old_segments = static_cast<int64_t>(record.segments.size());
  absl::StatusOr<int64_t> planned =
      PlanSegment(*context_.limits, requested_segment,
                  record.segment_tokens > 0 ? record.segment_tokens
                                            : kFallbackSegmentTokens,
                  old_segments, new_tokens);
  if (!planned.ok()) return planned.status();
  const int64_t segment = *planned;
  // Charged only once every size check passed, and once per call.
  if (charge) {
    if (absl::Status charged =
            context_.limiter->ChargeIngest(record.tenant, new_tokens);
        !charged.ok()) {
      return charged;
    }
  }
  absl::StatusOr<std::vector<int32_t>> tokens =
      context_.store->GetTokens(storage::RefOf(record));
  if (!tokens.ok()) return tokens.status();
  if (static_cast<int64_t>(tokens->size()) != old_total) {
    return absl::AbortedError(
        absl::StrCat("document '", record.document_id,
                     "' changed while appending (", tokens->size(),
                     " stored tokens, the record read had ", old_total, ")"));
  }

  // Start from the document's last state (recomputed if it was lost); only
  // the new tokens are read.
  UsageTally usage;
  absl::StatusOr<storage::StateKey> last =
      DocumentStates(context_).EnsureDocumentState(server, record, usage);
  if (!last.ok()) return last.status();
  const int64_t segments_total =
      old_segments + (new_tokens + segment - 1) / segment;
  PrefillCall call;
  call.model = record.model;
  call.tenant = record.tenant;
  call.document_id = record.document_id;
  call.parent = *last;
  call.checkpoint_tokens = segment;
  int64_t segments_done = old_segments;
  int64_t last_tokens_done = 0;
  absl::StatusOr<PrefillOutcome> outcome = CallPrefill(
      *context_.prefill, server, call, appended,
      [&](const v1::PrefillResponse& r) {
        if (r.done()) return;
        if (r.tokens_done() <= last_tokens_done) {
          segments_done = old_segments;  // a retried call starts over
        }
        last_tokens_done = r.tokens_done();
        segments_done += r.checkpoints_size();
        v1::IngestResponse update;
        update.set_document_id(record.document_id);
        update.set_segments_done(segments_done);
        update.set_segments_total(segments_total);
        update.set_tokens_done(old_total + r.tokens_done());
        update.set_tokens_total(total);
        update.set_tokens_per_second(r.tokens_per_second());
        progress(update);
      });
  if (!outcome.ok()) return outcome.status();

  Appended result;
  storage::DocumentRecord& updated = result.record;
  updated = record;
  for (const storage::SegmentBoundary& checkpoint : outcome->checkpoints) {
    updated.segments.push_back(
        {old_total + checkpoint.end_token, checkpoint.state_key});
  }
  updated.token_count = total;
  // The whole text is no longer known here (only its tokens are stored).
  updated.text_sha256.clear();
  // Whole-document mode states (the JRT prefix encoding) describe the old
  // document: dropped, and re-encoded by the next question that needs one.
  updated.mode_states.clear();
  updated.accessed_unix_ms = absl::ToUnixMillis(absl::Now());
  tokens->insert(tokens->end(), appended.begin(), appended.end());
  // The new states are durable; the record, its tokens and its references
  // change in one atomic write, made only if the record is still the one
  // read (`updated.revision`).
  absl::Status put = context_.store->PutDocument(updated, *tokens);
  if (context_.records != nullptr)
    context_.records->Forget(storage::RefOf(updated));
  if (!put.ok()) return put;
  updated.revision += 1;  // what the catalog committed
  result.tokens_computed = outcome->tokens_computed + usage.tokens_prefilled;
  result.segments_reused = outcome->checkpoints_reused;
  return result;
}

}  // namespace twice::services
