#include "bench/synthetic_state.h"

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/layers/full_kv_state.h"
#include "engine/layers/rat_chunk_kv_state.h"
#include "engine/layers/window_kv_state.h"
#include "kernels/status_macros.h"

namespace twice::bench {

void GrowLayerStateTo(engine::LayerState& layer, int64_t position,
                      std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k, v;
  auto fill = [&](int64_t n) {
    k.resize(n);
    v.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      k[i] = normal(rng);
      v[i] = normal(rng);
    }
  };
  if (auto* kv = dynamic_cast<engine::FullKvState*>(&layer)) {
    const int64_t rows = position - kv->count();
    // In slices, so the scratch stays small next to the cache itself.
    for (int64_t done = 0; done < rows;) {
      const int64_t n = std::min<int64_t>(rows - done, 1024);
      fill(n * kv->row());
      kv->Append(k.data(), v.data(), n, kv->row());
      done += n;
    }
  } else if (auto* rat = dynamic_cast<engine::RatChunkKvState*>(&layer)) {
    fill(rat->dim());
    while (rat->closed_chunks() < position / rat->chunk_size()) {
      rat->CloseChunk(k.data(), v.data());
    }
    rat->set_count(position);
  } else if (auto* ring = dynamic_cast<engine::WindowKvState*>(&layer)) {
    ring->set_count(position);
  }
}

absl::Status GrowStateTo(engine::SequenceState& state, int64_t position,
                         uint64_t seed) {
  const int64_t from = state.token_count();
  if (position < from) {
    return absl::InvalidArgumentError(
        absl::StrCat("bench: cannot grow a state of ", from,
                     " tokens back to position ", position));
  }
  // A state read by a resident executor: grow its newest copy on the host
  // and drop the device copy, so the next read uploads the grown state
  // (growing the stale host layers would leave the device at `from`).
  if (state.residency() != nullptr) {
    TWICE_RETURN_IF_ERROR(state.SyncToHost());
    state.DetachResidency();
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < state.num_layers(); ++i) {
    GrowLayerStateTo(state.layer(i), position, rng);
  }
  state.set_token_count(position);
  return absl::OkStatus();
}

}  // namespace twice::bench
