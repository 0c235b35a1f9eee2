// The tenant a call acts for. Every state key and document record is scoped
// by tenant. Until token authentication exists (issue 10) every caller is
// the single tenant "default"; this function is the one place that changes.
#ifndef TWICE_SERVICES_COMMON_TENANT_H_
#define TWICE_SERVICES_COMMON_TENANT_H_

#include <grpcpp/server_context.h>

#include <string>

namespace twice::services {

inline constexpr char kDefaultTenant[] = "default";

inline std::string TenantOf(const grpc::ServerContext& /*context*/) {
  return kDefaultTenant;
}

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_TENANT_H_
