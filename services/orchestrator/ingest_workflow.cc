// The write half of the orchestrator: Ingest (a new document, segment by
// segment) and Append (new tokens after a stored document's last state).
//
// Both prefill through the prefill service, which stores a state at every
// segment boundary and reuses any boundary whose chain key is already stored;
// so a repeated or interrupted call resumes where the stored states end, and
// documents sharing a prefix share its states. The document record is
// written last, in one atomic store write, after the states it names are
// durable.
#include "services/orchestrator/ingest_workflow.h"

#include <chrono>
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
#include "services/orchestrator/document_states.h"
#include "services/orchestrator/document_writes.h"

namespace twice::services {

grpc::Status IngestWorkflow::Run(
    grpc::ServerContext& server,
    grpc::ServerReaderWriter<v1::IngestResponse, v1::IngestRequest>& stream) {
  const auto started = std::chrono::steady_clock::now();
  const std::string& tenant = tenant_;
  v1::IngestRequest request;
  if (!stream.Read(&request) || !request.has_header()) {
    return InvalidRequest("Ingest: the first message must carry the header");
  }
  const v1::IngestHeader header = request.header();
  absl::StatusOr<const ModelCard*> found =
      context_.models->Find(header.model());
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
      request, [&](v1::IngestRequest* next) { return stream.Read(next); },
      context_.limits->max_document_bytes, header.total_size());
  if (!collected.ok()) return ToGrpcStatus(collected.status());
  const bool from_text = !collected->text.empty();
  const std::string text_sha256 = from_text ? HexSha256(collected->text) : "";
  absl::StatusOr<std::vector<int32_t>> document =
      DocumentTokens(model, *std::move(collected), 0);
  if (!document.ok()) return ToGrpcStatus(document.status());
  const std::vector<int32_t>& tokens = *document;
  if (tokens.empty()) return InvalidRequest("the document is empty");
  if (static_cast<int64_t>(tokens.size()) >
      context_.limits->max_document_tokens) {
    return ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "document has ", tokens.size(), " tokens; the limit is ",
        context_.limits->max_document_tokens, " (max_document_tokens)")));
  }
  const int64_t model_segment = model.training_context() > 0
                                    ? model.training_context()
                                    : kFallbackSegmentTokens;
  absl::StatusOr<int64_t> planned =
      PlanSegment(*context_.limits, header.segment_tokens(), model_segment, 0,
                  static_cast<int64_t>(tokens.size()));
  if (!planned.ok()) return ToGrpcStatus(planned.status());
  const int64_t segment = *planned;
  // Charged only for a request that passed every size check: a refused
  // one must not use up the tenant's quota.
  if (absl::Status charged = context_.limiter->ChargeIngest(
          tenant, static_cast<int64_t>(tokens.size()));
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
  std::shared_ptr<void> lock = context_.locks->Lock({tenant, document_id});

  absl::StatusOr<storage::DocumentRecord> existing =
      context_.store->GetDocument({tenant, document_id});
  int64_t created_ms = absl::ToUnixMillis(absl::Now());
  bool pinned = header.pin();
  if (existing.ok()) {
    absl::StatusOr<std::vector<int32_t>> stored_tokens =
        context_.store->GetTokens({tenant, document_id});
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
    absl::Status allowed =
        CheckPinAllowed(*context_.store, *context_.limits, tenant, document_id);
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
  absl::StatusOr<PrefillOutcome> outcome =
      CallPrefill(*context_.prefill, server, call, tokens,
                  [&](const v1::PrefillResponse& r) {
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
                    stream.Write(progress);
                  });
  if (!outcome.ok()) return ToGrpcStatus(outcome.status());
  segments_reused = outcome->checkpoints_reused;
  int64_t tokens_computed = outcome->tokens_computed;

  std::vector<std::pair<std::string, storage::StateKey>> mode_states;
  if (existing.ok()) mode_states = existing->mode_states;
  if (prepare_prefix) {
    absl::StatusOr<PrefillOutcome> prefix =
        DocumentStates(context_).PrefillPrefixState(
            server, model_name, {tenant, document_id}, tokens);
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
  absl::Status put = context_.store->PutDocument(record, tokens);
  for (int attempt = 1; absl::IsAborted(put) && attempt < kCommitAttempts;
       ++attempt) {
    absl::StatusOr<storage::DocumentRecord> now =
        context_.store->GetDocument({tenant, document_id});
    if (now.ok()) {
      absl::StatusOr<std::vector<int32_t>> now_tokens =
          context_.store->GetTokens({tenant, document_id});
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
    put = context_.store->PutDocument(record, tokens);
  }
  if (context_.records != nullptr)
    context_.records->Forget(storage::RefOf(record));
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
  stream.Write(done);
  Log(LogLevel::kInfo, "ingest.done",
      absl::StrCat("doc=", document_id, " tokens=", total,
                   " segments=", segments_total, " reused=", segments_reused,
                   " computed_tokens=", tokens_computed,
                   " prefix=", prepare_prefix));
  return grpc::Status::OK;
}

}  // namespace twice::services
