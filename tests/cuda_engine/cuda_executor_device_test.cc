// The CUDA executor device's Linear, Linears and Embedding against the CPU
// device on matrices of bf16-exact weights whose row count is no multiple
// of 8 (a GPT-2 vocabulary of 50257 as a tied head): the device pads the
// matrix with zero rows and drops the padded outputs, with a bias,
// accumulation into y and a scale; Linears converts its one input once for
// several products. f32 outputs of bf16 inputs differ only by summation
// order (1e-5 norm-wise). Outputs and biases off cuBLASLt's 16-byte
// alignment match too. A matrix whose columns are no multiple of 8 is
// refused at upload. RmsNormLinears equals RmsNorm then Linears bit for
// bit. A decode step's buffers hold what they were filled with. Copies to the
// host of several arrays in one call read what the queued work wrote. A
// padded step's rows in pad slots route to no expert, as on the CPU. SKIPPED
// without a GPU; the device's name and its uploaded weight and downloaded bytes
// show it ran.
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "engine/executor/executor_device.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_info.h"
#include "kernels/sampling.h"
#include "kernels/tensor.h"
#include "kernels/top_k_routing.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/testing/status_matchers.h"

namespace twice::engine {
namespace {

using kernels::cuda::testing::Random;
using kernels::cuda::testing::RelativeError;
using kernels::cuda::testing::RoundBf16;

constexpr double kLinearTolerance = 1e-5;
// Products of an input the GPU rounds to bf16 (a norm's output) against
// the CPU's f32 input: bf16's 2^-9 relative rounding, summed over k.
constexpr double kBf16InputTolerance = 1e-2;

// `host` on `device` as a fresh array.
std::unique_ptr<DeviceArray> Put(ExecutorDevice& device,
                                 const std::vector<float>& host) {
  absl::StatusOr<std::unique_ptr<DeviceArray>> a =
      device.Allocate(static_cast<int64_t>(host.size()));
  EXPECT_OK(a);
  if (!a.ok()) return nullptr;
  EXPECT_OK(device.CopyToDevice(host, (*a)->floats()));
  return *std::move(a);
}

std::vector<float> Get(ExecutorDevice& device, const DeviceArray& array) {
  std::vector<float> host(static_cast<size_t>(array.floats().size));
  EXPECT_OK(device.CopyToHost(array.floats(), absl::MakeSpan(host)));
  return host;
}

class CudaExecutorDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_OK_AND_ASSIGN(cuda_, NewCudaExecutorDevice(0));
    cpu_ = NewCpuExecutorDevice();
  }

  std::unique_ptr<ExecutorDevice> cuda_;
  std::unique_ptr<ExecutorDevice> cpu_;
};

TEST_F(CudaExecutorDeviceTest, LinearOfARowCountNoGemmTakesMatchesTheCpu) {
  EXPECT_NE(cuda_->name().find("cuda"), std::string::npos) << cuda_->name();
  struct Shape {
    int64_t rows, n, k;
  };
  for (const Shape& c : {Shape{1, 37, 64}, Shape{5, 50257, 64},
                         Shape{33, 1001, 128}, Shape{16, 8, 64}}) {
    SCOPED_TRACE(::testing::Message()
                 << c.rows << " x " << c.n << " x " << c.k);
    const kernels::Tensor w = kernels::Tensor::FromVector(
        {c.n, c.k}, RoundBf16(Random(c.n * c.k, 1, 0.1f)));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> dw,
                         cuda_->UploadMatrix(w));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> hw,
                         cpu_->UploadMatrix(w));
    EXPECT_EQ(dw->rows(), c.n);
    EXPECT_GE(cuda_->traffic().weight_bytes, c.n * c.k * 4);

    const std::vector<float> x = RoundBf16(Random(c.rows * c.k, 2));
    const std::vector<float> bias = Random(c.n, 3);
    const std::vector<float> y0 = Random(c.rows * c.n, 4);
    struct Epilogue {
      bool bias, accumulate;
      float scale;
    };
    for (const Epilogue& e :
         {Epilogue{false, false, 1.0f}, Epilogue{true, false, 1.0f},
          Epilogue{true, true, 1.0f}, Epilogue{false, true, 0.5f},
          Epilogue{false, false, 0.25f}}) {
      SCOPED_TRACE(::testing::Message()
                   << "bias " << e.bias << " accumulate " << e.accumulate
                   << " scale " << e.scale);
      std::vector<float> got, want;
      for (ExecutorDevice* dev : {cuda_.get(), cpu_.get()}) {
        const DeviceMatrix& m = dev == cuda_.get() ? *dw : *hw;
        std::unique_ptr<DeviceArray> dx = Put(*dev, x);
        std::unique_ptr<DeviceArray> db = Put(*dev, bias);
        std::unique_ptr<DeviceArray> dy = Put(*dev, y0);
        LinearEpilogue epilogue;
        if (e.bias) epilogue.bias = db->floats();
        epilogue.accumulate = e.accumulate;
        epilogue.scale = e.scale;
        ASSERT_OK(dev->Linear(dx->floats(), c.rows, m, dy->floats(), epilogue));
        (dev == cuda_.get() ? got : want) = Get(*dev, *dy);
      }
      EXPECT_LE(RelativeError(got, want), kLinearTolerance);
    }
  }
}

