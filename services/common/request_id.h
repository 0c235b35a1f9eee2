// Request ids: one id per public call, carried to every internal call it
// makes (prefill, decode, store) as "x-request-id" gRPC metadata and written
// into every log line (services/common/log.h) of the handler that serves it,
// so one question can be followed across roles.
//
// A server takes the id from the incoming call's metadata or, when the
// caller sent none, makes a new one; the id is held for the call's handler
// thread (the synchronous gRPC API runs a handler on one thread). Work that
// a handler hands to another thread carries the id only where it passes it
// explicitly (AttachRequestId with the parent ServerContext).
#ifndef TWICE_SERVICES_COMMON_REQUEST_ID_H_
#define TWICE_SERVICES_COMMON_REQUEST_ID_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>
#include <vector>

namespace twice::services {

inline constexpr char kRequestIdMetadata[] = "x-request-id";

// The id of the call this thread serves; empty outside a call.
const std::string& CurrentRequestId();
// Sets (empty: clears) this thread's request id.
void SetCurrentRequestId(std::string id);
// A new random id: 16 lowercase hex digits.
std::string NewRequestId();

// The id a handler should propagate: the parent call's x-request-id
// metadata when `parent` carries one, else this thread's id.
std::string RequestIdOf(const grpc::ServerContext* parent);
// Adds x-request-id (RequestIdOf(parent)) to an outgoing call, when known.
void AttachRequestId(grpc::ClientContext& context,
                     const grpc::ServerContext* parent = nullptr);

// Server interceptor factory that sets the thread's request id for every
// incoming call (from metadata, or a new one) and clears it at the end.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
NewRequestIdInterceptorFactory();

}  // namespace twice::services

#endif  // TWICE_SERVICES_COMMON_REQUEST_ID_H_
