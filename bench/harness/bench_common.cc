#include "bench/harness/bench_common.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"

namespace twice::bench {

absl::StatusOr<v1::ModelInfo> FindServedModel(
    const CliContext& cli, v1::Orchestrator::StubInterface& stub,
    const std::string& name) {
  std::unique_ptr<grpc::ClientContext> call = cli.NewCall();
  v1::ListModelsResponse models;
  const absl::Status listed =
      services::FromGrpcStatus(stub.ListModels(call.get(), {}, &models));
  if (!listed.ok()) {
    return absl::Status(listed.code(),
                        absl::StrCat("ListModels: ", listed.message()));
  }
  const std::string wanted = name.empty() ? models.default_model() : name;
  for (const v1::ModelInfo& info : models.models()) {
    if (info.name() == wanted) return info;
  }
  return absl::NotFoundError(
      absl::StrCat("the server does not serve model '", wanted, "'"));
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(
      std::max(0.0, std::ceil(p * static_cast<double>(values.size())) - 1));
  return values[std::min(rank, values.size() - 1)];
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace twice::bench