// Outputs and biases at offsets of 1-3 floats into their arrays (4, 8 and
// 12 bytes past cuBLASLt's 16-byte alignment, as a MoE layer's outputs sit
// after B x E router logits): the device takes its aligned block for them,
// with the same results as the CPU, and leaves the floats around y alone.
TEST_F(CudaExecutorDeviceTest, MisalignedOutputsMatchTheCpu) {
  const int64_t rows = 3, n = 64, k = 32;
  const kernels::Tensor w =
      kernels::Tensor::FromVector({n, k}, RoundBf16(Random(n * k, 11, 0.1f)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> dw,
                       cuda_->UploadMatrix(w));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> hw, cpu_->UploadMatrix(w));
  const std::vector<float> x = RoundBf16(Random(rows * k, 12));
  const std::vector<float> bias = Random(n + 3, 13);
  const std::vector<float> y0 = Random(rows * n + 6, 14);
  for (int64_t offset : {1, 2, 3}) {
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "offset " << offset << " accumulate " << accumulate);
      std::vector<float> got, want;
      for (ExecutorDevice* dev : {cuda_.get(), cpu_.get()}) {
        const DeviceMatrix& m = dev == cuda_.get() ? *dw : *hw;
        std::unique_ptr<DeviceArray> dx = Put(*dev, x);
        std::unique_ptr<DeviceArray> db = Put(*dev, bias);
        std::unique_ptr<DeviceArray> dy = Put(*dev, y0);
        LinearEpilogue epilogue;
        epilogue.bias = db->floats().sub(offset, n);
        epilogue.accumulate = accumulate;
        ASSERT_OK(dev->Linear(dx->floats(), rows, m,
                              dy->floats().sub(offset, rows * n), epilogue));
        (dev == cuda_.get() ? got : want) = Get(*dev, *dy);
      }
      EXPECT_LE(RelativeError(got, want), kLinearTolerance);
      for (int64_t i = 0; i < offset; ++i) EXPECT_EQ(got[i], y0[i]);
      for (int64_t i = offset + rows * n; i < rows * n + 6; ++i) {
        EXPECT_EQ(got[i], y0[i]);
      }
    }
  }
}

