// Sampling, in the order the usual serving stacks apply it:
//   p_i = softmax(l_i / T) over the first vocab_size logits (in double,
//         shifted by the maximum so exp never overflows);
//   top-k keeps the k most likely ids, then renormalizes;
//   top-p keeps the smallest most-likely-first prefix whose mass reaches p;
//   one uniform draw picks among what is left.
// Ties in likelihood go to the lower id everywhere, so temperature 0,
// top_k = 1 and a tiny top_p all pick the same token.
#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace twice::engine {
namespace {

// NaN never wins and is never sampled.
float Sanitize(float logit) {
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
}

// Lowest id among the largest logits.
int32_t Argmax(absl::Span<const float> logits) {
  int32_t best = 0;
  float best_logit = Sanitize(logits[0]);
  for (size_t i = 1; i < logits.size(); ++i) {
    const float logit = Sanitize(logits[i]);
    if (logit > best_logit) {
      best = static_cast<int32_t>(i);
      best_logit = logit;
    }
  }
  return best;
}

// A uniform double in [0, 1) from the top 53 bits: the same on every
// standard library, unlike std::uniform_real_distribution.
double UniformUnit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

absl::Status SamplingParams::Validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be finite and >= 0, got ", temperature));
  }
  if (top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k must be >= 0, got ", top_k));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_p must be in (0, 1], got ", top_p));
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), rng_(params.seed) {}

int32_t Sampler::Sample(absl::Span<const float> logits, int32_t vocab_size) {
  // A caller's bad vocab_size must not read past the logits; an empty row
  // leaves nothing to pick but id 0.
  const size_t n =
      std::min(logits.size(), static_cast<size_t>(std::max(vocab_size, 0)));
  if (n == 0) return 0;
  logits = absl::MakeConstSpan(logits.data(), n);

  const int32_t argmax = Argmax(logits);
  const double max_logit = Sanitize(logits[argmax]);
  if (params_.temperature == 0.0f || !std::isfinite(max_logit)) {
    // Greedy; also when every logit is -inf (nothing to weigh) or one is
    // +inf (it takes all the mass).
    return argmax;
  }

  // Unnormalized probabilities of the candidates, most likely first.
  struct Candidate {
    int32_t id;
    double weight;
  };
  std::vector<Candidate> candidates;
  candidates.reserve(n);
  const double inv_t = 1.0 / static_cast<double>(params_.temperature);
  for (size_t i = 0; i < n; ++i) {
    const double w = std::exp(
        (static_cast<double>(Sanitize(logits[i])) - max_logit) * inv_t);
    if (w > 0.0) candidates.push_back({static_cast<int32_t>(i), w});
  }
  const auto more_likely = [](const Candidate& a, const Candidate& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.id < b.id;
  };

  size_t keep = candidates.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::nth_element(candidates.begin(), candidates.begin() + (keep - 1),
                     candidates.end(), more_likely);
    candidates.resize(keep);
  }
  if (params_.top_p < 1.0f) {
    std::sort(candidates.begin(), candidates.end(), more_likely);
    double total = 0.0;
    for (const Candidate& c : candidates) total += c.weight;
    const double target = static_cast<double>(params_.top_p) * total;
    double mass = 0.0;
    keep = 0;
    while (keep < candidates.size()) {
      mass += candidates[keep++].weight;
      if (mass >= target) break;
    }
    candidates.resize(keep);
  }

  double total = 0.0;
  for (const Candidate& c : candidates) total += c.weight;
  const double u = UniformUnit(rng_) * total;
  double cumulative = 0.0;
  for (const Candidate& c : candidates) {
    cumulative += c.weight;
    if (u < cumulative) return c.id;
  }
  // Rounding can leave u at the very top of the range.
  return candidates.back().id;
}

}  // namespace twice::engine
