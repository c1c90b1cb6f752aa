// List-scheduler latency, one thread, at 4x16 .. 64x512 (devices x micro-batches),
// with and without a memory limit that forces offload, and on 4 devices with
// 256 .. 4096 micro-batches (a device short of memory has every forward of
// its first stage ready at once). Prints ops/s so the growth with the number
// of ops N reads directly (O(N log N) expected).
#include <benchmark/benchmark.h>

#include "heuristics/list_scheduler.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

void BM_ListSchedule(benchmark::State& state, bool limited) {
  std::mt19937 rng(1);
  Problem p = testing::RandomProblem(rng, state.range(0), state.range(1), 1, true, limited);
  if (limited) {  // room for about a third of 1F1B's activations on device 0
    p.memory_limit.emplace();
    for (int d = 0; d < p.devices; ++d) {
      p.memory_limit->push_back(p.static_memory[d] + std::max(2.0, (p.devices - d) / 3.0) * 2.0);
    }
  }
  std::size_t ops = 0;
  for (auto _ : state) {
    StatusOr<Schedule> s = ListSchedule(p, ListOptions{});
    if (!s.ok()) {
      state.SkipWithError(s.status().message().c_str());
      break;
    }
    ops = 0;
    for (const auto& lane : s->compute) ops += lane.size();
    for (const auto& lane : s->copy) ops += lane.size();
    benchmark::DoNotOptimize(s);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ops));
  state.counters["ops"] = static_cast<double>(ops);
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Args({4, 16})->Args({16, 64})->Args({32, 256})->Args({64, 512})->Unit(benchmark::kMillisecond);
}

void LongPipelines(benchmark::internal::Benchmark* b) {
  b->Args({4, 256})->Args({4, 1024})->Args({4, 4096})->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_ListSchedule, unlimited, false)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_ListSchedule, memory_limited_offload, true)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_ListSchedule, memory_limited_offload, true)->Apply(LongPipelines);

}  // namespace
}  // namespace optpipe

BENCHMARK_MAIN();
