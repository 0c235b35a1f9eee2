#include "bench/harness/load_bench.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/harness/async_calls.h"
#include "bench/harness/bench_common.h"
#include "bench/harness/delay_scheduler.h"
#include "bench/harness/load_ledger.h"
#include "bench/harness/memory_watch.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice::bench {
namespace {

using Clock = std::chrono::steady_clock;

class LoadRun {
 public:
  LoadRun(const CliContext& cli, const LoadBenchOptions& options)
      : cli_(cli),
        options_(options),
        channel_(cli.Connect()),
        stub_(v1::Orchestrator::NewStub(channel_)) {}

  absl::Status Describe() {
    absl::StatusOr<v1::ModelInfo> model =
        FindServedModel(cli_, *stub_, options_.model);
    if (!model.ok()) return model.status();
    model_ = *std::move(model);
    shape_ = options_.shape;
    shape_.vocab_size = model_.vocab_size();
    for (int m : model_.modes()) modes_.push_back(static_cast<v1::AskMode>(m));
    if (modes_.empty()) modes_.push_back(v1::ASK_MODE_DEFAULT);
    auto book = std::make_unique<AnswerBook>(absl::StrCat(
        "model=", model_.fingerprint(), " doc=", shape_.doc_tokens,
        " append=", shape_.append_tokens, " max_appends=", shape_.max_appends,
        " questions=", shape_.questions_per_doc, "x", shape_.question_tokens,
        " answer=", options_.answer_tokens,
        " segment=", options_.segment_tokens));
    if (!options_.answers_in.empty()) {
      if (absl::Status s = book->LoadBaseline(options_.answers_in); !s.ok()) {
        return s;
      }
    }
    ledger_ = std::make_unique<LoadLedger>(shape_, std::move(book));
    for (auto& [op, weight] : options_.mix) {
      if (weight < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("load mix: weight of ", op, " is negative"));
      }
      mix_total_ += weight;
    }
    if (mix_total_ <= 0) {
      return absl::InvalidArgumentError("load mix: no operation has weight");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<LoadBenchResult> Run() {
    MemoryWatch memory(options_.metrics);
    const int slots = options_.clients * options_.docs_per_client;
    for (int s = 0; s < slots; ++s) {
      auto slot = std::make_unique<LoadSlot>();
      slot->slot = s;
      slot->id = absl::StrCat(options_.id_prefix, "-s", s);
      slots_.push_back(std::move(slot));
    }
    clients_.resize(static_cast<size_t>(options_.clients));
    for (int c = 0; c < options_.clients; ++c) {
      clients_[c].index = c;
      clients_[c].rng.seed(static_cast<uint64_t>(c) * 7919 + 17);
    }
    const Clock::time_point start = Clock::now();
    end_ = start + std::chrono::milliseconds(
                       static_cast<int64_t>(options_.seconds * 1000));
    running_ = options_.clients;
    memory.StartSampling();
    for (Client& c : clients_) Next(&c);
    {
      std::unique_lock<std::mutex> lock(done_mu_);
      done_cv_.wait(lock, [this] { return running_ == 0; });
    }
    const double seconds = MillisSince(start) / 1000.0;
    memory.StopSampling();

    FinalCheck();
    std::this_thread::sleep_for(std::chrono::milliseconds(
        static_cast<int64_t>(options_.settle_seconds * 1000)));
    memory.ReadEnd();
    if (!options_.keep_docs) DeleteAll();
    if (!options_.answers_out.empty()) {
      if (absl::Status s = ledger_->SaveAnswers(options_.answers_out);
          !s.ok()) {
        return s;
      }
    }
    LoadBenchResult result = ledger_->Result();
    result.model = model_.name();
    result.seconds = seconds;
    result.memory = memory.readings();
    return result;
  }

 private:
  struct Client {
    int index = 0;
    std::mt19937_64 rng;
    size_t next_mode = 0;  // PickMode's rotation, from the client's index
  };

  LoadSlot& SlotOf(Client* c, int k) {
    return *slots_[static_cast<size_t>(c->index * options_.docs_per_client +
                                       k)];
  }

  // ---------------------------------------------------------- the loop

  void Next(Client* c) {
    if (Clock::now() >= end_) {
      std::lock_guard<std::mutex> lock(done_mu_);
      if (--running_ == 0) done_cv_.notify_all();
      return;
    }
    std::uniform_int_distribution<int> pick_slot(0,
                                                 options_.docs_per_client - 1);
    LoadSlot& slot = SlotOf(c, pick_slot(c->rng));
    if (slot.in_doubt) return Resolve(c, slot);
    std::uniform_real_distribution<double> u(0, mix_total_);
    double x = u(c->rng);
    std::string op = options_.mix.rbegin()->first;
    for (const auto& [name, weight] : options_.mix) {
      if (x < weight) {
        op = name;
        break;
      }
      x -= weight;
    }
    if (!slot.exists) return Ingest(c, slot);
    if (op == "ingest") return Delete(c, slot, /*then_ingest=*/true);
    if (op == "append" && slot.appends < shape_.max_appends) {
      return Append(c, slot);
    }
    if (op == "batch_ask") return BatchAsk(c, slot);
    return Ask(c, slot);
  }

  // After a failed call: back off a little, so an outage is not a spin.
  void Continue(Client* c, const grpc::Status& status) {
    if (status.ok()) return Next(c);
    scheduler_.After(std::chrono::milliseconds(200), [this, c] { Next(c); });
  }

  void Resolve(Client* c, LoadSlot& slot) {
    auto call =
        std::make_shared<UnaryCall<v1::GetDocumentRequest, v1::DocumentInfo>>();
    call->context = cli_.NewCall();
    call->request.set_document_id(slot.id);
    const Clock::time_point start = Clock::now();
    stub_->async()->GetDocument(
        call->context.get(), &call->request, &call->response,
        [this, c, &slot, call, start](grpc::Status status) {
          ledger_->Finish("get", start, status);
          if (status.ok()) {
            ledger_->Reconcile(slot, true, call->response.tokens());
          } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
            ledger_->Reconcile(slot, false, 0);
          }
          if (slot.in_doubt && slot.exists) {
            // A length this workload cannot produce: start the slot over.
            slot.in_doubt = false;
            return Delete(c, slot, /*then_ingest=*/true);
          }
          Continue(c, status.error_code() == grpc::StatusCode::NOT_FOUND
                          ? grpc::Status::OK
                          : status);
        });
  }

