// SGEMM / SGEMV throughput of Debian's OpenBLAS and BLIS on the shapes the
// Based engine runs, to choose the BLAS Twice links.
//
//   build-perf/bench/blas_compare [threads=1] [seconds_per_row=0.6] [LIB...]
//
// Both libraries are dlopen'ed into this one process (RTLD_LOCAL, so each
// resolves its own symbols) and every repetition times them back to back,
// alternating: on a shared, noisy machine a slow moment then hits both, and
// the per-library best-of-N stays comparable. LIB defaults to the Debian
// paths of libopenblas (pthread) and libblis (openmp); a missing one is
// skipped. Each library runs with `threads` threads of its own.
//
// Shapes (360m-shape, d 1024, 1024-token prefill chunks; y = x W^T):
//   conv in_proj / mlp fc1   m 1024  k 1024  n 4096
//   conv out_proj / mlp fc2  m 1024  k 2048  n 1024
//   swa Wqkv                 m 1024  k 1024  n 3072
//   la v / out_proj          m 1024  k 1024  n 1024
//   la q / k                 m 1024  k 1024  n 256
//   la / swa tiles           m 64, n 64..273, k 64..273
//   decode: sgemv over the same weights and the tied LM head (50264 x 1024)
// plus one large square SGEMM (the practical ceiling). GFLOP/s = 2·m·n·k /
// best time; sgemv GB/s = weight bytes / best time (small matrices are
// L3-resident here: the decode bound uses DRAM bandwidth, see twice-bench).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

// CBLAS enum values (identical in every cblas.h).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int,
                         const float*, int, float, float*, int);
using SgemvFn = void (*)(int, int, int, int, float, const float*, int,
                         const float*, int, float, float*, int);

struct Library {
  std::string path;
  std::string name;
  SgemmFn sgemm = nullptr;
  SgemvFn sgemv = nullptr;
};

[[nodiscard]] bool Open(const std::string& path, int threads, Library& lib) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return false;
  lib.path = path;
  lib.sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
  lib.sgemv = reinterpret_cast<SgemvFn>(dlsym(h, "cblas_sgemv"));
  if (lib.sgemm == nullptr || lib.sgemv == nullptr) return false;
  if (auto* set = reinterpret_cast<void (*)(int)>(
          dlsym(h, "openblas_set_num_threads"))) {
    set(threads);
    auto* config =
        reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_config"));
    auto* core =
        reinterpret_cast<char* (*)()>(dlsym(h, "openblas_get_corename"));
    lib.name = std::string(config ? config() : "OpenBLAS") + ", core " +
               (core ? core() : "?");
  } else if (auto* bset = reinterpret_cast<void (*)(long)>(  // NOLINT
                 dlsym(h, "bli_thread_set_num_threads"))) {
    bset(threads);
    auto* version =
        reinterpret_cast<char* (*)()>(dlsym(h, "bli_info_get_version_str"));
    lib.name = std::string("BLIS ") + (version ? version() : "?");
  } else {
    lib.name = path;
  }
  return true;
}

std::vector<float> Random(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Best seconds per call for each library; calls alternate between them.
template <typename Call>
std::vector<double> BestSeconds(const std::vector<Library>& libs, Call call,
                                double budget) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> best(libs.size(), 1e30);
  for (const Library& lib : libs) call(lib);  // warm-up: threads, buffers
  double total = 0.0;
  for (int rep = 0; rep < 300 && (rep < 3 || total < budget); ++rep) {
    for (size_t i = 0; i < libs.size(); ++i) {
      const auto t0 = Clock::now();
      call(libs[i]);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      best[i] = std::min(best[i], s);
      total += s;
    }
  }
  return best;
}

struct GemmShape {
  const char* name;
  int m, n, k;
  bool trans_a;  // A stored [k, m] (the V^T K state update)
};

