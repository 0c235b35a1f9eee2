// The tenant a call acts for. Every state key and document record is scoped
// by tenant. Public calls get theirs from their bearer token
// (services/common/auth.h); without a token file every caller is the single
// tenant "default".
#ifndef TWICE_SERVICES_COMMON_TENANT_H_
#define TWICE_SERVICES_COMMON_TENANT_H_

namespace twice::services {

inline constexpr char kDefaultTenant[] = "default";

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_TENANT_H_
