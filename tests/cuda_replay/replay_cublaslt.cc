// The cuBLASLt entry points GemmRunner uses (kernels/cuda/cublaslt_library.h)
// for a replayed device (cuda_replay.h): LoadCublasLt returns this table
// instead of loading the library. The matmul computes what cuBLASLt's
// documentation defines, column-major: D = alpha · op(A) · op(B) + beta · C
// (+ a bias per row of D with CUBLASLT_EPILOGUE_BIAS), op(X) = X or X^T by
// CUBLASLT_MATMUL_DESC_TRANSA / TRANSB, element (i, j) of a stored matrix
// at i + j · ld, with bf16 or f32 matrices, f32 compute and scale, summed
// in double. It runs in order on its stream (or into the graph the stream
// records). What it refuses: a layout, epilogue, attribute or type outside
// that set (CUBLAS_STATUS_NOT_SUPPORTED), shapes that do not chain
// (CUBLAS_STATUS_INVALID_VALUE), pointers that are not device memory under
// the replay's strict mode.
#include <cublasLt.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cuda/cublaslt_library.h"
#include "tests/cuda_replay/cuda_replay.h"

namespace twice::kernels::cuda {
namespace {

struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
struct Desc {
  cublasOperation_t trans_a = CUBLAS_OP_N;
  cublasOperation_t trans_b = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  cudaDataType bias_type = CUDA_R_32F;
};
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t));
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t));

Layout& L(cublasLtMatrixLayout_t layout) {
  return *reinterpret_cast<Layout*>(layout);
}
Desc& D(cublasLtMatmulDesc_t desc) { return *reinterpret_cast<Desc*>(desc); }

float Load(cudaDataType type, const void* base, int64_t index) {
  if (type == CUDA_R_32F) return static_cast<const float*>(base)[index];
  const uint32_t bits = uint32_t{static_cast<const uint16_t*>(base)[index]}
                        << 16;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}
void Store(cudaDataType type, void* base, int64_t index, float value) {
  if (type == CUDA_R_32F) {
    static_cast<float*>(base)[index] = value;
    return;
  }
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // to nearest even
  static_cast<uint16_t*>(base)[index] = static_cast<uint16_t>(bits >> 16);
}
bool Supported(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF;
}

