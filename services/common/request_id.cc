#include "services/common/request_id.h"

#include <cstdio>
#include <random>

namespace twice::services {
namespace {

thread_local std::string t_request_id;

bool Valid(std::string_view id) {
  // Ids come from clients: bound them and keep them printable, so a log
  // line cannot be forged through one.
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (c <= ' ' || c > '~' || c == '"' || c == '\\' || c == '=') return false;
  }
  return true;
}

class RequestIdInterceptor : public grpc::experimental::Interceptor {
 public:
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      std::string id;
      const auto* metadata = methods->GetRecvInitialMetadata();
      if (metadata != nullptr) {
        auto it = metadata->find(kRequestIdMetadata);
        if (it != metadata->end())
          id.assign(it->second.data(), it->second.size());
      }
      if (!Valid(id)) id = NewRequestId();
      SetCurrentRequestId(std::move(id));
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      SetCurrentRequestId("");
    }
    methods->Proceed();
  }
};

class RequestIdInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* /*info*/) override {
    return new RequestIdInterceptor();
  }
};

}  // namespace

const std::string& CurrentRequestId() { return t_request_id; }

void SetCurrentRequestId(std::string id) { t_request_id = std::move(id); }

std::string NewRequestId() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(engine()));
  return text;
}

std::string RequestIdOf(const grpc::ServerContext* parent) {
  if (parent != nullptr) {
    const auto& metadata = parent->client_metadata();
    auto it = metadata.find(kRequestIdMetadata);
    if (it != metadata.end()) {
      std::string id(it->second.data(), it->second.size());
      if (Valid(id)) return id;
    }
  }
  return CurrentRequestId();
}

void AttachRequestId(grpc::ClientContext& context,
                     const grpc::ServerContext* parent) {
  const std::string id = RequestIdOf(parent);
  if (!id.empty()) context.AddMetadata(kRequestIdMetadata, id);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewRequestIdInterceptorFactory() {
  return std::make_unique<RequestIdInterceptorFactory>();
}

}  // namespace twice::services
