#include "services/orchestrator/document_states.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "services/common/log.h"
#include "services/common/state_io.h"
#include "services/orchestrator/internal_calls.h"

namespace twice::services {

absl::StatusOr<storage::StateKey> DocumentStates::EnsureDocumentState(
    grpc::ServerContext& server, const storage::DocumentRecord& record,
    UsageTally& usage) {
  if (record.segments.empty()) {
    return absl::DataLossError(absl::StrCat(
        "document '", record.document_id, "' has no segment states recorded"));
  }
  return EnsureBoundaryState(server, record, record.segments.size() - 1, usage);
}

absl::StatusOr<storage::StateKey> DocumentStates::EnsureBoundaryState(
    grpc::ServerContext& server, const storage::DocumentRecord& record,
    size_t index, UsageTally& usage) {
  if (index >= record.segments.size()) {
    return absl::InternalError("boundary index out of range");
  }
  const storage::SegmentBoundary& target = record.segments[index];
  absl::StatusOr<bool> stored = context_.store->HasState(target.state_key);
  if (!stored.ok()) return stored.status();
  if (*stored) {
    usage.Reused(target.end_token);
    return target.state_key;
  }
  absl::StatusOr<std::vector<int32_t>> tokens =
      context_.store->GetTokens(storage::RefOf(record));
  if (!tokens.ok()) return tokens.status();
  if (static_cast<int64_t>(tokens->size()) < target.end_token) {
    return absl::DataLossError(
        absl::StrCat("document '", record.document_id, "' has ", tokens->size(),
                     " stored tokens but a boundary at ", target.end_token));
  }
  // HasState does not verify, so the boundary we resume from may itself turn
  // out corrupt when the prefill service loads it; it is deleted then, and
  // the next walk back skips it. Each retry removes at least one bad state.
  absl::StatusOr<storage::StateKey> recomputed =
      absl::NotFoundError("no attempt");
  for (size_t attempt = 0; attempt <= index + 1; ++attempt) {
    recomputed = RecomputeBoundaryState(server, record, index, *tokens, usage);
    if (recomputed.status().code() != absl::StatusCode::kNotFound) break;
    Log(LogLevel::kWarning, "document.resume_state_lost",
        absl::StrCat("doc=", record.document_id, " reason=",
                     LogValue(std::string(recomputed.status().message()))));
  }
  return recomputed;
}

absl::StatusOr<storage::StateKey> DocumentStates::RecomputeBoundaryState(
    grpc::ServerContext& server, const storage::DocumentRecord& record,
    size_t index, const std::vector<int32_t>& all_tokens, UsageTally& usage) {
  const storage::SegmentBoundary& target = record.segments[index];
  // Walk back to the latest boundary whose state is still stored and read
  // the document's tokens from there.
  int resume = static_cast<int>(index) - 1;
  while (resume >= 0) {
    absl::StatusOr<bool> has =
        context_.store->HasState(record.segments[resume].state_key);
    if (!has.ok()) return has.status();
    if (*has) break;
    --resume;
  }
  PrefillCall call;
  call.model = record.model;
  call.tenant = record.tenant;
  call.document_id = record.document_id;
  int64_t start = 0;
  if (resume >= 0) {
    call.parent = record.segments[resume].state_key;
    start = record.segments[resume].end_token;
  }
  // One checkpoint per recorded boundary, relative to this call.
  for (size_t i = static_cast<size_t>(resume + 1); i <= index; ++i) {
    call.checkpoint_at.push_back(record.segments[i].end_token - start);
  }
  absl::StatusOr<PrefillOutcome> outcome =
      CallPrefill(*context_.prefill, server, call,
                  absl::MakeConstSpan(all_tokens)
                      .subspan(static_cast<size_t>(start),
                               static_cast<size_t>(target.end_token - start)),
                  nullptr);
  if (!outcome.ok()) return outcome.status();
  if (resume >= 0) {
    usage.Reused(start);
  }
  // Chain keys are content addresses: recomputing the same tokens from the
  // same boundary along the same boundaries must land on the recorded keys.
  if (outcome->checkpoints.size() !=
          index - static_cast<size_t>(resume + 1) + 1 ||
      !(outcome->final_state == target.state_key)) {
    return absl::InternalError(absl::StrCat(
        "recomputed state of document '", record.document_id, "' at token ",
        target.end_token, " does not match its recorded key"));
  }
  for (size_t i = 0; i < outcome->checkpoints.size(); ++i) {
    if (!(outcome->checkpoints[i].state_key ==
          record.segments[resume + 1 + i].state_key)) {
      return absl::InternalError(absl::StrCat(
          "recomputed boundary ", resume + 1 + i, " of document '",
          record.document_id, "' does not match its recorded key"));
    }
  }
  const int64_t recomputed = static_cast<int64_t>(outcome->checkpoints.size()) -
                             outcome->checkpoints_reused +
                             outcome->states_recomputed;
  usage.states_recomputed += recomputed;
  usage.tokens_prefilled += outcome->tokens_computed;
  for (int64_t i = 0; i < recomputed; ++i) context_.store->RecordRecompute();
  Log(LogLevel::kInfo, "document.recomputed",
      absl::StrCat("doc=", record.document_id, " from_token=", start,
                   " to_token=", target.end_token, " states=", recomputed));
  return target.state_key;
}

absl::StatusOr<PrefillOutcome> DocumentStates::PrefillPrefixState(
    grpc::ServerContext& server, const std::string& model,
    const storage::DocumentRef& document, absl::Span<const int32_t> tokens) {
  PrefillCall call;
  call.model = model;
  call.tenant = document.tenant;
  call.document_id = document.document_id;
  call.mode = v1::PREFILL_MODE_PREFIX;
  call.checkpoint_tokens = 0;  // one state: see the declaration
  return CallPrefill(*context_.prefill, server, call, tokens, nullptr);
}

absl::StatusOr<storage::StateKey> DocumentStates::EnsurePrefixState(
    grpc::ServerContext& server, const storage::DocumentRecord& record,
    UsageTally& usage) {
  const std::string name(PrefillModeName(engine::PrefillMode::kPrefix));
  std::optional<storage::StateKey> recorded;
  for (const auto& [mode, key] : record.mode_states) {
    if (mode == name) recorded = key;
  }
  if (recorded) {
    absl::StatusOr<bool> stored = context_.store->HasState(*recorded);
    if (!stored.ok()) return stored.status();
    if (*stored) {
      usage.Reused(record.token_count);
      return *recorded;
    }
  }
  // Lost, or never prepared (a document ingested without it, or appended
  // to since): tokens are the truth, so encode them again.
  absl::StatusOr<std::vector<int32_t>> tokens =
      context_.store->GetTokens(storage::RefOf(record));
  if (!tokens.ok()) return tokens.status();
  absl::StatusOr<PrefillOutcome> outcome =
      PrefillPrefixState(server, record.model, storage::RefOf(record), *tokens);
  if (!outcome.ok()) return outcome.status();
  usage.tokens_prefilled += outcome->tokens_computed;
  if (recorded) {
    // Chain keys are content addresses: the same tokens from the same root
    // must land on the recorded key.
    if (!(outcome->final_state == *recorded)) {
      return absl::InternalError(absl::StrCat(
          "recomputed prefix state of document '", record.document_id,
          "' does not match its recorded key"));
    }
    usage.states_recomputed += 1;
    context_.store->RecordRecompute();
    Log(LogLevel::kInfo, "document.prefix_recomputed",
        absl::StrCat("doc=", record.document_id));
    return *recorded;
  }
  // Record it so the next question reuses it, unless the document changed
  // meanwhile (an append): then only this answer uses it. The state is
  // durable already; failing to record it only costs a recompute later.
  std::shared_ptr<void> lock = context_.locks->Lock(storage::RefOf(record));
  absl::StatusOr<storage::DocumentRecord> current =
      context_.store->GetDocument(storage::RefOf(record));
  if (current.ok() && current->token_count == record.token_count &&
      current->segments.size() == record.segments.size()) {
    std::erase_if(current->mode_states,
                  [&](const auto& entry) { return entry.first == name; });
    current->mode_states.emplace_back(name, outcome->final_state);
    absl::Status saved = context_.store->UpdateDocument(*current);
    if (!saved.ok()) {
      Log(LogLevel::kWarning, "document.prefix_record_failed",
          absl::StrCat("doc=", record.document_id,
                       " reason=", LogValue(std::string(saved.message()))));
    }
  }
  return outcome->final_state;
}

absl::StatusOr<const ModelCard*> DocumentStates::ModelOfDocument(
    grpc::ServerContext& server, storage::DocumentRecord& record, bool locked) {
  absl::StatusOr<const ModelCard*> model = context_.models->Find(record.model);
  if (absl::IsNotFound(model.status())) {
    return absl::FailedPreconditionError(model.status().message());
  }
  if (!model.ok()) return model.status();
  // States are bound to the model fingerprint: a document read by another
  // version of the model cannot resume from them, but its tokens are the
  // truth.
  if ((*model)->fingerprint() != record.model_fingerprint) {
    absl::Status upgraded = UpgradeDocument(server, **model, record, locked);
    if (!upgraded.ok()) return upgraded;
  }
  return model;
}

absl::Status DocumentStates::UpgradeDocument(grpc::ServerContext& server,
                                             const ModelCard& model,
                                             storage::DocumentRecord& record,
                                             bool locked) {
  std::shared_ptr<void> lock;
  if (!locked) lock = context_.locks->Lock(storage::RefOf(record));
  const std::string& fingerprint = model.fingerprint();
  // Another question may have upgraded it while this one waited.
  absl::StatusOr<storage::DocumentRecord> current =
      context_.store->GetDocument(storage::RefOf(record));
  if (!current.ok()) return current.status();
  if (current->model_fingerprint == fingerprint) {
    record = *std::move(current);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int32_t>> tokens =
      context_.store->GetTokens(storage::RefOf(record));
  if (!tokens.ok()) return tokens.status();
  PrefillCall call;
  call.model = current->model;
  call.tenant = current->tenant;
  call.document_id = current->document_id;
  call.checkpoint_tokens = current->segment_tokens;
  absl::StatusOr<PrefillOutcome> outcome =
      CallPrefill(*context_.prefill, server, call, *tokens, nullptr);
  if (!outcome.ok()) {
    if (outcome.status().code() == absl::StatusCode::kInvalidArgument) {
      // Tokens of the old version that the new one does not accept (its
      // tokenizer changed): only a new ingest of the text can help.
      return absl::FailedPreconditionError(
          absl::StrCat("document '", record.document_id,
                       "' was read by another version "
                       "of model '",
                       record.model, "' and its tokens do not fit this one (",
                       outcome.status().message(), "); ingest it again"));
    }
    return outcome.status();
  }
  storage::DocumentRecord upgraded = *std::move(current);
  upgraded.model_fingerprint = fingerprint;
  upgraded.segments = outcome->checkpoints;
  upgraded.mode_states.clear();
  upgraded.accessed_unix_ms = absl::ToUnixMillis(absl::Now());
  if (absl::Status put = context_.store->UpdateDocument(upgraded); !put.ok()) {
    // Another replica upgraded (or changed) it meanwhile: take its record
    // when it is of this version, else report the conflict.
    if (absl::IsAborted(put)) {
      absl::StatusOr<storage::DocumentRecord> now =
          context_.store->GetDocument(storage::RefOf(record));
      if (now.ok() && now->model_fingerprint == fingerprint) {
        record = *std::move(now);
        return absl::OkStatus();
      }
    }
    return put;
  }
  upgraded.revision += 1;  // what the catalog committed
  Log(LogLevel::kInfo, "document.upgraded",
      absl::StrCat("doc=", upgraded.document_id, " model=", upgraded.model,
                   " tokens=", upgraded.token_count,
                   " tokens_computed=", outcome->tokens_computed));
  record = std::move(upgraded);
  return absl::OkStatus();
}

}  // namespace twice::services