  void Ingest(Client* c, LoadSlot& slot) {
    v1::IngestRequest request;
    request.mutable_header()->set_model(model_.name());
    request.mutable_header()->set_document_id(slot.id);
    request.mutable_header()->set_segment_tokens(options_.segment_tokens);
    const std::vector<int32_t> tokens = LoadDocumentTokens(shape_, slot.slot);
    request.mutable_tokens()->Add(tokens.begin(), tokens.end());
    auto done = std::make_shared<v1::DocumentInfo>();
    const Clock::time_point start = Clock::now();
    auto* call = new WriteOnceStreamCall<v1::IngestRequest, v1::IngestResponse>(
        cli_.NewCall(), std::move(request),
        [done](const v1::IngestResponse& r) {
          if (r.has_done()) *done = r.done();
        },
        [this, c, &slot, done, start](const grpc::Status& status) {
          ledger_->Finish("ingest", start, status);
          if (status.ok() && done->tokens() == shape_.doc_tokens) {
            slot.exists = true;
            slot.appends = 0;
            slot.acknowledged = slot.ever_acknowledged = true;
            slot.acknowledged_appends = 0;
          } else {
            slot.in_doubt = true;
          }
          Continue(c, status);
        });
    stub_->async()->Ingest(call->context(), call);
    call->Go();
  }

  void Append(Client* c, LoadSlot& slot) {
    v1::AppendRequest request;
    request.set_document_id(slot.id);
    const std::vector<int32_t> tokens =
        LoadAppendTokens(shape_, slot.slot, slot.appends + 1);
    request.mutable_tokens()->Add(tokens.begin(), tokens.end());
    auto done = std::make_shared<v1::DocumentInfo>();
    const Clock::time_point start = Clock::now();
    auto* call = new WriteOnceStreamCall<v1::AppendRequest, v1::IngestResponse>(
        cli_.NewCall(), std::move(request),
        [done](const v1::IngestResponse& r) {
          if (r.has_done()) *done = r.done();
        },
        [this, c, &slot, done, start](const grpc::Status& status) {
          ledger_->Finish("append", start, status);
          const int64_t want =
              shape_.doc_tokens + shape_.append_tokens * (slot.appends + 1);
          if (status.ok() && done->tokens() == want) {
            slot.appends += 1;
            slot.acknowledged_appends = slot.appends;
          } else {
            ledger_->CheckNotFound(slot, status);
            slot.in_doubt = true;
            slot.maybe_appended = true;
          }
          Continue(c, status);
        });
    stub_->async()->Append(call->context(), call);
    call->Go();
  }