struct GemvShape {
  const char* name;
  int n, k;
};

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const double budget = argc > 2 ? std::atof(argv[2]) : 0.6;
  std::vector<std::string> paths;
  for (int i = 3; i < argc; ++i) paths.emplace_back(argv[i]);
  if (paths.empty()) {
    paths = {"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
             "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4",
             "/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4"};
  }
  std::vector<Library> libs;
  for (const std::string& p : paths) {
    Library lib;
    if (Open(p, threads, lib)) {
      std::printf("lib%zu: %s (%s)\n", libs.size(), lib.name.c_str(),
                  p.c_str());
      libs.push_back(std::move(lib));
    }
  }
  if (libs.empty()) {
    std::fprintf(stderr, "blas_compare: no BLAS library could be opened\n");
    return 1;
  }
  std::printf("threads per library: %d; best of alternating repetitions\n",
              threads);

  const GemmShape gemms[] = {
      {"ceiling 2048^3", 2048, 2048, 2048, false},
      {"conv in / fc1", 1024, 4096, 1024, false},
      {"conv out / fc2", 1024, 1024, 2048, false},
      {"swa Wqkv", 1024, 3072, 1024, false},
      {"la v / out", 1024, 1024, 1024, false},
      {"la q / k", 1024, 256, 1024, false},
      {"half fc1 (split n)", 1024, 2048, 1024, false},
      {"la Q S^T / Q K^T", 64, 64, 273, false},
      {"la A V", 64, 64, 64, false},
      {"la V^T K", 64, 273, 64, true},
      {"swa Q K^T band", 64, 192, 64, false},
      {"swa P V band", 64, 64, 192, false},
  };
  std::printf("\n%-20s %5s %5s %5s", "sgemm GFLOP/s", "m", "n", "k");
  for (size_t i = 0; i < libs.size(); ++i) std::printf("   lib%zu", i);
  std::printf("\n");
  for (const GemmShape& s : gemms) {
    const auto a = Random(static_cast<size_t>(s.m) * s.k, 1);
    const auto b = Random(static_cast<size_t>(s.n) * s.k, 2);
    std::vector<float> c(static_cast<size_t>(s.m) * s.n);
    const auto best = BestSeconds(
        libs,
        [&](const Library& lib) {
          lib.sgemm(kRowMajor, s.trans_a ? kTrans : kNoTrans, kTrans, s.m, s.n,
                    s.k, 1.0f, a.data(), s.trans_a ? s.m : s.k, b.data(), s.k,
                    0.0f, c.data(), s.n);
        },
        budget);
    std::printf("%-20s %5d %5d %5d", s.name, s.m, s.n, s.k);
    for (double sec : best)
      std::printf(" %6.1f", 2.0 * s.m * s.n * s.k / sec * 1e-9);
    std::printf("\n");
    std::fflush(stdout);
  }

  const GemvShape gemvs[] = {{"fc1 / conv in", 4096, 1024},
                             {"fc2 / conv out", 1024, 2048},
                             {"la v / out", 1024, 1024},
                             {"lm head (DRAM)", 50264, 1024}};
  std::printf("\n%-20s %5s %5s %5s", "sgemv GB/s", "n", "k", "");
  for (size_t i = 0; i < libs.size(); ++i) std::printf("   lib%zu", i);
  std::printf("\n");
  for (const GemvShape& g : gemvs) {
    const auto w = Random(static_cast<size_t>(g.n) * g.k, 3);
    const auto x = Random(g.k, 4);
    std::vector<float> y(g.n);
    const auto best = BestSeconds(
        libs,
        [&](const Library& lib) {
          lib.sgemv(kRowMajor, kNoTrans, g.n, g.k, 1.0f, w.data(), g.k,
                    x.data(), 1, 0.0f, y.data(), 1);
        },
        budget);
    std::printf("%-20s %5d %5d %5s", g.name, g.n, g.k, "");
    for (double sec : best) std::printf(" %6.1f", 4.0 * g.n * g.k / sec * 1e-9);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
