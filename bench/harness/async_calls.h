// Self-owning reactors of gRPC's callback API for the streaming call shapes
// of the public API, so a client tool can keep many calls in flight without
// a thread per call. Each reactor owns its context and request, hands every
// response to `on_message` and the final status to `on_done` (both on a
// gRPC thread; neither may block), and deletes itself after `on_done`.
//
//   auto* call = new ServerStreamCall<v1::AskRequest, v1::AskResponse>(
//       cli.NewCall(), request, on_message, on_done);
//   stub->async()->Ask(call->context(), call->request(), call);
//   call->Go();
#ifndef TWICE_BENCH_HARNESS_ASYNC_CALLS_H_
#define TWICE_BENCH_HARNESS_ASYNC_CALLS_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>
#include <grpcpp/support/status.h>

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace twice::bench {

template <class Response>
using MessageFn = std::function<void(const Response&)>;
using DoneFn = std::function<void(const grpc::Status&)>;

// A call with a stream of responses. `Reactor` is the callback API's
// ClientReadReactor (one request: Ask, BatchAsk) or ClientBidiReactor (the
// request written as the only message, then half-close: Ingest and Append
// with the whole input in one message).
template <class Reactor, class Request, class Response>
class StreamCall final : public Reactor {
 public:
  StreamCall(std::unique_ptr<grpc::ClientContext> context, Request request,
             MessageFn<Response> on_message, DoneFn on_done)
      : context_(std::move(context)),
        request_(std::move(request)),
        on_message_(std::move(on_message)),
        on_done_(std::move(on_done)) {}

  grpc::ClientContext* context() { return context_.get(); }
  const Request* request() const { return &request_; }

  // Starts the call; the stub must have bound this reactor.
  void Go() {
    if constexpr (kWritesRequest) {
      this->StartWriteLast(&request_, grpc::WriteOptions());
    }
    this->StartRead(&response_);
    this->StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    on_message_(response_);
    this->StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    on_done_(status);
    delete this;
  }

 private:
  static constexpr bool kWritesRequest =
      std::is_base_of_v<grpc::ClientBidiReactor<Request, Response>, Reactor>;

  std::unique_ptr<grpc::ClientContext> context_;
  Request request_;
  Response response_;
  MessageFn<Response> on_message_;
  DoneFn on_done_;
};

template <class Request, class Response>
using ServerStreamCall =
    StreamCall<grpc::ClientReadReactor<Response>, Request, Response>;
template <class Request, class Response>
using WriteOnceStreamCall =
    StreamCall<grpc::ClientBidiReactor<Request, Response>, Request, Response>;

// A unary call's context, request and response kept alive until its
// callback has run.
template <class Request, class Response>
struct UnaryCall {
  std::unique_ptr<grpc::ClientContext> context;
  Request request;
  Response response;
};

}  // namespace twice::bench

#endif  // TWICE_BENCH_HARNESS_ASYNC_CALLS_H_
