// twice append DOC FILE: appends text to a stored document; only the new
// tokens are prefilled, from the document's last state. The text is
// tokenized on its own (see AppendRequest in orchestrator.proto).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/status/statusor.h"
#include "services/cli/commands.h"
#include "services/cli/utf8_text.h"
#include "services/common/grpc_status.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice::cli {
namespace {

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ostringstream buffer;
  if (path == "-") {
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open " + path);
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

int RunAppend(const CliContext& cli) {
  if (cli.args.size() != 2) {
    return ReportError(cli,
                       absl::InvalidArgumentError(
                           "usage: twice append DOC FILE (or - for stdin)"));
  }
  absl::StatusOr<std::string> text = ReadText(cli.args[1]);
  if (!text.ok()) return ReportError(cli, text.status());
  if (absl::Status utf8 = CheckUtf8File(cli.args[1], *text); !utf8.ok()) {
    return ReportError(cli, utf8);
  }
  auto stub = v1::Orchestrator::NewStub(cli.Connect());
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  auto stream = stub->Append(call.get());
  size_t offset = 0;
  do {
    v1::AppendRequest request;
    if (offset == 0) {
      request.set_document_id(cli.args[0]);
      request.set_segment_tokens(cli.segment_tokens);
      request.set_total_size(static_cast<int64_t>(text->size()));
    }
    const size_t end = Utf8PieceEnd(*text, offset, kTextChunkBytes);
    request.set_text(text->substr(offset, end - offset));
    if (!stream->Write(request)) break;
    offset = end;
  } while (offset < text->size());
  stream->WritesDone();

  v1::IngestResponse response, last;
  while (stream->Read(&response)) {
    if (response.has_done()) {
      last = response;
    } else if (!cli.json) {
      std::fprintf(stderr, "append %s: tokens %lld/%lld, %.0f tok/s\n",
                   response.document_id().c_str(),
                   static_cast<long long>(response.tokens_done()),
                   static_cast<long long>(response.tokens_total()),
                   response.tokens_per_second());
    }
  }
  grpc::Status status = stream->Finish();
  if (!status.ok()) return ReportError(cli, services::FromGrpcStatus(status));
  const v1::DocumentInfo& doc = last.done();
  if (cli.json) {
    PrintJson({{"doc_id", doc.document_id()},
               {"tokens", doc.tokens()},
               {"segments", doc.segments_size()},
               {"tokens_per_second", last.tokens_per_second()}});
  } else {
    std::printf("%s\ttokens=%lld segments=%d\n", doc.document_id().c_str(),
                static_cast<long long>(doc.tokens()), doc.segments_size());
  }
  return 0;
}

}  // namespace twice::cli