// An attention layer's q, k, v from one input (converted to bf16 once):
// outputs of padded and whole row counts, a bias and an accumulation, as
// the CPU device computes them one by one.
TEST_F(CudaExecutorDeviceTest, LinearsOfOneInputMatchTheCpu) {
  const int64_t rows = 7, k = 64;
  const int64_t widths[] = {64, 37, 128};
  std::vector<kernels::Tensor> weights;
  for (int i = 0; i < 3; ++i) {
    weights.push_back(kernels::Tensor::FromVector(
        {widths[i], k}, RoundBf16(Random(widths[i] * k, 10 + i, 0.1f))));
  }
  const std::vector<float> x = RoundBf16(Random(rows * k, 13));
  const std::vector<float> bias = Random(37, 14);
  std::vector<std::vector<float>> got(3), want(3);
  for (ExecutorDevice* dev : {cuda_.get(), cpu_.get()}) {
    std::vector<std::unique_ptr<DeviceMatrix>> m;
    std::vector<std::unique_ptr<DeviceArray>> y;
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> w,
                           dev->UploadMatrix(weights[i]));
      m.push_back(std::move(w));
      y.push_back(Put(*dev, Random(rows * widths[i], 20 + i)));
    }
    std::unique_ptr<DeviceArray> dx = Put(*dev, x);
    std::unique_ptr<DeviceArray> db = Put(*dev, bias);
    LinearOutput outputs[3] = {{m[0].get(), y[0]->floats(), {}},
                               {m[1].get(), y[1]->floats(), {}},
                               {m[2].get(), y[2]->floats(), {}}};
    outputs[1].epilogue.bias = db->floats();
    outputs[2].epilogue.accumulate = true;
    ASSERT_OK(dev->Linears(dx->floats(), rows, outputs));
    for (int i = 0; i < 3; ++i) {
      (dev == cuda_.get() ? got : want)[i] = Get(*dev, *y[i]);
    }
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_LE(RelativeError(got[i], want[i]), kLinearTolerance) << i;
  }
}

TEST_F(CudaExecutorDeviceTest, EmbeddingReadsAPaddedTable) {
  const int64_t vocab = 50257, dim = 64;
  const kernels::Tensor table = kernels::Tensor::FromVector(
      {vocab, dim}, RoundBf16(Random(vocab * dim, 5)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> dt,
                       cuda_->UploadMatrix(table));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> ht,
                       cpu_->UploadMatrix(table));
  const std::vector<int32_t> ids = {0, 50256, 7, 50256};
  std::unique_ptr<DeviceArray> got = *cuda_->Allocate(4 * dim);
  std::unique_ptr<DeviceArray> want = *cpu_->Allocate(4 * dim);
  ASSERT_OK(cuda_->Embedding(ids, *dt, 2.0f, got->floats()));
  ASSERT_OK(cpu_->Embedding(ids, *ht, 2.0f, want->floats()));
  EXPECT_EQ(Get(*cuda_, *got), Get(*cpu_, *want));  // exact: bf16 · 2
  const std::vector<int32_t> outside = {static_cast<int32_t>(vocab)};
  EXPECT_EQ(
      cuda_->Embedding(outside, *dt, 1.0f, got->floats().sub(0, dim)).code(),
      absl::StatusCode::kInvalidArgument);
}

// A state's arrays after the work that writes them: a Linear queued on
// the compute stream, then its output, its input and an empty view copied
// to the host in one call (on the copy stream, which must wait for the
// GEMM), beside the same on the CPU device; a mismatched copy is refused
// before anything is copied.
TEST_F(CudaExecutorDeviceTest, CopiesToTheHostReadWhatQueuedWorkWrote) {
  const int64_t rows = 512, k = 1024, n = 2048;
  const kernels::Tensor w =
      kernels::Tensor::FromVector({n, k}, RoundBf16(Random(n * k, 7, 0.05f)));
  const std::vector<float> x = RoundBf16(Random(rows * k, 8));
  std::vector<float> y[2], x_back[2];
  ExecutorDevice* devices[] = {cuda_.get(), cpu_.get()};
  for (int d = 0; d < 2; ++d) {
    ExecutorDevice& device = *devices[d];
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> dw,
                         device.UploadMatrix(w));
    std::unique_ptr<DeviceArray> dx = Put(device, x);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> dy,
                         device.Allocate(rows * n));
    ASSERT_OK(device.Linear(dx->floats(), rows, *dw, dy->floats()));
    y[d].assign(static_cast<size_t>(rows * n), 0.0f);
    x_back[d].assign(x.size(), 0.0f);
    const HostCopy copies[] = {{dy->floats(), absl::MakeSpan(y[d])},
                               {dx->floats().sub(0, 0), {}},
                               {dx->floats(), absl::MakeSpan(x_back[d])}};
    ASSERT_OK(device.CopyAllToHost(copies));
    std::vector<float> untouched(4, -1.0f), short_host(3, -1.0f);
    const HostCopy bad[] = {
        {dy->floats().sub(0, 4), absl::MakeSpan(untouched)},
        {dy->floats().sub(4, 4), absl::MakeSpan(short_host)}};
    EXPECT_EQ(device.CopyAllToHost(bad).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(untouched, std::vector<float>(4, -1.0f));
  }
  EXPECT_EQ(x_back[0], x);
  EXPECT_LE(RelativeError(y[0], y[1]), kLinearTolerance);
  EXPECT_GE(cuda_->traffic().bytes_to_host, (rows * n + rows * k) * 4);
}

