// Simulator throughput (ops/s) on 1F1B and GPipe schedules of growing size.
// Run: build/bin/optpipe_bench_simulator
#include <benchmark/benchmark.h>

#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

void BM_Simulate(benchmark::State& state, const char* method, bool memory_limit) {
  std::mt19937 rng(1);
  Problem p = testing::RandomProblem(rng, state.range(0), state.range(1), 1, true);
  if (memory_limit) {  // room for 1F1B's D - d activations and one more: every allocation checked
    p.memory_limit.emplace();
    for (int d = 0; d < p.devices; ++d)
      p.memory_limit->push_back(p.static_memory[d] + (p.devices - d + 1) * p.activation[d]);
  }
  const Schedule s = method[0] == 'g' ? *BuildGPipe(p) : *BuildOneFOneB(p);
  Simulator sim(p);
  std::size_t ops = 0;
  for (const auto& lane : s.compute) ops += lane.size();
  for (auto _ : state) {
    StatusOr<SimResult> r = sim.Run(s);
    benchmark::DoNotOptimize(r);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ops));
  state.counters["ops"] = static_cast<double>(ops);
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Args({4, 16})->Args({16, 64})->Args({32, 256})->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Simulate, 1f1b, "1f1b", false)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, 1f1b_memory_limited, "1f1b", true)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, gpipe, "gpipe", false)->Apply(Sizes);

}  // namespace
}  // namespace optpipe

BENCHMARK_MAIN();