  void Delete(Client* c, LoadSlot& slot, bool then_ingest) {
    auto call = std::make_shared<
        UnaryCall<v1::DeleteDocumentRequest, v1::DeleteDocumentResponse>>();
    call->context = cli_.NewCall();
    call->request.set_document_id(slot.id);
    const Clock::time_point start = Clock::now();
    const bool was_acknowledged = slot.acknowledged && !slot.maybe_deleted;
    // Sent: from now on the document may be gone, whatever the reply.
    slot.maybe_deleted = true;
    stub_->async()->DeleteDocument(
        call->context.get(), &call->request, &call->response,
        [this, c, &slot, call, start, then_ingest,
         was_acknowledged](grpc::Status status) {
          ledger_->Finish("delete", start, status);
          if (status.error_code() == grpc::StatusCode::NOT_FOUND &&
              was_acknowledged) {
            ledger_->Lost(slot, absl::StrCat("NOT_FOUND on delete: ",
                                             status.error_message()));
          }
          if (status.ok() ||
              status.error_code() == grpc::StatusCode::NOT_FOUND) {
            slot.exists = false;
            slot.acknowledged = false;
            slot.maybe_deleted = false;
            if (then_ingest && Clock::now() < end_) return Ingest(c, slot);
            return Continue(c, grpc::Status::OK);
          }
          slot.in_doubt = true;
          Continue(c, status);
        });
  }

  // The model's modes in turn (each client starting at its own), so that
  // even a short run asks in every mode.
  v1::AskMode PickMode(Client* c) {
    return modes_[(c->next_mode++ + static_cast<size_t>(c->index)) %
                  modes_.size()];
  }

  void Ask(Client* c, LoadSlot& slot) {
    std::uniform_int_distribution<int> pick_q(0, shape_.questions_per_doc - 1);
    const int question = pick_q(c->rng);
    const v1::AskMode mode = PickMode(c);
    v1::AskRequest request;
    request.set_document_id(slot.id);
    const std::vector<int32_t> q =
        LoadQuestionTokens(shape_, slot.slot, question);
    request.mutable_question_tokens()->Add(q.begin(), q.end());
    request.set_mode(mode);
    request.mutable_sampling()->set_max_tokens(options_.answer_tokens);
    request.mutable_sampling()->set_ignore_eos(true);
    struct Answer {
      std::vector<int32_t> tokens;
      double ttft_ms = -1;
      int64_t recomputed = 0;
    };
    auto answer = std::make_shared<Answer>();
    const Clock::time_point start = Clock::now();
    auto* call = new ServerStreamCall<v1::AskRequest, v1::AskResponse>(
        cli_.NewCall(), std::move(request),
        [answer, start](const v1::AskResponse& r) {
          if (answer->ttft_ms < 0 && r.tokens_size() > 0) {
            answer->ttft_ms = MillisSince(start);
          }
          answer->tokens.insert(answer->tokens.end(), r.tokens().begin(),
                                r.tokens().end());
          if (r.finished()) answer->recomputed = r.usage().states_recomputed();
        },
        [this, c, &slot, answer, start, question,
         mode](const grpc::Status& status) {
          ledger_->Finish(absl::StrCat("ask:", LoadModeName(mode)), start,
                          status, answer->ttft_ms);
          if (status.ok()) {
            ledger_->RecordAnswer(slot, question, mode, answer->tokens);
            ledger_->CountRecomputed(answer->recomputed);
          } else {
            ledger_->CheckNotFound(slot, status);
          }
          Continue(c, status);
        });
    stub_->async()->Ask(call->context(), call->request(), call);
    call->Go();
  }

  void BatchAsk(Client* c, LoadSlot& slot) {
    v1::BatchAskRequest request;
    request.set_document_id(slot.id);
    struct Asked {
      int question;
      v1::AskMode mode;
    };
    auto asked = std::make_shared<std::vector<Asked>>();
    for (int q = 0; q < shape_.questions_per_doc; ++q) {
      const v1::AskMode mode = PickMode(c);
      v1::BatchQuestion* bq = request.add_questions();
      const std::vector<int32_t> tokens =
          LoadQuestionTokens(shape_, slot.slot, q);
      bq->mutable_question_tokens()->Add(tokens.begin(), tokens.end());
      bq->set_mode(mode);
      bq->mutable_sampling()->set_max_tokens(options_.answer_tokens);
      bq->mutable_sampling()->set_ignore_eos(true);
      asked->push_back({q, mode});
    }
    auto answers =
        std::make_shared<std::vector<std::vector<int32_t>>>(asked->size());
    auto ttft = std::make_shared<double>(-1);
    auto recomputed = std::make_shared<int64_t>(0);
    const Clock::time_point start = Clock::now();
    auto* call =
        new ServerStreamCall<v1::BatchAskRequest, v1::BatchAskResponse>(
            cli_.NewCall(), std::move(request),
            [answers, ttft, recomputed, start](const v1::BatchAskResponse& r) {
              if (r.index() < 0 ||
                  static_cast<size_t>(r.index()) >= answers->size()) {
                return;
              }
              if (*ttft < 0 && r.response().tokens_size() > 0) {
                *ttft = MillisSince(start);
              }
              auto& tokens = (*answers)[static_cast<size_t>(r.index())];
              tokens.insert(tokens.end(), r.response().tokens().begin(),
                            r.response().tokens().end());
              if (r.response().finished()) {
                *recomputed += r.response().usage().states_recomputed();
              }
            },
            [this, c, &slot, asked, answers, ttft, recomputed,
             start](const grpc::Status& status) {
              ledger_->Finish("batch_ask", start, status, *ttft);
              if (status.ok()) {
                ledger_->CountRecomputed(*recomputed);
                for (size_t i = 0; i < asked->size(); ++i) {
                  ledger_->RecordAnswer(slot, (*asked)[i].question,
                                        (*asked)[i].mode, (*answers)[i]);
                }
              } else {
                ledger_->CheckNotFound(slot, status);
              }
              Continue(c, status);
            });
    stub_->async()->BatchAsk(call->context(), call->request(), call);
    call->Go();
  }

