#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "services/cli/commands.h"
#include "services/cli/utf8_text.h"
#include "services/common/grpc_status.h"
#include "twice/v1/orchestrator.grpc.pb.h"

namespace twice::cli {
namespace {

absl::Status ReadAll(const std::string& path, std::string* out) {
  if (path == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    *out = buffer.str();
    return absl::OkStatus();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open " + path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return absl::OkStatus();
}

}  // namespace

int RunIngest(const CliContext& cli) {
  if (cli.args.size() != 1) {
    return ReportError(cli, absl::InvalidArgumentError(
                                "usage: twice ingest FILE (or - for stdin)"));
  }
  std::string text;
  if (absl::Status read = ReadAll(cli.args[0], &text); !read.ok()) {
    return ReportError(cli, read);
  }
  if (absl::Status utf8 = CheckUtf8File(cli.args[0], text); !utf8.ok()) {
    return ReportError(cli, utf8);
  }
  auto stub = v1::Orchestrator::NewStub(cli.Connect());
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  auto stream = stub->Ingest(call.get());

  std::thread writer([&] {
    v1::IngestRequest request;
    v1::IngestHeader* header = request.mutable_header();
    header->set_model(cli.model);
    header->set_document_id(cli.document_id);
    header->set_segment_tokens(cli.segment_tokens);
    header->set_pin(cli.pin);
    header->set_total_size(static_cast<int64_t>(text.size()));
    size_t offset = 0;
    do {
      const size_t end = Utf8PieceEnd(text, offset, kTextChunkBytes);
      request.set_text(text.substr(offset, end - offset));
      if (!stream->Write(request)) break;
      request.Clear();
      offset = end;
    } while (offset < text.size());
    stream->WritesDone();
  });

  v1::IngestResponse response;
  v1::IngestResponse last;
  bool progress_shown = false;
  const bool tty = isatty(STDERR_FILENO) != 0;
  while (stream->Read(&response)) {
    if (response.has_done()) {
      last = response;
      continue;
    }
    // On a terminal the progress line rewrites itself; in a log it is one
    // line per update.
    std::fprintf(
        stderr,
        "%singest %s: segments %lld/%lld, tokens %lld/%lld, %.0f tok/s%s",
        tty ? "\r" : "", response.document_id().c_str(),
        static_cast<long long>(response.segments_done()),
        static_cast<long long>(response.segments_total()),
        static_cast<long long>(response.tokens_done()),
        static_cast<long long>(response.tokens_total()),
        response.tokens_per_second(), tty ? "" : "\n");
    std::fflush(stderr);
    progress_shown = true;
  }
  writer.join();
  if (progress_shown && tty) std::fprintf(stderr, "\n");
  grpc::Status status = stream->Finish();
  if (!status.ok()) return ReportError(cli, services::FromGrpcStatus(status));

  const v1::DocumentInfo& doc = last.done();
  if (cli.json) {
    PrintJson({{"doc_id", doc.document_id()},
               {"tokens", doc.tokens()},
               {"segments", doc.segments_size()},
               {"segments_reused", last.segments_reused()},
               {"tokens_per_second", last.tokens_per_second()},
               {"model", doc.model()}});
  } else {
    std::printf("%s\ttokens=%lld segments=%d reused=%lld\n",
                doc.document_id().c_str(), static_cast<long long>(doc.tokens()),
                doc.segments_size(),
                static_cast<long long>(last.segments_reused()));
  }
  return 0;
}

}  // namespace twice::cli
