// Lets every Twice binary accept flags spelled with dashes (`--data-dir`)
// as well as underscores (`--data_dir`, the spelling absl flags define).
#ifndef TWICE_SERVICES_COMMON_FLAG_NAMES_H_
#define TWICE_SERVICES_COMMON_FLAG_NAMES_H_

#include <string>
#include <vector>

namespace twice::services {

// Rewrites the name part of every `--flag[=value]` argument, dashes to
// underscores, stopping at a bare `--`. The returned strings back the argv.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv);

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_FLAG_NAMES_H_
