#include "kernels/cuda/cublaslt_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"

namespace twice::kernels::cuda {
namespace {

const std::string kSoname = absl::StrCat("libcublasLt.so.", CUBLAS_VER_MAJOR);

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (out == nullptr && missing.empty()) missing = name;
  return out != nullptr;
}

absl::StatusOr<const CublasLtLibrary*> LoadOnce() {
  void* handle = ::dlopen(kSoname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string first_error = handle == nullptr ? ::dlerror() : "";
#ifdef TWICE_CUDA_LIBRARY_DIR
  if (handle == nullptr) {
    const std::string path = absl::StrCat(TWICE_CUDA_LIBRARY_DIR, "/", kSoname);
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
#endif
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load ", kSoname, " (cuBLASLt): ", first_error));
  }
  auto* lib = new CublasLtLibrary();
  std::string missing;
  Resolve(handle, "cublasLtCreate", lib->Create, missing);
  Resolve(handle, "cublasLtDestroy", lib->Destroy, missing);
  Resolve(handle, "cublasLtMatmul", lib->Matmul, missing);
  Resolve(handle, "cublasLtMatmulAlgoGetHeuristic", lib->MatmulAlgoGetHeuristic,
          missing);
  Resolve(handle, "cublasLtMatmulDescCreate", lib->MatmulDescCreate, missing);
  Resolve(handle, "cublasLtMatmulDescDestroy", lib->MatmulDescDestroy, missing);
  Resolve(handle, "cublasLtMatmulDescSetAttribute", lib->MatmulDescSetAttribute,
          missing);
  Resolve(handle, "cublasLtMatmulPreferenceCreate", lib->MatmulPreferenceCreate,
          missing);
  Resolve(handle, "cublasLtMatmulPreferenceDestroy",
          lib->MatmulPreferenceDestroy, missing);
  Resolve(handle, "cublasLtMatmulPreferenceSetAttribute",
          lib->MatmulPreferenceSetAttribute, missing);
  Resolve(handle, "cublasLtMatrixLayoutCreate", lib->MatrixLayoutCreate,
          missing);
  Resolve(handle, "cublasLtMatrixLayoutDestroy", lib->MatrixLayoutDestroy,
          missing);
  if (!missing.empty()) {
    delete lib;
    return absl::FailedPreconditionError(
        absl::StrCat(kSoname, " has no symbol ", missing));
  }
  return lib;
}

}  // namespace

absl::StatusOr<const CublasLtLibrary*> LoadCublasLt() {
  // A failed load is retried by the next call (the library may have been
  // installed meanwhile); a successful one is kept for the process.
  static std::mutex mutex;
  static const CublasLtLibrary* loaded = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded != nullptr) return loaded;
  absl::StatusOr<const CublasLtLibrary*> lib = LoadOnce();
  if (lib.ok()) loaded = *lib;
  return lib;
}

}  // namespace twice::kernels::cuda
