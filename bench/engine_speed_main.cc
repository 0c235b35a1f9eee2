// engine_speed: `twice bench engine` as a standalone program, for building
// and running the engine benchmark without the services (gRPC) stack.
//
//   build/bench/engine_speed --preset=360m-shape --tokens=512,2048 [--json]
//                            [--arch=based|jrt] [--threads=N]
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "bench/engine_bench_runner.h"

ABSL_FLAG(std::string, arch, "based", "based | jrt");
ABSL_FLAG(std::string, preset, "tiny", "tiny | 360m-shape");
ABSL_FLAG(std::vector<std::string>, tokens,
          (std::vector<std::string>{"512", "2048", "8192"}),
          "prompt lengths, comma-separated, one row each");
ABSL_FLAG(int32_t, threads, 0,
          "kernel threads (0 = TWICE_CPU_THREADS or all CPUs)");
ABSL_FLAG(int32_t, decode_steps, 8, "decode steps timed per row");
ABSL_FLAG(bool, json, false, "one JSON object per row");
ABSL_FLAG(std::string, tokenizer, TWICE_GPT2_TOKENIZER_JSON,
          "tokenizer.json of the random model");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  twice::bench::EngineBenchOptions options;
  options.arch = absl::GetFlag(FLAGS_arch);
  options.preset = absl::GetFlag(FLAGS_preset);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.decode_steps = absl::GetFlag(FLAGS_decode_steps);
  options.tokenizer_json = absl::GetFlag(FLAGS_tokenizer);
  options.tokens.clear();
  for (const std::string& t : absl::GetFlag(FLAGS_tokens)) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(t, &n)) {
      std::fprintf(stderr, "engine_speed: --tokens: bad length \"%s\"\n",
                   t.c_str());
      return 2;
    }
    options.tokens.push_back(n);
  }
  const absl::Status status =
      twice::bench::PrintEngineBench(options, absl::GetFlag(FLAGS_json));
  if (!status.ok()) {
    std::fprintf(stderr, "engine_speed: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
