// The flags every client binary (twice, twice-bench) takes to reach a
// server: --server, --json, --timeout_seconds, --tls_ca, --tls_cert,
// --tls_key and --token (default $TWICE_TOKEN).
#ifndef TWICE_SERVICES_CLI_CONNECTION_FLAGS_H_
#define TWICE_SERVICES_CLI_CONNECTION_FLAGS_H_

#include <string>
#include <vector>

#include "services/cli/cli_context.h"

namespace twice::cli {

// Parses the command line (flag names with dashes or underscores, as the
// server takes them) and returns the positional arguments, the program's
// name first. Exits with the flag library's message on a bad flag.
std::vector<std::string> ParseClientCommandLine(int argc, char** argv);

// Sets the connection and output fields of `cli` from the parsed flags.
void SetConnectionFromFlags(CliContext& cli);

}  // namespace twice::cli

#endif  // TWICE_SERVICES_CLI_CONNECTION_FLAGS_H_
