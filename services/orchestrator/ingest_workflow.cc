// The write half of the orchestrator: Ingest (a new document, segment by
// segment) and Append (new tokens after a stored document's last state).
//
// Both prefill through the prefill service, which stores a state at every
// segment boundary and reuses any boundary whose chain key is already stored;
// so a repeated or interrupted call resumes where the stored states end, and
// documents sharing a prefix share its states. The document record is
// written last, in one atomic store write, after the states it names are
// durable.
#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/grpc_status.h"
#include "services/common/log.h"
#include "services/common/proto_convert.h"
#include "services/common/sha256.h"
#include "services/common/state_io.h"
#include "services/orchestrator/document_ids.h"
#include "services/orchestrator/internal_calls.h"
#include "services/orchestrator/orchestrator_service.h"

namespace twice::services {
namespace {

// Segment size when neither the request nor the model names one.
constexpr int64_t kFallbackSegmentTokens = 2048;

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// The document text or token ids a stream carries, within the byte limit.
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
};

// `total_size`: what the first message announced (text bytes or token
// ids; 0 = nothing announced), checked against what arrived.
template <typename Request>
absl::StatusOr<Collected> Collect(
    Request& request, const std::function<bool(Request*)>& read_next,
    int64_t max_bytes, int64_t total_size) {
  Collected out;
  int64_t bytes = 0;
  do {
    bytes += static_cast<int64_t>(request.text().size()) +
             4 * static_cast<int64_t>(request.tokens_size());
    if (bytes > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("document exceeds the limit of ", max_bytes,
                       " bytes (max_document_bytes)"));
    }
    out.text.append(request.text());
    out.tokens.insert(out.tokens.end(), request.tokens().begin(),
                      request.tokens().end());
  } while (read_next(&request));
  if (!out.text.empty() && !out.tokens.empty()) {
    return absl::InvalidArgumentError(
        "send the document as text or as token ids, not both");
  }
  const int64_t received = out.text.empty()
                               ? static_cast<int64_t>(out.tokens.size())
                               : static_cast<int64_t>(out.text.size());
  if (total_size < 0) {
    return absl::InvalidArgumentError("total_size must not be negative");
  }
  if (total_size > 0 && received != total_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the stream carried ", received, " of the ", total_size,
        " bytes or token ids that total_size announced: a message was lost "
        "(is every text piece valid UTF-8?); nothing was stored"));
  }
  return out;
}

// Token ids from `collected` (text tokenized on its own), each checked
// against the vocabulary; positions in errors count from `offset`.
absl::StatusOr<std::vector<int32_t>> DocumentTokens(const ModelCard& model,
                                                    Collected collected,
                                                    int64_t offset) {
  std::vector<int32_t> tokens = std::move(collected.tokens);
  if (!collected.text.empty()) {
    absl::StatusOr<std::vector<int32_t>> encoded =
        model.tokenizer().Encode(collected.text);
    if (!encoded.ok()) return encoded.status();
    tokens = *std::move(encoded);
  }
  if (absl::Status valid = model.CheckTokenIds(tokens, "document", offset);
      !valid.ok()) {
    return valid;
  }
  return tokens;
}

// The pause before commit attempt `attempt` (1 = the first retry): random
// in [base, 2 base) with base 10 ms doubling per attempt, so two replicas
// that collided are unlikely to collide again.
absl::Duration CommitBackoff(int attempt) {
  static thread_local std::mt19937 rng(std::random_device{}());
  const int64_t base_ms = int64_t{10} << std::min(attempt - 1, 6);
  std::uniform_int_distribution<int64_t> jitter(0, base_ms - 1);
  return absl::Milliseconds(base_ms + jitter(rng));
}

// Checked before the document is read, so a bad value costs nothing.
absl::Status ValidateSegmentTokens(int64_t segment_tokens) {
  if (segment_tokens == 0 || segment_tokens >= kMinSegmentTokens) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("segment_tokens must be 0 (the default) or at least ",
                   kMinSegmentTokens, ", got ", segment_tokens));
}

}  // namespace

