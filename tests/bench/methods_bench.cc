// Latency of the published schedules whose knobs are searched by simulation
// (heuristics/best_fitting.h): every candidate scored, no time limit, at
// v = 2 chunks per device with offload and a limit of 70% of GIS's activation
// memory. Counters: `ops` of the problem (compute ops, S * M * 3).
// Run: build/bin/optpipe_bench_methods
#include <benchmark/benchmark.h>

#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

void BM_Method(benchmark::State& state, const char* method) {
  std::mt19937 rng(1);
  const int D = static_cast<int>(state.range(0)), M = static_cast<int>(state.range(1));
  Problem p = testing::RandomProblem(rng, D, M, 2, true, true);
  p.memory_limit.emplace();
  for (int d = 0; d < D; ++d) {  // GIS holds about 2D activations on device 0
    p.memory_limit->push_back(p.static_memory[d] + 0.7 * 2 * D * 2 * p.activation[d]);
  }
  SearchOptions opt;
  opt.time_limit_s = 1e9;
  for (auto _ : state) {
    StatusOr<Solution> s = RunMethod(p, method, opt);
    if (!s.ok()) {
      state.SkipWithError(s.status().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(s);
  }
  state.counters["ops"] = 3.0 * p.stages() * M;
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Args({8, 32})->Args({32, 256})->Unit(benchmark::kMillisecond)->Iterations(1);
}

BENCHMARK_CAPTURE(BM_Method, 1f1b_i, "1f1b-i")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Method, gis_h, "gis-h")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Method, po_h, "po-h")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Method, po_f, "po-f")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Method, adaoffload, "adaoffload")->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Method, list, "list")->Apply(Sizes);

}  // namespace
}  // namespace optpipe

BENCHMARK_MAIN();
