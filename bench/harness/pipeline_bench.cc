#include "bench/harness/pipeline_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "bench/harness/bench_common.h"
#include "services/common/grpc_status.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Token ids per ingest message: 256 KiB, well under the message limit.
constexpr int64_t kTokensPerMessage = 65536;

absl::Status Named(const std::string& step, const grpc::Status& status) {
  absl::Status s = services::FromGrpcStatus(status);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(step, ": ", s.message()));
}

class Bench {
 public:
  Bench(const CliContext& cli, const PipelineBenchOptions& options)
      : cli_(cli),
        options_(options),
        stub_(v1::Orchestrator::NewStub(cli.Connect())),
        rng_(std::random_device{}()) {}

  absl::Status Describe() {
    absl::StatusOr<v1::ModelInfo> model =
        FindServedModel(cli_, *stub_, options_.model);
    if (!model.ok()) return model.status();
    model_ = *std::move(model);
    return absl::OkStatus();
  }

  // A never-seen document of `length` tokens.
  std::vector<int32_t> RandomDocument(int64_t length) {
    // Ids below 256 stay clear of special tokens at the vocabulary's end.
    std::uniform_int_distribution<int32_t> id(
        0, std::max(1, model_.vocab_size() - 256));
    std::vector<int32_t> tokens(static_cast<size_t>(length));
    for (int32_t& t : tokens) t = id(rng_);
    return tokens;
  }