absl::StatusOr<int64_t> OrchestratorService::PlanSegment(
    int64_t requested, int64_t fallback, int64_t old_segments,
    int64_t new_tokens) const {
  const int64_t room = limits_.max_segments_per_document - old_segments;
  if (room <= 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the document has ", old_segments,
                     " segments, the limit "
                     "(max_segments_per_document)"));
  }
  // The smallest segment that keeps the document within its segments.
  const int64_t smallest = (new_tokens + room - 1) / room;
  if (requested == 0) return std::max(fallback, smallest);
  if (requested < smallest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segment_tokens ", requested, " would make the document ",
        old_segments + (new_tokens + requested - 1) / requested,
        " segments; at most ", limits_.max_segments_per_document,
        " are stored per document (max_segments_per_document): use at "
        "least ",
        smallest, " or 0"));
  }
  return requested;
}

grpc::Status OrchestratorService::Ingest(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>* stream) {
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<std::string> caller_tenant = CallerTenant(*context);
  if (!caller_tenant.ok()) return ToGrpcStatus(caller_tenant.status());
  absl::StatusOr<std::shared_ptr<void>> slot =
      limiter_.EnterCall(*caller_tenant);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  if (grpc::Status bound = CheckBound(); !bound.ok()) return bound;
  const std::string tenant = *caller_tenant;
  v1::IngestRequest request;
  if (!stream->Read(&request) || !request.has_header()) {
    return InvalidRequest("Ingest: the first message must carry the header");
  }
  const v1::IngestHeader header = request.header();
  absl::StatusOr<const ModelCard*> found = models_->Find(header.model());
  if (!found.ok()) return ToGrpcStatus(found.status());
  const ModelCard& model = **found;
  const std::string& model_name = model.name();
  // A model with a prefix encoder always gets the prefix state too: ask
  // mode "prefix" is then as cheap as "default".
  const bool prepare_prefix = model.has_prefix_encoder();
  if (header.prepare_prefix() && !prepare_prefix) {
    return ToGrpcStatus(model.NoPrefixEncoder());
  }
  if (absl::Status valid = ValidateSegmentTokens(header.segment_tokens());
      !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  if (!header.document_id().empty()) {
    absl::Status valid = ValidateDocumentId(header.document_id());
    if (!valid.ok()) return ToGrpcStatus(valid);
  }

  // Collect the document; limits apply to what arrives, before tokenizing.
  absl::StatusOr<Collected> collected = Collect<v1::IngestRequest>(
      request, [&](v1::IngestRequest* next) { return stream->Read(next); },
      limits_.max_document_bytes, header.total_size());
  if (!collected.ok()) return ToGrpcStatus(collected.status());
  const bool from_text = !collected->text.empty();
  const std::string text_sha256 = from_text ? HexSha256(collected->text) : "";
  absl::StatusOr<std::vector<int32_t>> document =
      DocumentTokens(model, *std::move(collected), 0);
  if (!document.ok()) return ToGrpcStatus(document.status());
  const std::vector<int32_t>& tokens = *document;
  if (tokens.empty()) return InvalidRequest("the document is empty");
  if (static_cast<int64_t>(tokens.size()) > limits_.max_document_tokens) {
    return ToGrpcStatus(absl::ResourceExhaustedError(
        absl::StrCat("document has ", tokens.size(), " tokens; the limit is ",
                     limits_.max_document_tokens, " (max_document_tokens)")));
  }
  const int64_t model_segment = model.training_context() > 0
                                    ? model.training_context()
                                    : kFallbackSegmentTokens;
  absl::StatusOr<int64_t> planned =
      PlanSegment(header.segment_tokens(), model_segment, 0,
                  static_cast<int64_t>(tokens.size()));
  if (!planned.ok()) return ToGrpcStatus(planned.status());
  const int64_t segment = *planned;
  // Charged only for a request that passed every size check: a refused
  // one must not use up the tenant's quota.
  if (absl::Status charged =
          limiter_.ChargeIngest(tenant, static_cast<int64_t>(tokens.size()));
      !charged.ok()) {
    return ToGrpcStatus(charged);
  }

  const std::string fingerprint = model.fingerprint();
  const std::string document_id =
      header.document_id().empty()
          ? DeriveDocumentId(fingerprint, tenant, tokens)
          : header.document_id();
  const int64_t total = static_cast<int64_t>(tokens.size());
  const int64_t segments_total = (total + segment - 1) / segment;
  // An append to the same document must not interleave with this write.
  std::shared_ptr<void> lock = LockDocument(tenant + "/" + document_id);

  absl::StatusOr<storage::DocumentRecord> existing =
      store_->GetDocument({tenant, document_id});
  int64_t created_ms = absl::ToUnixMillis(absl::Now());
  bool pinned = header.pin();
  if (existing.ok()) {
    absl::StatusOr<std::vector<int32_t>> stored_tokens =
        store_->GetTokens({tenant, document_id});
    if (!stored_tokens.ok()) return ToGrpcStatus(stored_tokens.status());
    if (*stored_tokens != tokens ||
        existing->model_fingerprint != fingerprint) {
      return ToGrpcStatus(absl::AlreadyExistsError(
          absl::StrCat("document '", document_id,
                       "' exists with different content or model; delete it "
                       "first or choose another id")));
    }
    created_ms = existing->created_unix_ms;
    pinned = pinned || existing->pinned;
  } else if (existing.status().code() != absl::StatusCode::kNotFound) {
    return ToGrpcStatus(existing.status());
  }
  if (header.pin() && !(existing.ok() && existing->pinned)) {
    absl::Status allowed = CheckPinAllowed(tenant, document_id);
    if (!allowed.ok()) return ToGrpcStatus(allowed);
  }

  // Prefill segment by segment; segments already stored (a repeated or an
  // interrupted ingest, or a prefix shared with another document) are
  // reused by chain key, not recomputed.
  PrefillCall call;
  call.model = model_name;
  call.tenant = tenant;
  call.document_id = document_id;
  call.checkpoint_tokens = segment;
  int64_t segments_reused = 0;
  int64_t segments_done = 0;
  int64_t last_tokens_done = 0;
  absl::StatusOr<PrefillOutcome> outcome = CallPrefill(
      *prefill_, *context, call, tokens, [&](const v1::PrefillResponse& r) {
        if (r.done()) return;
        // A retried call (another prefill endpoint) starts over.
        if (r.tokens_done() <= last_tokens_done) {
          segments_reused = segments_done = 0;
        }
        last_tokens_done = r.tokens_done();
        segments_reused += r.checkpoints_reused();
        segments_done += r.checkpoints_size();
        v1::IngestResponse progress;
        progress.set_document_id(document_id);
        progress.set_segments_done(segments_done);
        progress.set_segments_total(segments_total);
        progress.set_tokens_done(r.tokens_done());
        progress.set_tokens_total(total);
        progress.set_tokens_per_second(r.tokens_per_second());
        progress.set_segments_reused(segments_reused);
        stream->Write(progress);
      });
  if (!outcome.ok()) return ToGrpcStatus(outcome.status());
  segments_reused = outcome->checkpoints_reused;
  int64_t tokens_computed = outcome->tokens_computed;

  std::vector<std::pair<std::string, storage::StateKey>> mode_states;
  if (existing.ok()) mode_states = existing->mode_states;
  if (prepare_prefix) {
    absl::StatusOr<PrefillOutcome> prefix =
        PrefillPrefixState(*context, model_name, tenant, document_id, tokens);
    if (!prefix.ok()) return ToGrpcStatus(prefix.status());
    tokens_computed += prefix->tokens_computed;
    const std::string name(PrefillModeName(engine::PrefillMode::kPrefix));
    std::erase_if(mode_states,
                  [&](const auto& entry) { return entry.first == name; });
    mode_states.emplace_back(name, prefix->final_state);
  }

  storage::DocumentRecord record;
  record.tenant = tenant;
  record.document_id = document_id;
  record.model = model_name;
  record.model_fingerprint = fingerprint;
  record.text_sha256 = text_sha256;
  record.token_count = total;
  record.segment_tokens = segment;
  record.segments = outcome->checkpoints;
  record.mode_states = std::move(mode_states);
  record.pinned = pinned;
  record.created_unix_ms = created_ms;
  record.accessed_unix_ms = absl::ToUnixMillis(absl::Now());
  record.revision = existing.ok() ? existing->revision : 0;
  // The states the record names are durable (the prefill stored them before
  // answering), so the record may now point at them. The write is
  // conditional on the record read above: another orchestrator replica may
  // have ingested (or deleted) the same id meanwhile.
  absl::Status put = store_->PutDocument(record, tokens);
  for (int attempt = 1; absl::IsAborted(put) && attempt < kCommitAttempts;
       ++attempt) {
    absl::StatusOr<storage::DocumentRecord> now =
        store_->GetDocument({tenant, document_id});
    if (now.ok()) {
      absl::StatusOr<std::vector<int32_t>> now_tokens =
          store_->GetTokens({tenant, document_id});
      if (!now_tokens.ok()) return ToGrpcStatus(now_tokens.status());
      if (*now_tokens != tokens || now->model_fingerprint != fingerprint) {
        return ToGrpcStatus(absl::AlreadyExistsError(absl::StrCat(
            "document '", document_id,
            "' was just stored with different content or model by another "
            "call; delete it first or choose another id")));
      }
      // The same document: this ingest's record replaces it, keeping its
      // creation time and pin.
      record.revision = now->revision;
      record.created_unix_ms = now->created_unix_ms;
      record.pinned = record.pinned || now->pinned;
    } else if (absl::IsNotFound(now.status())) {
      record.revision = 0;
    } else {
      return ToGrpcStatus(now.status());
    }
    put = store_->PutDocument(record, tokens);
  }
  if (!put.ok()) return ToGrpcStatus(put);
  record.revision += 1;

  const double seconds = SecondsSince(started);
  v1::IngestResponse done;
  done.set_document_id(document_id);
  done.set_segments_done(static_cast<int64_t>(record.segments.size()));
  done.set_segments_total(static_cast<int64_t>(record.segments.size()));
  done.set_tokens_done(total);
  done.set_tokens_total(total);
  done.set_tokens_per_second(
      seconds > 0 ? static_cast<double>(tokens_computed) / seconds : 0);
  done.set_segments_reused(segments_reused);
  *done.mutable_done() = ToDocumentInfo(record);
  stream->Write(done);
  Log(LogLevel::kInfo, "ingest.done",
      absl::StrCat("doc=", document_id, " tokens=", total,
                   " segments=", segments_total, " reused=", segments_reused,
                   " computed_tokens=", tokens_computed,
                   " prefix=", prepare_prefix));
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::Append(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::AppendRequest>* stream) {
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<std::shared_ptr<void>> slot = AdmitCall(*context);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  if (grpc::Status bound = CheckBound(); !bound.ok()) return bound;
  v1::AppendRequest request;
  if (!stream->Read(&request) || request.document_id().empty()) {
    return InvalidRequest("Append: the first message must name the document");
  }
  if (absl::Status valid = ValidateSegmentTokens(request.segment_tokens());
      !valid.ok()) {
    return ToGrpcStatus(valid);
  }
  const std::string document_id = request.document_id();
  const int64_t requested_segment = request.segment_tokens();
  absl::StatusOr<storage::DocumentRecord> found =
      FindDocument(*context, document_id);
  if (!found.ok()) return ToGrpcStatus(found.status());
  // Held from reading the record to writing the new one, so appends
  // through this process queue instead of conflicting.
  std::shared_ptr<void> lock =
      LockDocument(found->tenant + "/" + found->document_id);
  // Re-read under the lock: another append may have just finished.
  absl::StatusOr<storage::DocumentRecord> record =
      FindDocument(*context, document_id);
  if (!record.ok()) return ToGrpcStatus(record.status());
  absl::StatusOr<const ModelCard*> model =
      ModelOfDocument(*context, *record, /*locked=*/true);
  if (!model.ok()) return ToGrpcStatus(model.status());

  absl::StatusOr<Collected> collected = Collect<v1::AppendRequest>(
      request, [&](v1::AppendRequest* next) { return stream->Read(next); },
      limits_.max_document_bytes, request.total_size());
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
      if (context->IsCancelled()) {
        return ToGrpcStatus(absl::CancelledError("Append cancelled"));
      }
      // The winner is committing its own appends back to back: step aside
      // for a random, growing moment so the two do not collide again.
      absl::SleepFor(CommitBackoff(attempt));
      Log(LogLevel::kInfo, "append.conflict",
          absl::StrCat(
              "doc=", document_id, " attempt=", attempt + 1,
              " reason=", LogValue(std::string(done.status().message()))));
      record = FindDocument(*context, document_id);
      if (!record.ok()) return ToGrpcStatus(record.status());
      model = ModelOfDocument(*context, *record, /*locked=*/true);
      if (!model.ok()) return ToGrpcStatus(model.status());
    }
    done = AppendOnce(
        *context, *record, *appended, requested_segment,
        /*charge=*/attempt == 0,
        [&](const v1::IngestResponse& progress) { stream->Write(progress); });
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
  stream->Write(finished);
  Log(LogLevel::kInfo, "append.done",
      absl::StrCat("doc=", updated.document_id,
                   " from=", total - static_cast<int64_t>(appended->size()),
                   " tokens=", total, " computed_tokens=",
                   done->tokens_computed, " reused=", done->segments_reused));
  return grpc::Status::OK;
}

absl::StatusOr<OrchestratorService::Appended> OrchestratorService::AppendOnce(
    grpc::ServerContext& context, const storage::DocumentRecord& record,
    absl::Span<const int32_t> appended, int64_t requested_segment, bool charge,
    const std::function<void(const v1::IngestResponse&)>& progress) {
  const int64_t old_total = record.token_count;
  const int64_t new_tokens = static_cast<int64_t>(appended.size());
  const int64_t total = old_total + new_tokens;
  if (total > limits_.max_document_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the document would have ", total, " tokens; the limit is ",
        limits_.max_document_tokens, " (max_document_tokens)"));
  }
  const int64_t old_segments = static_cast<int64_t>(record.segments.size());
  absl::StatusOr<int64_t> planned =
      PlanSegment(requested_segment,
                  record.segment_tokens > 0 ? record.segment_tokens
                                            : kFallbackSegmentTokens,
                  old_segments, new_tokens);
  if (!planned.ok()) return planned.status();
  const int64_t segment = *planned;
  // Charged only once every size check passed, and once per call.
  if (charge) {
    if (absl::Status charged = limiter_.ChargeIngest(record.tenant, new_tokens);
        !charged.ok()) {
      return charged;
    }
  }
  absl::StatusOr<std::vector<int32_t>> tokens =
      store_->GetTokens(storage::RefOf(record));
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
      EnsureDocumentState(context, record, usage);
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
      *prefill_, context, call, appended, [&](const v1::PrefillResponse& r) {
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
  if (absl::Status put = store_->PutDocument(updated, *tokens); !put.ok()) {
    return put;
  }
  updated.revision += 1;  // what the catalog committed
  result.tokens_computed = outcome->tokens_computed + usage.tokens_prefilled;
  result.segments_reused = outcome->checkpoints_reused;
  return result;
}

}  // namespace twice::services
