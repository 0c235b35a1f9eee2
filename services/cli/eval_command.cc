// twice eval SET.jsonl: answer accuracy of served models through the public
// API, by model x ask mode x facts per document x document length.
//
// The eval set is a JSON-lines file (tools/train/make_eval_set.py writes
// them), one document per line:
//
//   {"doc_id": "...", "text": "...", "facts": 16, "doc_tokens": 512,
//    "length_multiple": 2, "seed": 11,
//    "questions": [{"question": "what is bakon ?", "answer": "tirex"}, ...]}
//
// For every selected model each document is ingested (text, under the id
// "eval-<model>-<doc_id>", with the prefix encoding prepared when the prefix
// mode is asked), every question is asked in every selected mode the model
// supports (greedy, --max-tokens tokens, default 2), and the documents are
// deleted again unless --keep-docs. An answer is correct when the first
// whitespace-separated word of the generated text equals the expected answer
// exactly (case-sensitive).
//
// Output: a table, or with --json one JSON object per line per cell:
// model, mode, facts, length_multiple, doc_tokens (mean tokens per document
// as the server tokenized it), questions, correct, accuracy and
// tokens_prefilled_per_question (the Ask usage's tokens_prefilled: work done
// for the question itself; the once-per-document ingest is not counted).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/cli/commands.h"
#include "services/common/grpc_status.h"
#include "twice/v1/orchestrator.grpc.pb.h"

ABSL_FLAG(std::vector<std::string>, models, {},
          "eval: models to evaluate (empty = every served model)");
ABSL_FLAG(std::vector<std::string>, modes,
          std::vector<std::string>({"default", "read_twice", "read_twice_full",
                                    "prefix", "prefix_with_question"}),
          "eval: ask modes, by their common.proto AskMode names in lower "
          "case (a mode a model does not support is skipped)");
ABSL_FLAG(int32_t, max_docs, 0,
          "eval: use only the first N documents (0 = all)");
ABSL_FLAG(bool, keep_docs, false, "eval: keep the ingested documents");
ABSL_FLAG(std::string, eval_answers, "",
          "eval: also write every answer as one JSON line (model, mode, "
          "document, question, answer, expected) to this file, to compare "
          "two servers' answers");

namespace twice::cli {
namespace {

// Text per ingest message: 1 MiB, well under the message limit.
constexpr size_t kTextPerMessage = 1 << 20;

struct EvalQuestion {
  std::string question;
  std::string answer;
};

struct EvalDocument {
  std::string id;
  std::string text;
  int64_t facts = 0;
  int64_t length_multiple = 0;
  std::vector<EvalQuestion> questions;
};

struct Cell {
  int64_t questions = 0;
  int64_t correct = 0;
  int64_t doc_tokens = 0;  // summed over the cell's questions
  int64_t tokens_prefilled = 0;
};

// model, mode, facts, length multiple.
using CellKey = std::tuple<std::string, std::string, int64_t, int64_t>;

absl::Status Named(const std::string& step, const grpc::Status& status) {
  absl::Status s = services::FromGrpcStatus(status);
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(step, ": ", s.message()));
}

absl::StatusOr<std::vector<EvalDocument>> ReadSet(const std::string& path,
                                                  int max_docs) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<EvalDocument> docs;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const nlohmann::json j =
        nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": ", why));
    };
    if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
    EvalDocument doc;
    if (!j.contains("doc_id") || !j["doc_id"].is_string() ||
        !j.contains("text") || !j["text"].is_string() ||
        !j.contains("questions") || !j["questions"].is_array()) {
      return bad("needs string doc_id, string text and array questions");
    }
    doc.id = j["doc_id"].get<std::string>();
    doc.text = j["text"].get<std::string>();
    if (j.contains("facts") && j["facts"].is_number_integer()) {
      doc.facts = j["facts"].get<int64_t>();
    }
    if (j.contains("length_multiple") &&
        j["length_multiple"].is_number_integer()) {
      doc.length_multiple = j["length_multiple"].get<int64_t>();
    }
    for (const nlohmann::json& q : j["questions"]) {
      if (!q.is_object() || !q.contains("question") ||
          !q["question"].is_string() || !q.contains("answer") ||
          !q["answer"].is_string()) {
        return bad("each question needs string question and answer");
      }
      doc.questions.push_back(
          {q["question"].get<std::string>(), q["answer"].get<std::string>()});
    }
    docs.push_back(std::move(doc));
    if (max_docs > 0 && static_cast<int>(docs.size()) >= max_docs) break;
  }
  if (docs.empty()) return absl::InvalidArgumentError(path + ": no documents");
  return docs;
}