// A layer's norm and first products in one call: the norm writes the
// GEMMs' bf16 input itself, so the outputs and h are bit for bit those of
// RmsNorm then Linears on the same device (which rounds h to bf16 in a
// pass of its own), and within bf16 rounding of the CPU device's f32
// products. A head of 1001 rows (padded to 1008: the wide-output path), a
// bias and an accumulation.
TEST_F(CudaExecutorDeviceTest, RmsNormLinearsEqualsTheNormThenTheProducts) {
  const int64_t rows = 33, dim = 1024, n1 = 1001, n2 = 256;
  const std::vector<float> x = Random(rows * dim, 11, 3.0f);
  const std::vector<float> norm_w = Random(dim, 12);
  const std::vector<float> bias = Random(n2, 13);
  const std::vector<float> y2_start = Random(rows * n2, 14);
  const kernels::Tensor w1 = kernels::Tensor::FromVector(
      {n1, dim}, RoundBf16(Random(n1 * dim, 15, 0.05f)));
  const kernels::Tensor w2 = kernels::Tensor::FromVector(
      {n2, dim}, RoundBf16(Random(n2 * dim, 16, 0.05f)));
  // [fused or not][h, y1, y2] on the GPU; the CPU's once.
  std::vector<float> gpu[2][3], cpu[3];
  for (int run = 0; run < 3; ++run) {
    ExecutorDevice& device = run < 2 ? *cuda_ : *cpu_;
    std::vector<float>* out = run < 2 ? gpu[run] : cpu;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> d1,
                         device.UploadMatrix(w1));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> d2,
                         device.UploadMatrix(w2));
    std::unique_ptr<DeviceArray> dx = Put(device, x);
    std::unique_ptr<DeviceArray> dw = Put(device, norm_w);
    std::unique_ptr<DeviceArray> db = Put(device, bias);
    std::unique_ptr<DeviceArray> dy2 = Put(device, y2_start);
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> dh,
                         device.Allocate(rows * dim));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> dy1,
                         device.Allocate(rows * n1));
    const LinearOutput outputs[] = {
        {d1.get(), dy1->floats(), {}},
        {d2.get(), dy2->floats(), LinearEpilogue{db->floats(), true}}};
    if (run == 1) {
      ASSERT_OK(device.RmsNorm(dx->floats(), rows, dim, dw->floats(), 1e-5f,
                               dh->floats()));
      ASSERT_OK(device.Linears(dh->floats(), rows, outputs));
    } else {
      ASSERT_OK(device.RmsNormLinears(dx->floats(), rows, dim, dw->floats(),
                                      1e-5f, dh->floats(), outputs));
    }
    out[0] = Get(device, *dh);
    out[1] = Get(device, *dy1);
    out[2] = Get(device, *dy2);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(gpu[0][i], gpu[1][i]) << i;
  EXPECT_LE(RelativeError(gpu[0][0], cpu[0]), kLinearTolerance);
  EXPECT_LE(RelativeError(gpu[0][1], cpu[1]), kBf16InputTolerance);
  EXPECT_LE(RelativeError(gpu[0][2], cpu[2]), kBf16InputTolerance);
  // A product whose weight does not take h's columns is refused.
  std::unique_ptr<DeviceArray> dx = Put(*cuda_, x);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> dh,
                       cuda_->Allocate(rows * dim));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> dy,
                       cuda_->Allocate(rows * 8));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> narrow,
                       cuda_->UploadMatrix(kernels::Tensor::FromVector(
                           {8, dim / 2}, RoundBf16(Random(8 * dim / 2, 17)))));
  std::unique_ptr<DeviceArray> dw = Put(*cuda_, norm_w);
  const LinearOutput bad[] = {{narrow.get(), dy->floats(), {}}};
  EXPECT_EQ(cuda_
                ->RmsNormLinears(dx->floats(), rows, dim, dw->floats(), 1e-5f,
                                 dh->floats(), bad)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// An MLP's activation written straight as the product's bf16 input: for
// silu(gate) · mult over two column ranges of one wide matrix, bit for bit
// SiluMul then Linear on the GPU; for every kind (GELU and relu² in place,
// as the MLPs call them) the CPU device within bf16 rounding of the
// product's input. A weight whose columns are not the activation's is
// refused.
TEST_F(CudaExecutorDeviceTest, ActivationLinearEqualsTheActivationThenLinear) {
  const int64_t rows = 19, hidden = 512, n = 136;
  const std::vector<float> u = Random(rows * 2 * hidden, 21, 3.0f);
  const std::vector<float> y_start = Random(rows * n, 22);
  const kernels::Tensor w = kernels::Tensor::FromVector(
      {n, hidden}, RoundBf16(Random(n * hidden, 23, 0.05f)));
  using Kind = kernels::MlpActivationKind;
  for (const Kind kind : {Kind::kSiluMul, Kind::kReluSquared, Kind::kGelu}) {
    SCOPED_TRACE(static_cast<int>(kind));
    // [fused on the GPU, unfused on the GPU (SiluMul only), CPU]
    std::vector<float> got[3];
    for (int run = 0; run < 3; ++run) {
      if (run == 1 && kind != Kind::kSiluMul) continue;
      ExecutorDevice& device = run < 2 ? *cuda_ : *cpu_;
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> dw,
                           device.UploadMatrix(w));
      std::unique_ptr<DeviceArray> du = Put(device, u);
      std::unique_ptr<DeviceArray> dy = Put(device, y_start);
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> da,
                           device.Allocate(rows * hidden));
      const DeviceFloats all = du->floats();
      const LinearEpilogue add{{}, /*accumulate=*/true, 0.5f};
      if (kind == Kind::kSiluMul) {
        // The gate is the second half of each row, as in SwiGlu.
        const MlpActivation act{kind,       all.sub(hidden, all.size - hidden),
                                2 * hidden, all,
                                2 * hidden, rows,
                                hidden};
        if (run == 1) {
          ASSERT_OK(device.SiluMul(act.in, act.in_stride, act.mult,
                                   act.mult_stride, rows, hidden,
                                   da->floats()));
          ASSERT_OK(device.Linear(da->floats(), rows, *dw, dy->floats(), add));
        } else {
          ASSERT_OK(device.ActivationLinear(act, da->floats(), *dw,
                                            dy->floats(), add));
        }
      } else {
        // In place over the first rows * hidden floats.
        const DeviceFloats in = all.sub(0, rows * hidden);
        const MlpActivation act{kind, in, hidden, {}, 0, rows, hidden};
        ASSERT_OK(device.ActivationLinear(act, in, *dw, dy->floats(), add));
      }
      got[run] = Get(device, *dy);
    }
    if (kind == Kind::kSiluMul) {
      EXPECT_EQ(got[0], got[1]);
    }
    EXPECT_LE(RelativeError(got[0], got[2]), kBf16InputTolerance);
  }
  std::unique_ptr<DeviceArray> du = Put(*cuda_, u);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceArray> dy,
                       cuda_->Allocate(rows * 8));
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<DeviceMatrix> narrow,
      cuda_->UploadMatrix(kernels::Tensor::FromVector(
          {8, hidden / 2}, RoundBf16(Random(8 * hidden / 2, 24)))));
  const DeviceFloats in = du->floats().sub(0, rows * hidden);
  const MlpActivation act{Kind::kGelu, in, hidden, {}, 0, rows, hidden};
  EXPECT_EQ(cuda_->ActivationLinear(act, in, *narrow, dy->floats(), {}).code(),
            absl::StatusCode::kInvalidArgument);
}

