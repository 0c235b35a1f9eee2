// UsageTally: what one public call has cost so far, added up by the
// orchestrator's workflows and turned into the wire's v1::Usage once, when
// the call answers.
#ifndef TWICE_SERVICES_ORCHESTRATOR_USAGE_TALLY_H_
#define TWICE_SERVICES_ORCHESTRATOR_USAGE_TALLY_H_

#include <cstdint>

#include "twice/v1/common.pb.h"

namespace twice::services {

struct UsageTally {
  int64_t tokens_prefilled = 0;
  int64_t tokens_reused = 0;
  int64_t states_reused = 0;
  int64_t states_recomputed = 0;

  // A stored state of `tokens` document tokens served instead of a read.
  void Reused(int64_t tokens) {
    states_reused += 1;
    tokens_reused += tokens;
  }
  // Forgets the reuse counted so far (the state turned out to be lost).
  void ForgetReuse() {
    states_reused = 0;
    tokens_reused = 0;
  }
  UsageTally& operator+=(const UsageTally& more) {
    tokens_prefilled += more.tokens_prefilled;
    tokens_reused += more.tokens_reused;
    states_reused += more.states_reused;
    states_recomputed += more.states_recomputed;
    return *this;
  }

  // The wire form, with what only the answer knows.
  v1::Usage ToProto(int64_t tokens_decoded, double ttft_ms,
                    double total_ms) const {
    v1::Usage usage;
    usage.set_tokens_prefilled(tokens_prefilled);
    usage.set_tokens_reused(tokens_reused);
    usage.set_states_reused(states_reused);
    usage.set_states_recomputed(states_recomputed);
    usage.set_tokens_decoded(tokens_decoded);
    usage.set_ttft_ms(ttft_ms);
    usage.set_total_ms(total_ms);
    return usage;
  }
};

}  // namespace twice::services

#endif  // TWICE_SERVICES_ORCHESTRATOR_USAGE_TALLY_H_
