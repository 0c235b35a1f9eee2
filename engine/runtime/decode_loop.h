// DecodeLoop: one thread that owns the decode steps of a model and batches
// every active sequence into each step.
//
//   handler threads                      loop thread
//   ---------------                      -----------
//   prefill the prompt (own state)
//   Submit(state, logits) ──queue──▶     repeat while sequences are active:
//   stream->Next() ◀──events──             for each sequence: cancelled? →
//                                            finish; else take its sampled
//                                            token (SequenceDecoder), emit it
//                                          one Model::StepBatchSampled
//                                            over all sequences that
//                                            continue: one step and one
//                                            sampling call for the batch
//
// So B concurrent sequences cost one pass over the weights per token instead
// of B, and only B token ids leave the sampling call (a device-resident
// model keeps the logits on the device). Prompts are prefilled by the caller
// before Submit (a long prompt would otherwise stall every other sequence's
// next token). A batch the model refuses as a whole without changing any
// of its states (token counts and damage as before) is stepped as halves,
// down to single sequences: a busy device (RESOURCE_EXHAUSTED: a resident
// model whose slots running reads hold) delays the batch's tokens instead
// of failing its sequences, and a sequence the model refuses on its own (a
// damaged state, one of another model) fails alone. A step that failed
// after it changed a state fails the sequences it held: stepping them
// again would read their token twice.
//
// Cancellation: a sequence's `cancelled` predicate (and DecodeStream::
// Cancel) is checked before each of its tokens, so a cancelled sequence is
// stepped at most once more after the cancel becomes visible — never more
// than one step.
//
// Thread safety: Submit, stats and every DecodeStream method may be called
// from any thread. The model must outlive the loop.
#ifndef TWICE_ENGINE_RUNTIME_DECODE_LOOP_H_
#define TWICE_ENGINE_RUNTIME_DECODE_LOOP_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/models/model.h"
#include "engine/runtime/sequence_decoder.h"
#include "engine/state/sequence_state.h"
#include "kernels/sampling.h"

namespace twice::engine {

struct DecodeLoopOptions {
  // Most sequences read in one step; more active sequences are stepped
  // in several batches per round. Default: 64. Must be >= 1.
  int max_batch = 64;
};

// Counters since the loop started.
struct DecodeLoopStats {
  int64_t steps = 0;           // batched steps (StepBatchSampled calls)
  int64_t tokens_decoded = 0;  // tokens sampled and streamed
  int64_t sequences_started = 0;
  int64_t sequences_cancelled = 0;
  int64_t active = 0;     // sequences submitted and not finished
  int64_t max_batch = 0;  // largest batch stepped so far
};

// One event of a sequence's stream.
struct DecodeEvent {
  GeneratedPiece piece;  // may be empty on the finished event
  bool finished = false;
  // On the finished event: OK, or why decoding failed.
  absl::Status status;
  // On the finished event: tokens_decoded and finish_reason.
  GenerateResult result;
};

class DecodeLoop;

// The consumer's handle on one submitted sequence.
class DecodeStream {
 public:
  // Blocks for the next event. Returns false once the finished event has
  // been returned (the stream is then exhausted).
  bool Next(DecodeEvent* event);
  // Asks the loop to stop this sequence before its next token; the stream
  // then ends with finish reason "cancelled".
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }

 private:
  friend class DecodeLoop;
  void Push(DecodeEvent event);

  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<DecodeEvent> events_;
  bool done_ = false;  // the finished event was returned by Next
  std::atomic<bool> cancel_{false};
};

class DecodeLoop {
 public:
  DecodeLoop(const Model& model, DecodeLoopOptions options);
  // Ends every active sequence (status CANCELLED) and joins the thread.
  ~DecodeLoop();
  DecodeLoop(const DecodeLoop&) = delete;
  DecodeLoop& operator=(const DecodeLoop&) = delete;

  // Adds a sequence whose `state` has read its prompt; `logits` are the
  // logits of the prompt's last position. `cancelled` (may be empty) is
  // polled on the loop thread before each token, so it must be cheap and
  // thread-safe (grpc::ServerContext::IsCancelled is). INVALID_ARGUMENT for
  // bad options.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<DecodeStream>> Submit(
      std::unique_ptr<SequenceState> state, std::vector<float> logits,
      const GenerateOptions& options, std::function<bool()> cancelled);

  DecodeLoopStats stats() const;

 private:
  struct Sequence {
    std::shared_ptr<DecodeStream> stream;
    std::unique_ptr<SequenceState> state;
    std::unique_ptr<SequenceDecoder> decoder;
    std::function<bool()> cancelled;
    // The prompt's last logits until its first token is sampled.
    std::vector<float> prompt_logits;
    // Sampled by StepRound from the last step's logits.
    int32_t sampled = -1;
    int32_t next_token = -1;
  };

  void Run();
  // Takes one token for every active sequence; drops finished ones.
  void SampleRound();
  // Reads every remaining sequence's next token, in batches, and samples
  // the token after it from each batch's logits.
  void StepRound();
  // Steps active_[begin, end) by `rules` (one each) into `sampled` (one
  // each: the id sampled after the step, or the sequence's error).
  void StepSequences(size_t begin, size_t end,
                     absl::Span<const kernels::SamplingRule> rules,
                     absl::Span<absl::StatusOr<int32_t>> sampled);
  void Finish(Sequence& sequence, absl::Status status);

  const Model& model_;
  const DecodeLoopOptions options_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Sequence>> pending_;  // guarded by mu_
  bool stopping_ = false;                           // guarded by mu_
  DecodeLoopStats stats_;                           // guarded by mu_

  // Owned by the loop thread.
  std::vector<std::unique_ptr<Sequence>> active_;
  std::thread thread_;
};

}  // namespace twice::engine

#endif  // TWICE_ENGINE_RUNTIME_DECODE_LOOP_H_