  // ---------------------------------------------------------- after load

  // Every document once more, with retries while the deployment recovers:
  // its length against what was acknowledged, and one greedy answer.
  void FinalCheck() {
    const Clock::time_point deadline =
        Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                           options_.verify_seconds * 1000));
    for (auto& owned : slots_) {
      LoadSlot& slot = *owned;
      if (!slot.ever_acknowledged && !slot.in_doubt) continue;
      bool checked = false;
      while (!checked) {
        std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
        v1::GetDocumentRequest request;
        request.set_document_id(slot.id);
        v1::DocumentInfo info;
        const grpc::Status status =
            stub_->GetDocument(call.get(), request, &info);
        if (status.ok() || status.error_code() == grpc::StatusCode::NOT_FOUND) {
          ledger_->Reconcile(slot, status.ok(), info.tokens());
          checked = true;
        } else if (Clock::now() > deadline) {
          ledger_->Lost(slot, absl::StrCat("unreadable at the end: ",
                                           status.error_message()));
          break;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
      }
      if (!checked) continue;
      ledger_->Verified(slot);
      if (!slot.exists || slot.in_doubt) continue;
      // One greedy answer per document after the load (and any fault).
      while (true) {
        v1::AskRequest ask;
        ask.set_document_id(slot.id);
        const std::vector<int32_t> q = LoadQuestionTokens(shape_, slot.slot, 0);
        ask.mutable_question_tokens()->Add(q.begin(), q.end());
        ask.set_mode(v1::ASK_MODE_DEFAULT);
        ask.mutable_sampling()->set_max_tokens(options_.answer_tokens);
        ask.mutable_sampling()->set_ignore_eos(true);
        std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
        auto reader = stub_->Ask(call.get(), ask);
        std::vector<int32_t> answer;
        v1::AskResponse response;
        while (reader->Read(&response)) {
          answer.insert(answer.end(), response.tokens().begin(),
                        response.tokens().end());
        }
        const grpc::Status status = reader->Finish();
        if (status.ok()) {
          ledger_->RecordAnswer(slot, 0, v1::ASK_MODE_DEFAULT, answer);
          break;
        }
        if (Clock::now() > deadline) {
          ledger_->Lost(slot, absl::StrCat("unanswerable at the end: ",
                                           status.error_message()));
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    }
  }

  void DeleteAll() {
    for (auto& slot : slots_) {
      std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
      v1::DeleteDocumentRequest request;
      request.set_document_id(slot->id);
      v1::DeleteDocumentResponse response;
      stub_->DeleteDocument(call.get(), request, &response).ok();
    }
  }

  const CliContext& cli_;
  const LoadBenchOptions& options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
  v1::ModelInfo model_;
  LoadWorkloadShape shape_;
  std::vector<v1::AskMode> modes_;
  double mix_total_ = 0;
  std::unique_ptr<LoadLedger> ledger_;
  std::vector<std::unique_ptr<LoadSlot>> slots_;
  std::vector<Client> clients_;
  Clock::time_point end_;
  DelayScheduler scheduler_;

  std::mutex done_mu_;
  std::condition_variable done_cv_;
  int running_ = 0;
};

}  // namespace

absl::StatusOr<LoadBenchResult> RunLoadBench(const CliContext& cli,
                                             const LoadBenchOptions& options) {
  if (options.clients < 1 || options.docs_per_client < 1 ||
      options.seconds <= 0 || options.answer_tokens < 1 ||
      options.shape.doc_tokens < 1 || options.shape.append_tokens < 1 ||
      options.shape.max_appends < 0 || options.shape.questions_per_doc < 1 ||
      options.shape.question_tokens < 1) {
    return absl::InvalidArgumentError(
        "bench load needs >= 1 client, document per client, second, answer "
        "token, document/append/question token and question");
  }
  LoadRun run(cli, options);
  if (absl::Status s = run.Describe(); !s.ok()) return s;
  return run.Run();
}

}  // namespace twice::bench
