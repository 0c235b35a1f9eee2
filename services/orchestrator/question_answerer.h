// QuestionAnswerer: what Ask and BatchAsk share. Parses a question against
// the document and its model, resolves once what a call's questions share
// (the document's tokens, its stored states, one decode endpoint), and
// answers one question by its mode's recipe (common.proto AskMode):
//
//   mode                   start                      fed (read on decode)
//   default                document state             -
//   read_twice             document state             preamble, document
//   read_twice_full        empty                      preamble, doc, sep, doc
//   prefix                 prefix-encoded doc state   -
//   prefix_with_question   empty (prefix read)        preamble, document
//
// then the decode service reads the question prompt and generates. With
// as_of_tokens the "document" is its first N tokens: the start is the
// nearest stored boundary at or before N and the tokens between it and N
// are fed first.
#ifndef TWICE_SERVICES_ORCHESTRATOR_QUESTION_ANSWERER_H_
#define TWICE_SERVICES_ORCHESTRATOR_QUESTION_ANSWERER_H_

#include <grpcpp/server_context.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/orchestrator/usage_tally.h"
#include "services/orchestrator/workflow_context.h"
#include "storage/document_catalog.h"
#include "storage/document_record.h"
#include "storage/state_key.h"
#include "twice/v1/orchestrator.pb.h"

namespace twice::services {

struct Question {
  std::vector<int32_t> tokens;
  std::string text;  // decoded text of the question tokens
  v1::AskMode mode = v1::ASK_MODE_DEFAULT;
  v1::SamplingOptions sampling;
  // Document tokens the answer reads: the whole document or as_of_tokens.
  int64_t document_tokens = 0;
};

// What the questions of one call share, resolved once before they run.
// Read-only while questions run concurrently. A cost (a recompute) is
// reported in the usage of the first question that needs the resolved
// value.
struct SharedInputs {
  std::shared_ptr<const std::vector<int32_t>> tokens;
  std::optional<storage::StateKey> document_state;
  UsageTally document_state_usage;
  size_t document_state_owner = 0;
  std::optional<storage::StateKey> prefix_state;
  UsageTally prefix_state_usage;
  size_t prefix_state_owner = 0;
  // Decode endpoint all questions go to, where they share one state load
  // and batched decode steps.
  std::optional<size_t> decode_endpoint;
};

// The document a call asks about, with the card of the model it is read by.
struct AskedDocument {
  storage::DocumentRecord record;
  const ModelCard* model = nullptr;
};

// Receives an answer's pieces; false when the caller is gone.
using AskSink = std::function<bool(const v1::AskResponse&)>;

class QuestionAnswerer {
 public:
  // `context` (and everything it points at) must outlive this object.
  explicit QuestionAnswerer(const WorkflowContext& context)
      : context_(context) {}

  // The caller's `document` and its model; a document read by another
  // version of the model is read into the served one first
  // (DocumentStates::ModelOfDocument).
  absl::StatusOr<AskedDocument> Open(grpc::ServerContext& server,
                                     const storage::DocumentRef& document);
  // As Open, with the document's record already read.
  absl::StatusOr<AskedDocument> OpenRecord(grpc::ServerContext& server,
                                           storage::DocumentRecord record);
  // The question as text (tokenized) or ids (checked against the
  // vocabulary, decoded for the prompt), within max_question_tokens, in a
  // mode the model supports, as of a position inside the document.
  absl::StatusOr<Question> Parse(
      const ModelCard& model, const storage::DocumentRecord& record,
      const std::string& text, absl::Span<const int32_t> ids, v1::AskMode mode,
      const v1::SamplingOptions& sampling, int64_t as_of_tokens);
  // Resolves in `shared` what `questions` need: tokens, document state,
  // prefix state, and a decode endpoint when there are several.
  absl::Status Prepare(grpc::ServerContext& server,
                       const storage::DocumentRecord& record,
                       const std::vector<Question>& questions,
                       SharedInputs& shared);
  // Answers `question` (number `index` of the call) over `record`,
  // streaming through `sink`.
  absl::Status Answer(grpc::ServerContext& server,
                      const storage::DocumentRecord& record,
                      const ModelCard& model, const Question& question,
                      size_t index, const SharedInputs& shared,
                      const AskSink& sink);

 private:
  const WorkflowContext& context_;
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_QUESTION_ANSWERER_H_