// A decode step's buffers: the ids, slots, positions and rules FillStep
// packs into the step's block are what EmbedStep, the slot map and
// SampleStep read there (a wrong offset or rule packing shows): the
// embedding equals Embedding of the same ids, the sampled ids equal
// kernels::SampleRows of the same logits and rules on the CPU, for two
// fillings of one step (the block is reused). An unfilled step and a
// filling of the wrong size are refused.
TEST_F(CudaExecutorDeviceTest, AStepReadsTheInputsItWasFilledWith) {
  const int64_t rows = 5, vocab = 1001, dim = 64;
  const kernels::Tensor table = kernels::Tensor::FromVector(
      {vocab, dim}, RoundBf16(Random(vocab * dim, 21)));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> dt,
                       cuda_->UploadMatrix(table));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> ht,
                       cpu_->UploadMatrix(table));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceStep> step, cuda_->NewStep(rows));
  std::unique_ptr<DeviceArray> out = *cuda_->Allocate(rows * dim);
  int32_t ignored[rows] = {};
  EXPECT_EQ(cuda_->EmbedStep(*step, *dt, 1.0f, out->floats()).code(),
            absl::StatusCode::kFailedPrecondition);
  for (int filling = 0; filling < 2; ++filling) {
    SCOPED_TRACE(filling);
    const std::vector<int32_t> ids = {3, 1000, 0, 77,
                                      static_cast<int32_t>(500 + filling)};
    const std::vector<int32_t> slots = {4, 0, 2, 9, 1};
    const std::vector<int64_t> positions = {0, 7, 100000, 3, 64 + filling};
    std::vector<kernels::SamplingRule> rules(rows);
    rules[1].temperature = 0.8f;
    rules[1].top_k = 40;
    rules[1].seed = 5 + filling;
    rules[2].temperature = 1.3f;
    rules[2].top_p = 0.9f;
    rules[2].seed = 6;
    rules[2].draw = 17 + filling;
    rules[3].temperature = 0.5f;
    rules[3].top_k = 3;
    rules[3].top_p = 0.5f;
    rules[3].seed = 7;
    ASSERT_OK(cuda_->FillStep(*step, ids, slots, positions, rules));
    EXPECT_EQ(step->slot_map().slots(), absl::MakeConstSpan(slots));
    EXPECT_EQ(step->slot_map().positions(), absl::MakeConstSpan(positions));
    ASSERT_OK(cuda_->EmbedStep(*step, *dt, 2.0f, out->floats()));
    std::unique_ptr<DeviceArray> want = *cpu_->Allocate(rows * dim);
    ASSERT_OK(cpu_->Embedding(ids, *ht, 2.0f, want->floats()));
    EXPECT_EQ(Get(*cuda_, *out), Get(*cpu_, *want));  // exact: bf16 · 2
    // Random logits: a tie, or a draw within rounding of a boundary, has
    // probability ~1e-12 per row (sampling_cuda_test.cc).
    const std::vector<float> logits = Random(rows * vocab, 22 + filling, 4.0f);
    std::unique_ptr<DeviceArray> dl = Put(*cuda_, logits);
    ASSERT_OK(cuda_->SampleStep(dl->floats(), vocab, vocab, *step));
    std::vector<int32_t> got(rows), expected(rows);
    ASSERT_OK(cuda_->CopyStepIds(*step, absl::MakeSpan(got)));
    ASSERT_OK(kernels::SampleRows(logits, rows, vocab, vocab, rules,
                                  absl::MakeSpan(expected)));
    EXPECT_EQ(got, expected);
  }
  EXPECT_EQ(cuda_
                ->FillStep(*step, std::vector<int32_t>(rows - 1, 0),
                           std::vector<int32_t>(rows - 1, 0),
                           std::vector<int64_t>(rows - 1, 0),
                           std::vector<kernels::SamplingRule>(rows - 1))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_->CopyStepIds(*step, absl::MakeSpan(ignored, rows - 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaExecutorDeviceTest, ColumnsNoGemmTakesAreRefusedAtUpload) {
  const kernels::Tensor w =
      kernels::Tensor::FromVector({16, 60}, Random(16 * 60, 6));
  const absl::Status s = cuda_->UploadMatrix(w).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("multiple of 8"), std::string::npos) << s;
}

// A padded step's rows in pad slots route to no expert on the CUDA device
// as on the CPU: the slots come from the step's own buffer, so refilling
// the step with the padding elsewhere moves the unrouted rows with it.
// Real pairs: the CPU's experts, gates within 1e-6, products of bf16-exact
// weights and rows within f32 summation order; pad pairs: zeros.
TEST_F(CudaExecutorDeviceTest, PaddingRowsOfAStepTakeNoExpertAsOnTheCpu) {
  const int64_t rows = 5, experts = 6, k = 2, n = 24, cols = 64;
  const int64_t pairs = rows * k;
  const int32_t first_pad_slot = 3;
  const std::vector<float> logits = Random(rows * experts, 31, 3.0f);
  const std::vector<float> x = RoundBf16(Random(rows * cols, 32));
  std::vector<kernels::Tensor> w;
  for (int64_t e = 0; e < experts; ++e) {
    w.push_back(kernels::Tensor::FromVector(
        {n, cols},
        RoundBf16(Random(n * cols, 40 + static_cast<uint32_t>(e), 0.1f))));
  }
  // One step refilled: the padding rows last, then elsewhere.
  const std::vector<std::vector<int32_t>> fills = {{0, 1, 2, 3, 4},
                                                   {4, 0, 3, 1, 2}};
  // [fill][CUDA, CPU][experts, gates, products]
  std::vector<float> got[2][2][3];
  for (int run = 0; run < 2; ++run) {
    ExecutorDevice& device = run == 0 ? *cuda_ : *cpu_;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceStep> step,
                         device.NewStep(rows));
    std::vector<std::unique_ptr<DeviceMatrix>> matrices;
    std::vector<const DeviceMatrix*> table_of;
    for (const kernels::Tensor& we : w) {
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrix> m,
                           device.UploadMatrix(we));
      table_of.push_back(m.get());
      matrices.push_back(std::move(m));
    }
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<DeviceMatrixTable> table,
                         device.UploadMatrixTable(table_of));
    std::unique_ptr<DeviceArray> dlogits = Put(device, logits);
    std::unique_ptr<DeviceArray> dx = Put(device, x);
    for (size_t f = 0; f < fills.size(); ++f) {
      ASSERT_OK(device.FillStep(*step, std::vector<int32_t>(rows, 0), fills[f],
                                std::vector<int64_t>(rows, 0),
                                std::vector<kernels::SamplingRule>(rows)));
      std::unique_ptr<DeviceArray> dexperts =
          Put(device, std::vector<float>(pairs, 9.0f));
      std::unique_ptr<DeviceArray> dgates =
          Put(device, std::vector<float>(pairs, 9.0f));
      std::unique_ptr<DeviceArray> dy =
          Put(device, std::vector<float>(pairs * n, 7.0f));
      ASSERT_OK(
          device.RouteTopKPairs(dlogits->floats(), rows, experts, k,
                                StepPadRows{&step->slot_map(), first_pad_slot},
                                dexperts->floats(), dgates->floats()));
      ASSERT_OK(device.RoutedLinear(dx->floats(), k, *table, dexperts->floats(),
                                    pairs, dy->floats()));
      got[f][run][0] = Get(device, *dexperts);
      got[f][run][1] = Get(device, *dgates);
      got[f][run][2] = Get(device, *dy);
    }
  }
  for (size_t f = 0; f < fills.size(); ++f) {
    SCOPED_TRACE(f);
    const std::vector<float>(&cuda)[3] = got[f][0];
    const std::vector<float>(&cpu)[3] = got[f][1];
    EXPECT_EQ(cuda[0], cpu[0]);
    for (int64_t p = 0; p < pairs; ++p) {
      EXPECT_NEAR(cuda[1][p], cpu[1][p], 1e-6) << p;
      if (fills[f][p / k] >= first_pad_slot) {
        EXPECT_EQ(cuda[0][p], kernels::kNoExpert) << p;
        EXPECT_EQ(cuda[1][p], 0.0f) << p;
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_EQ(cuda[2][p * n + i], 0.0f) << p << " " << i;
        }
      } else {
        EXPECT_NE(cuda[0][p], kernels::kNoExpert) << p;
      }
    }
    EXPECT_LE(RelativeError(cuda[2], cpu[2]), kLinearTolerance);
  }
}

}  // namespace
}  // namespace twice::engine
