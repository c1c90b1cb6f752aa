// Simulator throughput (ops/s) on 1F1B and GPipe schedules of growing size,
// and RunChanged on 1F1B with two neighbouring ops of one device swapped at a
// quarter, half or three quarters of its order (a local-search move): what
// the resumed run saves against simulating in full.
// Run: build/bin/optpipe_bench_simulator
#include <benchmark/benchmark.h>

#include <random>

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

void BM_RunChanged(benchmark::State& state) {
  std::mt19937 rng(1);
  Problem p = testing::RandomProblem(rng, state.range(0), state.range(1), 1, true);
  const Schedule base = *BuildOneFOneB(p);
  Simulator sim(p);
  const SimResult base_run = *sim.Run(base);
  Schedule s = base;
  auto& lane = s.compute[p.devices / 2];
  const std::size_t k = lane.size() * state.range(2) / 4;
  std::swap(lane[k], lane[k + 1]);
  std::size_t ops = 0;
  for (const auto& l : s.compute) ops += l.size();
  for (auto _ : state) {
    StatusOr<SimResult> r = sim.RunChanged(s, base, base_run);
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
BENCHMARK(BM_RunChanged)
    ->ArgsProduct({{16}, {64}, {1, 2, 3}})
    ->ArgsProduct({{32}, {256}, {1, 2, 3}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace optpipe

BENCHMARK_MAIN();
