// Fuzzes what the orchestrator does with request bytes before it touches a
// model or the store: parsing the public request protos (Ingest, Append,
// Ask, BatchAsk, document calls) and the checks that need no server (the
// document id, the ask mode, sampling options, validated and then used to
// sample one token, page sizes), and the store's record and state key
// conversions from their protos (FromProto, ValidateDocumentRecord).
// Input: one byte picking the message, then its serialized bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/sequence_decoder.h"
#include "engine/sampling/sampler.h"
#include "services/common/proto_convert.h"
#include "services/orchestrator/document_ids.h"
#include "storage/record_validation.h"
#include "tests/fuzz/fuzz_util.h"
#include "twice/v1/orchestrator.pb.h"
#include "twice/v1/store.pb.h"

namespace {

namespace v1 = twice::v1;

void CheckId(const std::string& id) {
  (void)twice::services::ValidateDocumentId(id);
  (void)twice::storage::ValidateDocumentId(id);
}

void CheckMode(v1::AskMode mode) { (void)v1::AskMode_IsValid(mode); }

// The decode service's mapping of SamplingOptions (services/decode); options
// that validate must sample a token of the vocabulary.
void CheckSampling(const v1::SamplingOptions& sampling) {
  twice::engine::GenerateOptions options;
  options.sampling.temperature = sampling.temperature();
  options.sampling.top_k = sampling.top_k();
  options.sampling.top_p = sampling.top_p() == 0.0f ? 1.0f : sampling.top_p();
  options.sampling.seed = sampling.seed();
  if (sampling.max_tokens() < 0 || sampling.max_tokens() > 4096) return;
  options.max_tokens = sampling.max_tokens() == 0 ? 64 : sampling.max_tokens();
  options.stop_at_eos = !sampling.ignore_eos();
  options.stop.assign(sampling.stop().begin(), sampling.stop().end());
  if (!twice::engine::ValidateGenerateOptions(options).ok()) return;
  twice::engine::Sampler sampler(options.sampling);
  const std::vector<float> logits = {0.5f, -1.0f, 3.0f, 3.0f, -20.0f, 1e-3f,
                                     2.0f, 0.0f,  0.0f, 7.0f, 99.0f};
  const int32_t id = sampler.Sample(logits, 10);
  if (id < 0 || id >= 10) {
    twice::fuzz::Die("sampled id " + std::to_string(id) + " of 10");
  }
}

void Seed(const char* name, uint8_t control,
          const google::protobuf::Message& message) {
  twice::fuzz::MaybeWriteSeed(name, std::string(1, static_cast<char>(control)) +
                                        message.SerializeAsString());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  v1::IngestRequest ingest;
  ingest.mutable_header()->set_model("tiny");
  ingest.mutable_header()->set_document_id("doc-1");
  ingest.mutable_header()->set_segment_tokens(128);
  ingest.mutable_header()->set_pin(true);
  ingest.set_text("The quick brown fox.");
  Seed("ingest", 0, ingest);
  v1::AppendRequest append;
  append.set_document_id("doc-1");
  append.add_tokens(5);
  append.add_tokens(6);
  Seed("append", 1, append);
  v1::AskRequest ask;
  ask.set_document_id("doc-1");
  ask.set_question("What jumps?");
  ask.set_mode(v1::ASK_MODE_READ_TWICE);
  ask.set_as_of_tokens(3);
  ask.mutable_sampling()->set_max_tokens(8);
  Seed("ask", 2, ask);
  v1::BatchAskRequest batch;
  batch.set_document_id("doc-1");
  batch.add_questions()->set_question("Who?");
  batch.add_questions()->add_question_tokens(7);
  Seed("batch_ask", 3, batch);
  v1::ListDocumentsRequest list;
  list.set_page_size(10);
  list.set_page_token("doc-0");
  Seed("list", 6, list);
  v1::DocumentRecord record;
  record.set_tenant("default");
  record.set_segment_tokens(128);
  record.set_model_fingerprint(std::string(64, 'a'));
  Seed("record", 7, record);
  return 0;
}

namespace {}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 9) {
    case 0: {
      v1::IngestRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      if (r.has_header() && !r.header().document_id().empty()) {
        CheckId(r.header().document_id());
      }
      break;
    }
    case 1: {
      v1::AppendRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      CheckId(r.document_id());
      break;
    }
    case 2: {
      v1::AskRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      CheckId(r.document_id());
      CheckMode(r.mode());
      CheckSampling(r.sampling());
      break;
    }
    case 3: {
      v1::BatchAskRequest r;
      if (!r.ParseFromString(bytes)) return 0;
      CheckId(r.document_id());
      for (const v1::BatchQuestion& q : r.questions()) {
        CheckMode(q.mode());
        CheckSampling(q.sampling());
      }
      break;
    }
    case 4: {
      v1::GetDocumentRequest r;
      if (r.ParseFromString(bytes)) CheckId(r.document_id());
      break;
    }
    case 5: {
      v1::DeleteDocumentRequest r;
      if (r.ParseFromString(bytes)) CheckId(r.document_id());
      break;
    }
    case 6: {
      v1::ListDocumentsRequest r;
      if (r.ParseFromString(bytes)) {
        (void)(r.page_size() < 0 || r.page_size() > 1000);
        (void)twice::storage::ValidateTenant(r.page_token());
      }
      break;
    }
    case 7: {
      v1::DocumentRecord r;
      if (!r.ParseFromString(bytes)) return 0;
      auto record = twice::services::FromProto(r);
      if (record.ok()) {
        (void)twice::storage::ValidateDocumentRecord(*record);
        (void)twice::services::ToProto(*record);
      }
      break;
    }
    case 8: {
      v1::StateKey r;
      if (!r.ParseFromString(bytes)) return 0;
      auto key = twice::services::FromProto(r);
      if (key.ok()) (void)twice::services::ToProto(*key);
      break;
    }
  }
  return 0;
}