  struct Ingested {
    std::string id;
    int64_t tokens_computed = 0;
    int64_t tokens_reused = 0;  // found already stored
  };
  absl::StatusOr<Ingested> Ingest(const std::vector<int32_t>& tokens,
                                  int64_t segment) {
    std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
    auto stream = stub_->Ingest(call.get());
    const int64_t total = static_cast<int64_t>(tokens.size());
    for (int64_t offset = 0; offset < total; offset += kTokensPerMessage) {
      v1::IngestRequest request;
      if (offset == 0) {
        request.mutable_header()->set_model(model_.name());
        request.mutable_header()->set_segment_tokens(segment);
      }
      const int64_t end = std::min(total, offset + kTokensPerMessage);
      request.mutable_tokens()->Add(tokens.begin() + offset,
                                    tokens.begin() + end);
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
    v1::IngestResponse response, done;
    while (stream->Read(&response)) {
      if (response.has_done()) done = response;
    }
    absl::Status status = Named("Ingest", stream->Finish());
    if (!status.ok()) return status;
    Ingested out;
    out.id = done.done().document_id();
    // Fresh random documents share no segment with anything stored; the
    // prefix encoding (JRT models) is a second read of the document.
    int64_t reused = 0;
    for (int64_t i = 0;
         i < done.segments_reused() && i < done.done().segments_size(); ++i) {
      reused = done.done().segments(static_cast<int>(i)).end_token();
    }
    out.tokens_reused = reused;
    out.tokens_computed = total - reused;
    for (int mode : done.done().prepared_modes()) {
      if (mode == v1::PREFILL_MODE_PREFIX) out.tokens_computed += total;
    }
    return out;
  }

  struct Asked {
    double ttft_ms = 0;
    double total_ms = 0;
    v1::Usage usage;
  };
  // Timed from `start` to the first streamed token and to the last message.
  absl::StatusOr<Asked> Ask(const std::string& id, int question,
                            v1::AskMode mode, Clock::time_point start) {
    v1::AskRequest request;
    request.set_document_id(id);
    request.set_question(absl::StrCat("Question ", question,
                                      ": what does the document say about "
                                      "item ",
                                      question * 7 + 3, "?"));
    request.set_mode(mode);
    request.mutable_sampling()->set_max_tokens(options_.answer_tokens);
    request.mutable_sampling()->set_ignore_eos(true);
    std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
    auto reader = stub_->Ask(call.get(), request);
    Asked out;
    out.ttft_ms = -1;
    v1::AskResponse response;
    while (reader->Read(&response)) {
      if (out.ttft_ms < 0 &&
          (response.tokens_size() > 0 || response.finished())) {
        out.ttft_ms = MillisSince(start);
      }
      if (response.finished()) out.usage = response.usage();
    }
    out.total_ms = MillisSince(start);
    absl::Status status = Named("Ask", reader->Finish());
    if (!status.ok()) return status;
    return out;
  }

  // Deletes a document this run made (best effort: a benchmark should not
  // leave its scratch data in a deployment).
  void Delete(const std::string& id) {
    std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
    v1::DeleteDocumentRequest request;
    request.set_document_id(id);
    v1::DeleteDocumentResponse response;
    stub_->DeleteDocument(call.get(), request, &response).ok();
  }

  absl::StatusOr<PipelineBenchRow> Row(int64_t length, const std::string& mode,
                                       bool cold,
                                       const std::string& cached_id) {
    const bool baseline = mode == "baseline";
    v1::AskMode ask_mode = v1::ASK_MODE_DEFAULT;
    if (!baseline && !v1::AskMode_Parse(
                         absl::StrCat("ASK_MODE_", absl::AsciiStrToUpper(mode)),
                         &ask_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown mode '", mode, "'"));
    }
    PipelineBenchRow row;
    row.doc_tokens = length;
    row.mode = mode;
    row.cache = cold ? "cold" : "cached";
    row.questions = options_.questions;
    std::vector<double> ttft, total;
    double prefilled = 0, reused = 0;
    for (int q = 0; q < options_.questions; ++q) {
      std::string id = cached_id;
      int64_t ingest_computed = 0, ingest_reused = 0;
      std::vector<int32_t> fresh;
      if (cold || baseline) fresh = RandomDocument(length);
      const Clock::time_point start = Clock::now();
      if (cold || baseline) {
        absl::StatusOr<Ingested> ingested =
            Ingest(fresh, baseline ? length : options_.segment_tokens);
        if (!ingested.ok()) return ingested.status();
        id = ingested->id;
        ingest_computed = ingested->tokens_computed;
        ingest_reused = ingested->tokens_reused;
      }
      absl::StatusOr<Asked> asked = Ask(id, q, ask_mode, start);
      if (!asked.ok()) return asked.status();
      ttft.push_back(asked->ttft_ms);
      total.push_back(asked->total_ms);
      prefilled += static_cast<double>(ingest_computed +
                                       asked->usage.tokens_prefilled());
      // Cold: what existed before the question (the ask itself resumes
      // from the state its ingest just stored).
      reused += static_cast<double>(
          cold || baseline ? ingest_reused : asked->usage.tokens_reused());
      if (cold || baseline) Delete(id);
    }
    row.ttft_ms_p50 = Percentile(ttft, 0.5);
    row.ttft_ms_p90 = Percentile(ttft, 0.9);
    row.total_ms_p50 = Percentile(total, 0.5);
    row.tokens_prefilled_per_question = prefilled / options_.questions;
    row.tokens_reused_per_question = reused / options_.questions;
    return row;
  }

 private:
  const CliContext& cli_;
  const PipelineBenchOptions& options_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
  std::mt19937_64 rng_;
  v1::ModelInfo model_;
};

}  // namespace

absl::StatusOr<std::vector<PipelineBenchRow>> RunPipelineBench(
    const CliContext& cli, const PipelineBenchOptions& options,
    const std::function<void(const PipelineBenchRow&)>& on_row) {
  if (options.questions < 1 || options.answer_tokens < 1 ||
      options.doc_tokens.empty() || options.modes.empty()) {
    return absl::InvalidArgumentError(
        "bench pipeline needs >= 1 question, answer token, length and mode");
  }
  Bench bench(cli, options);
  if (absl::Status described = bench.Describe(); !described.ok()) {
    return described;
  }
  std::vector<PipelineBenchRow> rows;
  for (int64_t length : options.doc_tokens) {
    // The cached document: ingested once, not timed.
    const std::vector<int32_t> document = bench.RandomDocument(length);
    absl::StatusOr<Bench::Ingested> cached =
        bench.Ingest(document, options.segment_tokens);
    if (!cached.ok()) return cached.status();
    for (const std::string& mode : options.modes) {
      for (bool cold : {true, false}) {
        absl::StatusOr<PipelineBenchRow> row =
            mode == "baseline" && !cold
                ? absl::StatusOr<PipelineBenchRow>(rows.back())
                : bench.Row(length, mode, cold, cached->id);
        if (!row.ok()) {
          bench.Delete(cached->id);
          return row.status();
        }
        // A baseline keeps no state: its cached row is the cold measurement.
        row->cache = cold ? "cold" : "cached";
        rows.push_back(*row);
        if (on_row) on_row(rows.back());
      }
    }
    bench.Delete(cached->id);
  }
  return rows;
}

}  // namespace twice::bench