cublasStatus_t Create(cublasLtHandle_t* handle) {
  *handle = reinterpret_cast<cublasLtHandle_t>(new int(0));
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t Destroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<int*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t MatrixLayoutCreate(cublasLtMatrixLayout_t* layout,
                                  cudaDataType type, uint64_t rows,
                                  uint64_t cols, int64_t ld) {
  if (!Supported(type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (ld < static_cast<int64_t>(rows)) return CUBLAS_STATUS_INVALID_VALUE;
  auto* opaque = new cublasLtMatrixLayoutOpaque_t{};
  *layout = opaque;
  L(*layout) = Layout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t MatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t MatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                cublasComputeType_t compute,
                                cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  *desc = new cublasLtMatmulDescOpaque_t{};
  D(*desc) = Desc{};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t MatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t MatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                      cublasLtMatmulDescAttributes_t attr,
                                      const void* buf, size_t size) {
  Desc& d = D(desc);
  const auto read = [&](auto& field) {
    if (size != sizeof(field)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, buf, size);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return read(d.trans_a);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return read(d.trans_b);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return read(d.epilogue);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return read(d.bias);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: {
      int32_t type = 0;
      if (size != sizeof(type)) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(&type, buf, size);
      d.bias_type = static_cast<cudaDataType>(type);
      return Supported(d.bias_type) ? CUBLAS_STATUS_SUCCESS
                                    : CUBLAS_STATUS_NOT_SUPPORTED;
    }
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t MatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  *pref = new cublasLtMatmulPreferenceOpaque_t{};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t MatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t MatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t attr,
    const void*, size_t) {
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return CUBLAS_STATUS_SUCCESS;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

// op(X)'s rows and columns.
uint64_t OpRows(const Layout& x, cublasOperation_t op) {
  return op == CUBLAS_OP_N ? x.rows : x.cols;
}
uint64_t OpCols(const Layout& x, cublasOperation_t op) {
  return op == CUBLAS_OP_N ? x.cols : x.rows;
}

cublasStatus_t CheckShapes(const Desc& d, const Layout& a, const Layout& b,
                           const Layout& c, const Layout& out) {
  if ((d.trans_a != CUBLAS_OP_N && d.trans_a != CUBLAS_OP_T) ||
      (d.trans_b != CUBLAS_OP_N && d.trans_b != CUBLAS_OP_T) ||
      (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
       d.epilogue != CUBLASLT_EPILOGUE_BIAS) ||
      a.type != CUDA_R_16BF || b.type != CUDA_R_16BF || c.type != out.type) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const uint64_t m = OpRows(a, d.trans_a), k = OpCols(a, d.trans_a);
  const uint64_t n = OpCols(b, d.trans_b);
  if (OpRows(b, d.trans_b) != k || out.rows != m || out.cols != n ||
      c.rows != m || c.cols != n || c.ld != out.ld) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t MatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t, int requested,
    cublasLtMatmulHeuristicResult_t results[], int* returned) {
  *returned = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t st = CheckShapes(D(desc), L(a), L(b), L(c), L(d));
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t Matmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                      const void* alpha, const void* a,
                      cublasLtMatrixLayout_t a_layout, const void* b,
                      cublasLtMatrixLayout_t b_layout, const void* beta,
                      const void* c, cublasLtMatrixLayout_t c_layout, void* out,
                      cublasLtMatrixLayout_t out_layout,
                      const cublasLtMatmulAlgo_t*, void*, size_t,
                      cudaStream_t stream) {
  const Desc d = D(desc);
  const Layout la = L(a_layout), lb = L(b_layout), lc = L(c_layout),
               lo = L(out_layout);
  const cublasStatus_t st = CheckShapes(d, la, lb, lc, lo);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (d.epilogue == CUBLASLT_EPILOGUE_BIAS &&
      (d.bias == nullptr || d.bias_type != lo.type)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  for (const void* p : {a, b, c, static_cast<const void*>(out), d.bias}) {
    cuda_replay::CheckLaunchPointer(p);
  }
  // alpha and beta live on the host (the default pointer mode): read now.
  const float alpha_value = *static_cast<const float*>(alpha);
  const float beta_value = *static_cast<const float*>(beta);
  cuda_replay::Enqueue(stream, [=] {
    const uint64_t m = lo.rows, n = lo.cols, k = OpCols(la, d.trans_a);
    const auto at = [](const Layout& x, cublasOperation_t op, uint64_t i,
                       uint64_t j) {
      return static_cast<int64_t>(op == CUBLAS_OP_N ? i + j * x.ld
                                                    : j + i * x.ld);
    };
    std::vector<float> column(m);
    for (uint64_t j = 0; j < n; ++j) {
      for (uint64_t i = 0; i < m; ++i) {
        double sum = 0.0;
        for (uint64_t l = 0; l < k; ++l) {
          sum +=
              static_cast<double>(Load(la.type, a, at(la, d.trans_a, i, l))) *
              Load(lb.type, b, at(lb, d.trans_b, l, j));
        }
        double value = alpha_value * sum;
        if (beta_value != 0.0f) {
          value +=
              beta_value * static_cast<double>(Load(lc.type, c, i + j * lc.ld));
        }
        if (d.epilogue == CUBLASLT_EPILOGUE_BIAS) {
          value += Load(d.bias_type, d.bias, static_cast<int64_t>(i));
        }
        column[i] = static_cast<float>(value);
      }
      // C may be D: the column is read whole before it is written.
      for (uint64_t i = 0; i < m; ++i) {
        Store(lo.type, out, static_cast<int64_t>(i + j * lo.ld), column[i]);
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

absl::StatusOr<const CublasLtLibrary*> LoadCublasLt() {
  static const CublasLtLibrary library = [] {
    CublasLtLibrary lib;
    lib.Create = Create;
    lib.Destroy = Destroy;
    lib.Matmul = Matmul;
    lib.MatmulAlgoGetHeuristic = MatmulAlgoGetHeuristic;
    lib.MatmulDescCreate = MatmulDescCreate;
    lib.MatmulDescDestroy = MatmulDescDestroy;
    lib.MatmulDescSetAttribute = MatmulDescSetAttribute;
    lib.MatmulPreferenceCreate = MatmulPreferenceCreate;
    lib.MatmulPreferenceDestroy = MatmulPreferenceDestroy;
    lib.MatmulPreferenceSetAttribute = MatmulPreferenceSetAttribute;
    lib.MatrixLayoutCreate = MatrixLayoutCreate;
    lib.MatrixLayoutDestroy = MatrixLayoutDestroy;
    return lib;
  }();
  return &library;
}

}  // namespace twice::kernels::cuda
