#include "kernels/cuda/gemm.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cublaslt_library.h"
#include "kernels/cuda/cuda_status.h"

namespace twice::kernels::cuda {
namespace {

constexpr int64_t kWorkspaceBytes = int64_t{32} << 20;

// Set by the first successful GemmRunner::Create; every Plan and runner
// exists only after that.
const CublasLtLibrary* loaded_library = nullptr;

const CublasLtLibrary& Lt() { return *loaded_library; }

// The alignment Run requires of every pointer, and the one the algorithm
// search is told to assume.
constexpr uint32_t kGemmAlignmentBytes = 16;

bool Aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) % kGemmAlignmentBytes) == 0;
}

}  // namespace

// Descriptors and the chosen algorithm of one shape; destroyed with the
// runner.
struct GemmRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // W^T view
  cublasLtMatrixLayout_t b = nullptr;  // x^T view
  cublasLtMatrixLayout_t d = nullptr;  // y^T view (also C)
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    if (d != nullptr) Lt().MatrixLayoutDestroy(d);
    if (b != nullptr) Lt().MatrixLayoutDestroy(b);
    if (a != nullptr) Lt().MatrixLayoutDestroy(a);
    if (op != nullptr) Lt().MatmulDescDestroy(op);
  }
};

absl::StatusOr<std::unique_ptr<GemmRunner>> GemmRunner::Create(
    const Stream& stream, DeviceAllocator& allocator) {
  absl::StatusOr<DeviceBuffer> workspace = allocator.Allocate(kWorkspaceBytes);
  if (!workspace.ok()) return workspace.status();
  absl::StatusOr<const CublasLtLibrary*> library = LoadCublasLt();
  if (!library.ok()) return library.status();
  loaded_library = *library;  // the same table on every call
  cublasLtHandle_t handle = nullptr;
  TWICE_CUBLAS_RETURN_IF_ERROR(Lt().Create(&handle));
  return std::unique_ptr<GemmRunner>(
      new GemmRunner(stream, handle, std::move(*workspace)));
}

GemmRunner::GemmRunner(const Stream& stream, cublasLtHandle_t handle,
                       DeviceBuffer workspace)
    : stream_(stream), handle_(handle), workspace_(std::move(workspace)) {}

GemmRunner::~GemmRunner() {
  plans_.clear();
  lru_.clear();
  Lt().Destroy(handle_);
}

absl::StatusOr<GemmRunner::Plan*> GemmRunner::GetPlan(const GemmShape& s,
                                                      bool y_bf16, bool bias,
                                                      bool accumulate) {
  const PlanKey key{s.m, s.n, s.k, y_bf16 ? 1 : 0, bias, accumulate};
  if (auto it = plans_.find(key); it != plans_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.recency);
    return it->second.plan.get();
  }
  ++plan_misses_;

  auto plan = std::make_unique<Plan>();
  const cudaDataType_t y_type = y_bf16 ? CUDA_R_16BF : CUDA_R_32F;
  TWICE_CUBLAS_RETURN_IF_ERROR(
      Lt().MatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T;
  const cublasOperation_t trans_b = CUBLAS_OP_N;
  TWICE_CUBLAS_RETURN_IF_ERROR(Lt().MatmulDescSetAttribute(
      plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  TWICE_CUBLAS_RETURN_IF_ERROR(Lt().MatmulDescSetAttribute(
      plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  if (bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    TWICE_CUBLAS_RETURN_IF_ERROR(Lt().MatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    const cudaDataType_t bias_type = y_type;
    TWICE_CUBLAS_RETURN_IF_ERROR(Lt().MatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
        sizeof(bias_type)));
  }
  // Column-major views: W [n, k] row-major is k x n (ld k), op T -> n x k;
  // x [m, k] row-major is k x m (ld k); y [m, n] row-major is n x m (ld n).
  TWICE_CUBLAS_RETURN_IF_ERROR(
      Lt().MatrixLayoutCreate(&plan->a, CUDA_R_16BF, s.k, s.n, s.k));
  TWICE_CUBLAS_RETURN_IF_ERROR(
      Lt().MatrixLayoutCreate(&plan->b, CUDA_R_16BF, s.k, s.m, s.k));
  TWICE_CUBLAS_RETURN_IF_ERROR(
      Lt().MatrixLayoutCreate(&plan->d, y_type, s.n, s.m, s.n));

  cublasLtMatmulPreference_t pref = nullptr;
  TWICE_CUBLAS_RETURN_IF_ERROR(Lt().MatmulPreferenceCreate(&pref));
  const uint64_t workspace_bytes = static_cast<uint64_t>(workspace_.bytes());
  cublasStatus_t st = Lt().MatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof(workspace_bytes));
  // The heuristic assumes 256-byte aligned matrices unless told otherwise;
  // Run accepts any 16-byte aligned pointer (an output is often an offset
  // into a scratch block), so only algorithms that work at 16 may be chosen.
  const uint32_t alignment = kGemmAlignmentBytes;
  for (cublasLtMatmulPreferenceAttributes_t attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = Lt().MatmulPreferenceSetAttribute(pref, attribute, &alignment,
                                             sizeof(alignment));
    }
  }
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = Lt().MatmulAlgoGetHeuristic(handle_, plan->op, plan->a, plan->b,
                                     plan->d, plan->d, pref, 1, &result,
                                     &returned);
  }
  Lt().MatmulPreferenceDestroy(pref);
  TWICE_CUBLAS_RETURN_IF_ERROR(st);
  if (returned == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GemmRunner: cuBLASLt has no algorithm for m=", s.m,
                     " n=", s.n, " k=", s.k));
  }
  plan->algo = result.algo;
  // Plans are host-side descriptors consumed when a matmul is queued, so
  // the evicted one may go while its last matmul still runs.
  if (static_cast<int64_t>(plans_.size()) >= kMaxCachedPlans) {
    plans_.erase(lru_.back());
    lru_.pop_back();
  }
  Plan* raw = plan.get();
  lru_.push_front(key);
  plans_.emplace(key, CachedPlan{std::move(plan), lru_.begin()});
  return raw;
}

