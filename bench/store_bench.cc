// State store throughput: verified puts and gets of state-sized blobs in a
// real RocksDB directory (temporary), with and without synced writes.
//   build/bench/store_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "storage/rocksdb_store.h"

namespace {

using twice::storage::Store;

std::unique_ptr<Store> OpenStore(bool sync, const std::string& name) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("twice-store-bench-" + name))
          .string();
  std::filesystem::remove_all(dir);
  twice::storage::RocksDbStoreOptions options;
  options.path = dir;
  options.sync_writes = sync;
  auto store = twice::storage::OpenRocksDbStore(options);
  if (!store.ok()) std::abort();
  return *std::move(store);
}

void BM_PutState(benchmark::State& state) {
  const bool sync = state.range(1) != 0;
  auto store = OpenStore(sync, "put");
  const std::string blob(state.range(0), 'x');
  const auto root = twice::storage::RootKey("fp", "causal", "tenant");
  int32_t i = 0;
  for (auto _ : state) {
    const int32_t token = i++;
    auto key = twice::storage::ChainKey(root, absl::MakeConstSpan(&token, 1));
    if (!store->PutState(key, blob, {}).ok()) std::abort();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_PutState)
    ->Args({64 << 10, 0})
    ->Args({4 << 20, 0})
    ->Args({4 << 20, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_GetState(benchmark::State& state) {
  auto store = OpenStore(false, "get");
  const std::string blob(state.range(0), 'x');
  const auto key = twice::storage::RootKey("fp", "causal", "tenant");
  if (!store->PutState(key, blob, {}).ok()) std::abort();
  for (auto _ : state) {
    auto read = store->GetState(key);
    if (!read.ok()) std::abort();
    benchmark::DoNotOptimize(read);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_GetState)
    ->Arg(64 << 10)
    ->Arg(4 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
