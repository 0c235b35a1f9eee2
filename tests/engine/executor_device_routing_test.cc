// A mixture routed per pair on the CPU executor device
// (executor_device.h RouteTopKPairs, RoutedLinear, CombineRoutedPairs),
// in a padded decode step: the rows in pad slots take no expert, their
// products are zeros and their combine adds only the shared base; every
// other row's products equal a float64 product with its routed expert. A
// refused product writes nothing.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "engine/executor/executor_device.h"
#include "gtest/gtest.h"
#include "kernels/status_macros.h"
#include "kernels/tensor.h"
#include "kernels/top_k_routing.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

absl::StatusOr<std::unique_ptr<DeviceArray>> Put(ExecutorDevice& dev,
                                                 const std::vector<float>& v) {
  TWICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceArray> a,
                         dev.Allocate(static_cast<int64_t>(v.size())));
  TWICE_RETURN_IF_ERROR(dev.CopyToDevice(v, a->floats()));
  return a;
}

std::vector<float> Get(ExecutorDevice& dev, const DeviceArray& a) {
  std::vector<float> v(static_cast<size_t>(a.floats().size));
  EXPECT_OK(dev.CopyToHost(a.floats(), absl::MakeSpan(v)));
  return v;
}

TEST(ExecutorDeviceRoutingTest, PaddingRowsOfAStepTakeNoExpert) {
  std::unique_ptr<ExecutorDevice> dev = NewCpuExecutorDevice();
  const int64_t rows = 6, experts = 5, k = 2, n = 7, cols = 9;
  const int64_t pairs = rows * k;
  // Slots 0-3 are the caller's, 4 and up pad the step (rows 2 and 5).
  const int32_t first_pad_slot = 4;
  const std::vector<int32_t> slots = {3, 0, 5, 1, 2, 4};
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceStep> step, dev->NewStep(rows));
  ASSERT_OK(dev->FillStep(*step, std::vector<int32_t>(rows, 0), slots,
                          std::vector<int64_t>(rows, 0),
                          std::vector<kernels::SamplingRule>(rows)));

  std::vector<std::vector<float>> w;
  std::vector<std::unique_ptr<DeviceMatrix>> matrices;
  std::vector<const DeviceMatrix*> table_of;
  for (int64_t e = 0; e < experts; ++e) {
    w.push_back(Random(n * cols, 20 + static_cast<uint32_t>(e)));
    ASSERT_OK_AND_ASSIGN(
        std::unique_ptr<DeviceMatrix> m,
        dev->UploadMatrix(kernels::Tensor::FromVector({n, cols}, w.back())));
    table_of.push_back(m.get());
    matrices.push_back(std::move(m));
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrixTable> table,
                       dev->UploadMatrixTable(table_of));

  const std::vector<float> logits_host = Random(rows * experts, 1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> logits,
                       Put(*dev, logits_host));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> pair_experts,
                       Put(*dev, std::vector<float>(pairs, 9.0f)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> gates,
                       Put(*dev, std::vector<float>(pairs, 9.0f)));
  ASSERT_OK(dev->RouteTopKPairs(logits->floats(), rows, experts, k,
                                StepPadRows{&step->slot_map(), first_pad_slot},
                                pair_experts->floats(), gates->floats()));
  const std::vector<float> chosen = Get(*dev, *pair_experts);
  const std::vector<float> gate = Get(*dev, *gates);

  // Without padding, the same logits route every row.
  std::vector<float> plain(pairs), plain_gates(pairs);
  ASSERT_OK(kernels::RouteTopKPairs(logits_host, rows, experts, k, {},
                                    absl::MakeSpan(plain),
                                    absl::MakeSpan(plain_gates)));

  const std::vector<float> x_host = Random(rows * cols, 2);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> x, Put(*dev, x_host));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> y,
                       Put(*dev, std::vector<float>(pairs * n, NAN)));
  ASSERT_OK(dev->RoutedLinear(x->floats(), k, *table, pair_experts->floats(),
                              pairs, y->floats()));
  const std::vector<float> products = Get(*dev, *y);
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t r = p / k;
    const bool pad = slots[r] >= first_pad_slot;
    EXPECT_EQ(chosen[p], pad ? kernels::kNoExpert : plain[p]) << p;
    EXPECT_EQ(gate[p], pad ? 0.0f : plain_gates[p]) << p;
    for (int64_t i = 0; i < n; ++i) {
      double want = 0.0;
      if (!pad) {
        const std::vector<float>& we = w[static_cast<size_t>(plain[p])];
        for (int64_t j = 0; j < cols; ++j) {
          want += double{we[i * cols + j]} * x_host[r * cols + j];
        }
      }
      EXPECT_NEAR(products[p * n + i], want, 1e-5 * (1.0 + std::abs(want)))
          << "pair " << p << ", output " << i;
    }
  }

  // A refused call writes nothing, its no-expert pairs' rows included.
  std::vector<float> bad_experts = chosen;
  bad_experts[0] = kernels::kNoExpert;
  bad_experts[pairs - 1] = static_cast<float>(experts);  // out of range
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> bad,
                       Put(*dev, bad_experts));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> untouched,
                       Put(*dev, std::vector<float>(pairs * n, 5.0f)));
  EXPECT_EQ(dev->RoutedLinear(x->floats(), k, *table, bad->floats(), pairs,
                              untouched->floats())
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Get(*dev, *untouched), std::vector<float>(pairs * n, 5.0f));

  // The combine: a padding row adds only its base.
  const int64_t dim = n;
  const std::vector<float> base_host = Random(rows * dim, 3);
  const std::vector<float> out_host = Random(rows * dim, 4);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> base, Put(*dev, base_host));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> out, Put(*dev, out_host));
  ASSERT_OK(dev->CombineRoutedPairs(base->floats(), y->floats(), dim, rows, k,
                                    gates->floats(), 0.5f, out->floats()));
  const std::vector<float> combined = Get(*dev, *out);
  for (int64_t r = 0; r < rows; ++r) {
    if (slots[r] < first_pad_slot) continue;
    for (int64_t c = 0; c < dim; ++c) {
      EXPECT_FLOAT_EQ(combined[r * dim + c],
                      out_host[r * dim + c] + 0.5f * base_host[r * dim + c])
          << r << " " << c;
    }
  }
}

}  // namespace
}  // namespace twice::engine