std::string FirstWord(const std::string& text) {
  std::vector<std::string> words =
      absl::StrSplit(text, absl::ByAnyChar(" \t\n\r"), absl::SkipEmpty());
  return words.empty() ? std::string() : words[0];
}

class Evaluator {
 public:
  explicit Evaluator(const CliContext& cli)
      : cli_(cli), stub_(v1::Orchestrator::NewStub(cli.Connect())) {}

  absl::StatusOr<v1::ListModelsResponse> Models() {
    std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
    v1::ListModelsResponse models;
    absl::Status s =
        Named("ListModels", stub_->ListModels(call.get(), {}, &models));
    if (!s.ok()) return s;
    return models;
  }

  // Ingests `text`; returns the document's token count.
  absl::StatusOr<int64_t> Ingest(const std::string& model,
                                 const std::string& id, const std::string& text,
                                 bool prepare_prefix) {
    std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
    auto stream = stub_->Ingest(call.get());
    for (size_t offset = 0; offset == 0 || offset < text.size();
         offset += kTextPerMessage) {
      v1::IngestRequest request;
      if (offset == 0) {
        request.mutable_header()->set_model(model);
        request.mutable_header()->set_document_id(id);
        request.mutable_header()->set_prepare_prefix(prepare_prefix);
      }
      request.set_text(text.substr(offset, kTextPerMessage));
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
    v1::IngestResponse response, done;
    while (stream->Read(&response)) {
      if (response.has_done()) done = response;
    }
    absl::Status s = Named("Ingest", stream->Finish());
    if (!s.ok()) return s;
    return done.tokens_total();
  }

  struct Answer {
    std::string text;
    int64_t tokens_prefilled = 0;
  };
  absl::StatusOr<Answer> Ask(const std::string& id, const std::string& question,
                             v1::AskMode mode, int32_t answer_tokens) {
    v1::AskRequest request;
    request.set_document_id(id);
    request.set_question(question);
    request.set_mode(mode);
    request.mutable_sampling()->set_max_tokens(answer_tokens);
    std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
    auto reader = stub_->Ask(call.get(), request);
    Answer answer;
    v1::AskResponse response;
    while (reader->Read(&response)) {
      answer.text += response.text();
      if (response.finished()) {
        answer.tokens_prefilled = response.usage().tokens_prefilled();
      }
    }
    absl::Status s = Named("Ask", reader->Finish());
    if (!s.ok()) return s;
    return answer;
  }

  absl::Status Delete(const std::string& id) {
    std::unique_ptr<grpc::ClientContext> call = cli_.NewCall();
    v1::DeleteDocumentRequest request;
    request.set_document_id(id);
    v1::DeleteDocumentResponse response;
    return Named("DeleteDocument",
                 stub_->DeleteDocument(call.get(), request, &response));
  }

 private:
  const CliContext& cli_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

void PrintTable(const std::string& set, const std::map<CellKey, Cell>& cells) {
  std::printf("eval set %s\n", set.c_str());
  std::printf("%-16s %-16s %6s %8s %10s %10s %9s %18s\n", "model", "mode",
              "facts", "length", "doc_tokens", "questions", "accuracy",
              "prefilled/question");
  for (const auto& [key, cell] : cells) {
    const auto& [model, mode, facts, multiple] = key;
    const double n = static_cast<double>(std::max<int64_t>(1, cell.questions));
    std::printf("%-16s %-16s %6lld %7lldx %10.0f %10lld %8.1f%% %18.1f\n",
                model.c_str(), mode.c_str(), static_cast<long long>(facts),
                static_cast<long long>(multiple),
                static_cast<double>(cell.doc_tokens) / n,
                static_cast<long long>(cell.questions),
                100.0 * static_cast<double>(cell.correct) / n,
                static_cast<double>(cell.tokens_prefilled) / n);
  }
  std::fflush(stdout);
}

}  // namespace

int RunEval(const CliContext& cli) {
  if (cli.args.size() != 1) {
    return ReportError(cli, absl::InvalidArgumentError(
                                "usage: twice eval SET.jsonl [--models=a,b] "
                                "[--modes=default,read_twice,...] [--json]"));
  }
  const std::string set_path = cli.args[0];
  absl::StatusOr<std::vector<EvalDocument>> docs =
      ReadSet(set_path, absl::GetFlag(FLAGS_max_docs));
  if (!docs.ok()) return ReportError(cli, docs.status());
  // --max-tokens: tokens generated per answer; 0 = 2 (only the first word
  // is scored).
  const int32_t answer_tokens = cli.max_tokens > 0 ? cli.max_tokens : 2;

  struct ModeChoice {
    std::string name;
    v1::AskMode mode;
  };
  std::vector<ModeChoice> modes;
  for (const std::string& name : absl::GetFlag(FLAGS_modes)) {
    v1::AskMode mode;
    const std::string upper =
        absl::StrCat("ASK_MODE_", absl::AsciiStrToUpper(name));
    if (!v1::AskMode_Parse(upper, &mode) || mode == v1::ASK_MODE_UNSPECIFIED) {
      return ReportError(cli, absl::InvalidArgumentError(
                                  absl::StrCat("unknown mode '", name, "'")));
    }
    modes.push_back({name, mode});
  }

  Evaluator eval(cli);
  absl::StatusOr<v1::ListModelsResponse> served = eval.Models();
  if (!served.ok()) return ReportError(cli, served.status());
  std::map<std::string, v1::ModelInfo> by_name;
  for (const v1::ModelInfo& info : served->models())
    by_name[info.name()] = info;
  std::vector<std::string> models = absl::GetFlag(FLAGS_models);
  if (models.empty()) {
    for (const v1::ModelInfo& info : served->models()) {
      models.push_back(info.name());
    }
  }
  std::ofstream answers_out;
  if (const std::string path = absl::GetFlag(FLAGS_eval_answers);
      !path.empty()) {
    answers_out.open(path, std::ios::trunc);
    if (!answers_out) {
      return ReportError(cli, absl::UnavailableError(
                                  absl::StrCat("eval: cannot write ", path)));
    }
  }
  std::map<CellKey, Cell> cells;
  for (const std::string& model : models) {
    auto info = by_name.find(model);
    if (info == by_name.end()) {
      return ReportError(cli,
                         absl::NotFoundError(absl::StrCat(
                             "the server does not serve model '", model, "'")));
    }
    const std::set<int> supported(info->second.modes().begin(),
                                  info->second.modes().end());
    std::vector<ModeChoice> usable;
    for (const ModeChoice& m : modes) {
      if (supported.count(m.mode) > 0) {
        usable.push_back(m);
      } else {
        std::fprintf(stderr,
                     "eval: model %s does not support mode %s; skipped\n",
                     model.c_str(), m.name.c_str());
      }
    }
    const bool prefix = std::any_of(
        usable.begin(), usable.end(),
        [](const ModeChoice& m) { return m.mode == v1::ASK_MODE_PREFIX; });
    size_t done = 0;
    for (const EvalDocument& doc : *docs) {
      const std::string id = absl::StrCat("eval-", model, "-", doc.id);
      absl::StatusOr<int64_t> tokens = eval.Ingest(model, id, doc.text, prefix);
      if (!tokens.ok()) return ReportError(cli, tokens.status());
      for (const EvalQuestion& q : doc.questions) {
        for (const ModeChoice& m : usable) {
          absl::StatusOr<Evaluator::Answer> answer =
              eval.Ask(id, q.question, m.mode, answer_tokens);
          if (!answer.ok()) return ReportError(cli, answer.status());
          Cell& cell =
              cells[CellKey{model, m.name, doc.facts, doc.length_multiple}];
          ++cell.questions;
          cell.correct += FirstWord(answer->text) == q.answer ? 1 : 0;
          cell.doc_tokens += *tokens;
          cell.tokens_prefilled += answer->tokens_prefilled;
          if (answers_out.is_open()) {
            answers_out << nlohmann::json{{"model", model},
                                          {"mode", m.name},
                                          {"doc", doc.id},
                                          {"question", q.question},
                                          {"answer", answer->text},
                                          {"expected", q.answer}}
                               .dump()
                        << "\n";
          }
        }
      }
      if (!absl::GetFlag(FLAGS_keep_docs)) {
        if (absl::Status s = eval.Delete(id); !s.ok()) {
          return ReportError(cli, s);
        }
      }
      ++done;
      if (!cli.json && done % 10 == 0) {
        std::fprintf(stderr, "eval: %s %zu/%zu documents\n", model.c_str(),
                     done, docs->size());
      }
    }
  }

  if (!cli.json) {
    PrintTable(set_path, cells);
    return 0;
  }
  for (const auto& [key, cell] : cells) {
    const auto& [model, mode, facts, multiple] = key;
    const double n = static_cast<double>(std::max<int64_t>(1, cell.questions));
    PrintJson({{"model", model},
               {"mode", mode},
               {"facts", facts},
               {"length_multiple", multiple},
               {"doc_tokens", static_cast<double>(cell.doc_tokens) / n},
               {"questions", cell.questions},
               {"correct", cell.correct},
               {"accuracy", static_cast<double>(cell.correct) / n},
               {"tokens_prefilled_per_question",
                static_cast<double>(cell.tokens_prefilled) / n}});
  }
  return 0;
}

}  // namespace twice::cli
