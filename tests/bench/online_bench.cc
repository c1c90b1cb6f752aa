// The online scheduler's start (online/online_scheduler.h): the initial
// schedule a trainer starts on, and a cache hit, on llama-8dev-offload (8
// devices x 32 micro-batches, offload under a memory limit). The target is
// under 50 ms for each.
// Run: build/bin/optpipe_bench_online
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "core/format.h"
#include "online/cache.h"
#include "online/online_scheduler.h"

namespace optpipe {
namespace {

Problem Llama() {
  return *LoadProblem(std::string(OPTPIPE_SOURCE_DIR) + "/tests/cases/llama-8dev-offload.json");
}

void BM_InitialSchedule(benchmark::State& state) {
  const Problem p = Llama();
  for (auto _ : state) {
    StatusOr<ScheduleVersion> v = InitialSchedule(p);
    if (!v.ok()) {
      state.SkipWithError(v.status().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_InitialSchedule)->Unit(benchmark::kMillisecond);

void BM_CacheHit(benchmark::State& state) {
  const Problem p = Llama();
  const std::string file = std::filesystem::temp_directory_path() /
                           ("optpipe-bench-" + std::to_string(getpid()) + ".db");
  {
    ScheduleCache cache = ScheduleCache::Open(file);
    StatusOr<ScheduleVersion> v = InitialSchedule(p);
    cache.Store(p, ToTimed(p, v->schedule, v->sim));
  }
  for (auto _ : state) {  // open, look up, re-time and check, as a new job does
    ScheduleCache cache = ScheduleCache::Open(file);
    CacheLookup hit = cache.Lookup(p);
    if (hit.outcome != CacheOutcome::kHit) {
      state.SkipWithError("no hit");
      break;
    }
    benchmark::DoNotOptimize(hit);
  }
  std::filesystem::remove(file);
}
BENCHMARK(BM_CacheHit)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace optpipe

BENCHMARK_MAIN();