absl::Status GemmRunner::Run(const void* x, int64_t x_size, const void* w,
                             int64_t w_size, const void* bias,
                             int64_t bias_size, void* y, int64_t y_size,
                             bool y_bf16, const GemmShape& s, bool accumulate,
                             float alpha) {
  constexpr char kOp[] = "GemmRunner::Linear";
  if (s.m < 0 || s.n <= 0 || s.k <= 0 || s.k % 8 != 0 || s.n % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": need m >= 0, n, k > 0 and multiples of 8; got m=", s.m,
        " n=", s.n, " k=", s.k));
  }
  if (x_size != s.m * s.k || w_size != s.n * s.k || y_size != s.m * s.n ||
      (bias != nullptr && bias_size != s.n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        kOp, ": a size does not match m=", s.m, " n=", s.n, " k=", s.k, " (x ",
        x_size, ", w ", w_size, ", y ", y_size, ", bias ", bias_size, ")"));
  }
  if (s.m == 0) return absl::OkStatus();
  if (!Aligned16(x) || !Aligned16(w) || !Aligned16(y) ||
      (bias != nullptr && !Aligned16(bias))) {
    return absl::InvalidArgumentError(
        absl::StrCat(kOp, ": pointers must be 16-byte aligned"));
  }
  absl::StatusOr<Plan*> plan = GetPlan(s, y_bf16, bias != nullptr, accumulate);
  if (!plan.ok()) return plan.status();
  if (bias != nullptr) {
    TWICE_CUBLAS_RETURN_IF_ERROR(Lt().MatmulDescSetAttribute(
        (*plan)->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  const float beta = accumulate ? 1.0f : 0.0f;
  TWICE_CUBLAS_RETURN_IF_ERROR(Lt().Matmul(
      handle_, (*plan)->op, &alpha, w, (*plan)->a, x, (*plan)->b, &beta, y,
      (*plan)->d, y, (*plan)->d, &(*plan)->algo, workspace_.data(),
      static_cast<size_t>(workspace_.bytes()), stream_.get()));
  return absl::OkStatus();
}

absl::Status GemmRunner::Linear(DeviceSpan<const Bf16> x,
                                DeviceSpan<const Bf16> weight,
                                DeviceSpan<const float> bias,
                                const GemmShape& shape, bool accumulate,
                                DeviceSpan<float> y, float alpha) {
  return Run(x.data, x.size, weight.data, weight.size,
             bias.size > 0 ? bias.data : nullptr, bias.size, y.data, y.size,
             /*y_bf16=*/false, shape, accumulate, alpha);
}

absl::Status GemmRunner::Linear(DeviceSpan<const Bf16> x,
                                DeviceSpan<const Bf16> weight,
                                DeviceSpan<const Bf16> bias,
                                const GemmShape& shape, bool accumulate,
                                DeviceSpan<Bf16> y) {
  return Run(x.data, x.size, weight.data, weight.size,
             bias.size > 0 ? bias.data : nullptr, bias.size, y.data, y.size,
             /*y_bf16=*/true, shape, accumulate, /*alpha=*/1.0f);
}

}  // namespace twice::kernels::cuda
