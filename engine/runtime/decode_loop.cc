#include "engine/runtime/decode_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/sampling.h"

namespace twice::engine {

bool DecodeStream::Next(DecodeEvent* event) {
  std::unique_lock<std::mutex> lock(mu_);
  if (done_) return false;
  ready_.wait(lock, [&] { return !events_.empty(); });
  *event = std::move(events_.front());
  events_.pop_front();
  if (event->finished) done_ = true;
  return true;
}

void DecodeStream::Push(DecodeEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

DecodeLoop::DecodeLoop(const Model& model, DecodeLoopOptions options)
    : model_(model), options_(options) {
  thread_ = std::thread([this] { Run(); });
}

DecodeLoop::~DecodeLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

absl::StatusOr<std::shared_ptr<DecodeStream>> DecodeLoop::Submit(
    std::unique_ptr<SequenceState> state, std::vector<float> logits,
    const GenerateOptions& options, std::function<bool()> cancelled) {
  absl::StatusOr<std::unique_ptr<SequenceDecoder>> decoder =
      SequenceDecoder::Create(model_, options);
  if (!decoder.ok()) return decoder.status();
  if (state == nullptr) {
    return absl::InvalidArgumentError("DecodeLoop::Submit: no state");
  }
  auto sequence = std::make_unique<Sequence>();
  sequence->stream = std::make_shared<DecodeStream>();
  sequence->state = std::move(state);
  sequence->decoder = *std::move(decoder);
  sequence->cancelled = std::move(cancelled);
  sequence->prompt_logits = std::move(logits);
  std::shared_ptr<DecodeStream> stream = sequence->stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      return absl::UnavailableError("the decode loop is shutting down");
    }
    pending_.push_back(std::move(sequence));
    ++stats_.sequences_started;
    ++stats_.active;
  }
  wake_.notify_one();
  return stream;
}

DecodeLoopStats DecodeLoop::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void DecodeLoop::Finish(Sequence& sequence, absl::Status status) {
  DecodeEvent event;
  event.finished = true;
  event.status = std::move(status);
  event.result = sequence.decoder->result();
  {
    std::lock_guard<std::mutex> lock(mu_);
    --stats_.active;
    if (event.result.finish_reason == "cancelled") ++stats_.sequences_cancelled;
  }
  sequence.stream->Push(std::move(event));
}

void DecodeLoop::Run() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        return stopping_ || !pending_.empty() || !active_.empty();
      });
      for (std::unique_ptr<Sequence>& sequence : pending_) {
        active_.push_back(std::move(sequence));
      }
      pending_.clear();
      if (stopping_) break;
    }
    SampleRound();
    StepRound();
  }
  for (std::unique_ptr<Sequence>& sequence : active_) {
    sequence->decoder->Cancel();
    Finish(*sequence, absl::CancelledError("the decode loop is shutting down"));
  }
  active_.clear();
}

void DecodeLoop::SampleRound() {
  for (std::unique_ptr<Sequence>& sequence : active_) {
    Sequence& seq = *sequence;
    // Checked before every token: a cancelled sequence is never stepped
    // again.
    if (seq.stream->cancel_.load(std::memory_order_relaxed) ||
        (seq.cancelled && seq.cancelled())) {
      seq.decoder->Cancel();
      Finish(seq, absl::OkStatus());
      sequence.reset();
      continue;
    }
    absl::StatusOr<DecodeAdvance> advance =
        seq.prompt_logits.empty() ? seq.decoder->Accept(seq.sampled)
                                  : seq.decoder->Advance(seq.prompt_logits);
    seq.prompt_logits = std::vector<float>();
    if (!advance.ok()) {
      Finish(seq, advance.status());
      sequence.reset();
      continue;
    }
    if (!advance->piece.tokens.empty()) {
      // Counted before the event is pushed, so a consumer that has seen
      // the token also sees it counted.
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.tokens_decoded;
    }
    if (!advance->piece.tokens.empty() || !advance->piece.text.empty()) {
      DecodeEvent event;
      event.piece = std::move(advance->piece);
      seq.stream->Push(std::move(event));
    }
    if (advance->finished) {
      Finish(seq, absl::OkStatus());
      sequence.reset();
      continue;
    }
    seq.next_token = advance->next_token;
  }
  std::erase(active_, nullptr);
}

void DecodeLoop::StepRound() {
  const size_t batch = static_cast<size_t>(std::max(options_.max_batch, 1));
  for (size_t begin = 0; begin < active_.size(); begin += batch) {
    const size_t end = std::min(active_.size(), begin + batch);
    std::vector<kernels::SamplingRule> rules;
    for (size_t i = begin; i < end; ++i) {
      rules.push_back(active_[i]->decoder->NextRule());
    }
    std::vector<absl::StatusOr<int32_t>> sampled(end - begin);
    StepSequences(begin, end, rules, absl::MakeSpan(sampled));
    for (size_t i = begin; i < end; ++i) {
      Sequence& seq = *active_[i];
      if (!sampled[i - begin].ok()) {
        // A failed step fails its sequences, not the loop.
        Finish(seq, sampled[i - begin].status());
        active_[i].reset();
        continue;
      }
      seq.sampled = *sampled[i - begin];
    }
  }
  std::erase(active_, nullptr);
}

void DecodeLoop::StepSequences(size_t begin, size_t end,
                               absl::Span<const kernels::SamplingRule> rules,
                               absl::Span<absl::StatusOr<int32_t>> sampled) {
  std::vector<int32_t> tokens;
  std::vector<SequenceState*> states;
  // What each state was before the step: a refused batch is retried in
  // parts only if the call changed none of them.
  std::vector<std::pair<int64_t, bool>> before;
  for (size_t i = begin; i < end; ++i) {
    tokens.push_back(active_[i]->next_token);
    states.push_back(active_[i]->state.get());
    before.emplace_back(states.back()->token_count(), states.back()->damaged());
  }
  absl::StatusOr<std::vector<int32_t>> ids =
      model_.StepBatchSampled(tokens, states, rules);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.steps;
    stats_.max_batch =
        std::max(stats_.max_batch, static_cast<int64_t>(tokens.size()));
  }
  bool unchanged = true;
  for (size_t i = 0; i < states.size(); ++i) {
    unchanged =
        unchanged && before[i] == std::make_pair(states[i]->token_count(),
                                                 states[i]->damaged());
  }
  const size_t n = end - begin;
  if (!ids.ok() && n > 1 && unchanged) {
    // Refused as a whole before anything ran: two halves, down to single
    // sequences. A resident model with fewer free slots than the batch
    // (RESOURCE_EXHAUSTED) then steps every sequence, a little later; a
    // refusal one sequence causes (its state does not fit the model) ends
    // that sequence alone.
    const size_t half = n / 2;
    StepSequences(begin, begin + half, rules.subspan(0, half),
                  sampled.subspan(0, half));
    StepSequences(begin + half, end, rules.subspan(half),
                  sampled.subspan(half));
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    if (ids.ok()) {
      sampled[i] = (*ids)[i];
    } else {
      sampled[i] = ids.status();
    }
  }
}

}  // namespace twice::engine
