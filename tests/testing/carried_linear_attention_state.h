// A linear-attention state as a kernel test's starting point: [H, hd, D]
// and its key sum [H, D] (D = TaylorFeatureDim(f)) as after reading
// `prior` random tokens on the CPU. Random S and z would not do: phi_q . z
// of a Taylor feature map is positive only when z is a sum of phi(k), so a
// random z can put a denominator near zero and fail a test by chance.
#ifndef TWICE_TESTS_TESTING_CARRIED_LINEAR_ATTENTION_STATE_H_
#define TWICE_TESTS_TESTING_CARRIED_LINEAR_ATTENTION_STATE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kernels/linear_attention.h"
#include "kernels/taylor_feature_map.h"
#include "tests/testing/kernel_comparison.h"

namespace twice::testing {

// Call it with no kernel backend installed (the CPU kernels compute it).
inline void CarriedLinearAttentionState(uint32_t seed, int64_t heads,
                                        int64_t head_dim, int64_t f,
                                        int64_t prior, uint32_t salt,
                                        std::vector<float>& kv_state,
                                        std::vector<float>& k_state) {
  const int64_t d = kernels::TaylorFeatureDim(f);
  auto features = [&](uint32_t s) {
    const std::vector<float> raw = SeededUniform(seed, prior * heads * f, s);
    std::vector<float> out(prior * heads * d);
    EXPECT_TRUE(
        kernels::TaylorFeatureMap(raw, prior * heads, f, absl::MakeSpan(out))
            .ok());
    return out;
  };
  const std::vector<float> phi_q = features(salt), phi_k = features(salt + 1);
  const std::vector<float> v =
      SeededUniform(seed, prior * heads * head_dim, salt + 2);
  kv_state.assign(heads * head_dim * d, 0.0f);
  k_state.assign(heads * d, 0.0f);
  std::vector<float> y(prior * heads * head_dim);
  EXPECT_TRUE(kernels::LinearAttentionPrefill(
                  phi_q, phi_k, v, prior, {heads, head_dim, d}, 1e-6f,
                  absl::MakeSpan(kv_state), absl::MakeSpan(k_state),
                  absl::MakeSpan(y))
                  .ok());
}

}  // namespace twice::testing

#endif  // TWICE_TESTS_TESTING_CARRIED_LINEAR_ATTENTION_STATE_H_
