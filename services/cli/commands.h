// The `twice` subcommands. Each returns the process exit code.
#ifndef TWICE_SERVICES_CLI_COMMANDS_H_
#define TWICE_SERVICES_CLI_COMMANDS_H_

#include "services/cli/cli_context.h"

namespace twice::cli {

int RunIngest(const CliContext& cli);     // ingest FILE
int RunAsk(const CliContext& cli);        // ask DOC "question"
int RunAppend(const CliContext& cli);     // append DOC FILE
int RunDocs(const CliContext& cli);       // docs
int RunRemove(const CliContext& cli);     // rm DOC
int RunModels(const CliContext& cli);     // models
int RunHealth(const CliContext& cli);     // health
int RunInitModel(const CliContext& cli);  // init-model (no server)
int RunStore(const CliContext& cli);      // store stats|verify|compact|gc
int RunEval(const CliContext& cli);       // eval SET.jsonl (a server)

}  // namespace twice::cli

#endif  // TWICE_SERVICES_CLI_COMMANDS_H_
