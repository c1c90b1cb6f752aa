// Simulator throughput (ops/s: compute ops simulated per second) on 1F1B,
// GPipe and list-scheduler schedules of growing size, and RunChanged on 1F1B
// with two neighbouring ops of one device swapped at a quarter, half or three
// quarters of its order (a local-search move): what the resumed run saves
// against simulating in full. Each runs with Timing::kAuto (counter pass: 1
// where the longest-path pass timed it, 0.5 where it handed over to the event
// loop at the first allocation that waits) and, as `..._event_loop`, with the
// event loop alone; a result that differs between the two is an error.
// Run: build/bin/optpipe_bench_simulator
#include <benchmark/benchmark.h>

#include <bit>
#include <random>
#include <string>

#include "core/simulator.h"
#include "heuristics/list_scheduler.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

using Timing = Simulator::Timing;

// Room for 1F1B's D - d activations and one more: every allocation checked.
void LimitLikeOneFOneB(Problem& p) {
  p.memory_limit.emplace();
  for (int d = 0; d < p.devices; ++d)
    p.memory_limit->push_back(p.static_memory[d] + (p.devices - d + 1) * p.activation[d]);
}

// Room for half of 1F1B's D - d activations: offload, and the list
// scheduler's holds.
void LimitToHalf(Problem& p) {
  p.memory_limit.emplace();
  for (int d = 0; d < p.devices; ++d)
    p.memory_limit->push_back(p.static_memory[d] + (p.devices - d + 2) / 2 * p.activation[d]);
}

bool Same(const StatusOr<SimResult>& a, const StatusOr<SimResult>& b) {
  if (a.ok() != b.ok()) return false;
  if (!a.ok()) return a.status().message() == b.status().message();
  const auto bits = [](const std::vector<double>& v) {
    std::vector<std::uint64_t> out;
    for (double x : v) out.push_back(std::bit_cast<std::uint64_t>(x));
    return out;
  };
  return bits(a->start) == bits(b->start) && bits(a->end) == bits(b->end) &&
         a->peak_memory == b->peak_memory && a->objective == b->objective;
}

// Runs `run` (a Run or RunChanged of `sim`) in the benchmark loop; checks
// once that the event loop gives the same result.
template <class RunFn>
void Measure(benchmark::State& state, const Problem& p, const Schedule& s, Timing timing,
             RunFn run) {
  Simulator sim(p), loop(p);
  sim.set_timing(timing);
  loop.set_timing(Timing::kEventLoop);
  if (!Same(run(sim), run(loop))) state.SkipWithError("the two timings differ");
  // 1: the pass alone; 0.5: the pass, then the event loop from the first wait.
  state.counters["pass"] = sim.timed_by() == Simulator::TimedBy::kLongestPath ? 1.0
                           : sim.timed_by() == Simulator::TimedBy::kBoth      ? 0.5
                                                                              : 0.0;
  std::size_t ops = 0;
  for (const auto& lane : s.compute) ops += lane.size();
  for (auto _ : state) {
    StatusOr<SimResult> r = run(sim);
    benchmark::DoNotOptimize(r);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ops));
  state.counters["ops"] = static_cast<double>(ops);
}

// method: "1f1b", "gpipe", "list" (with offload, under LimitToHalf) or
// "list_unheld" (the same without its holds: reloads start as soon as their
// link is free and wait for memory, so kAuto hands over to the event loop).
void BM_Simulate(benchmark::State& state, const char* method, bool memory_limit, Timing timing) {
  std::mt19937 rng(1);
  const std::string m = method;
  const bool list = m.starts_with("list");
  Problem p = testing::RandomProblem(rng, state.range(0), state.range(1), 1, true, list);
  if (list) {
    LimitToHalf(p);
  } else if (memory_limit) {
    LimitLikeOneFOneB(p);
  }
  StatusOr<Schedule> s = list ? BuildList(p) : m == "gpipe" ? BuildGPipe(p) : BuildOneFOneB(p);
  if (!s.ok()) {
    state.SkipWithError(s.status().message().c_str());
    return;
  }
  if (m == "list_unheld") s->release.clear();
  Measure(state, p, *s, timing, [&](Simulator& sim) { return sim.Run(*s); });
}

void BM_RunChanged(benchmark::State& state, Timing timing) {
  std::mt19937 rng(1);
  Problem p = testing::RandomProblem(rng, state.range(0), state.range(1), 1, true);
  const Schedule base = *BuildOneFOneB(p);
  const SimResult base_run = *Simulator(p).Run(base);
  Schedule s = base;
  auto& lane = s.compute[p.devices / 2];
  const std::size_t k = lane.size() * state.range(2) / 4;
  std::swap(lane[k], lane[k + 1]);
  Measure(state, p, s, timing, [&](Simulator& sim) { return sim.RunChanged(s, base, base_run); });
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Args({4, 16})->Args({16, 64})->Args({32, 256})->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(BM_Simulate, 1f1b, "1f1b", false, Timing::kAuto)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, 1f1b_event_loop, "1f1b", false, Timing::kEventLoop)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, 1f1b_memory_limited, "1f1b", true, Timing::kAuto)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, 1f1b_memory_limited_event_loop, "1f1b", true, Timing::kEventLoop)
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, gpipe, "gpipe", false, Timing::kAuto)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, gpipe_event_loop, "gpipe", false, Timing::kEventLoop)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, list_offload, "list", true, Timing::kAuto)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, list_offload_event_loop, "list", true, Timing::kEventLoop)
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, list_unheld, "list_unheld", true, Timing::kAuto)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Simulate, list_unheld_event_loop, "list_unheld", true, Timing::kEventLoop)
    ->Apply(Sizes);
void Swaps(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{16}, {64}, {1, 2, 3}})
      ->ArgsProduct({{32}, {256}, {1, 2, 3}})
      ->Unit(benchmark::kMicrosecond);
}
BENCHMARK_CAPTURE(BM_RunChanged, auto, Timing::kAuto) -> Apply(Swaps);
BENCHMARK_CAPTURE(BM_RunChanged, event_loop, Timing::kEventLoop)->Apply(Swaps);

}  // namespace
}  // namespace optpipe

BENCHMARK_MAIN();
