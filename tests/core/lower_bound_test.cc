#include "core/lower_bound.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/dag.h"
#include "core/simulator.h"
#include "exact/device_search_bound.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

TEST(LowerBound, MatchesPaperFormulasOnUnitCosts) {
  // Fused: device D-1 waits (D-1) forwards, works 3M, then B chain of D-1 stages.
  Problem fused = testing::UnitProblem(4, 8, false);
  EXPECT_DOUBLE_EQ(ComputeLowerBound(fused).value, 3 + 24 + 3 * 2);  // 33 = 1F1B
  // Split: W can end a device, so the bound is (D-1) + 3M = 27 = ZB-H1's makespan.
  Problem split = testing::UnitProblem(4, 8, true);
  const LowerBound lb = ComputeLowerBound(split);
  EXPECT_DOUBLE_EQ(lb.value, 27.0);
  EXPECT_EQ(lb.binding_device, 3);
  EXPECT_DOUBLE_EQ(lb.critical_path, 4 + 4 + 1);
  split.objective = Objective::kDeviceSpan;
  EXPECT_DOUBLE_EQ(ComputeLowerBound(split).value, 24.0);  // ZB-H2's zero-bubble span
}

TEST(LowerBound, NeverAboveBruteForceOptimumAndTightOnSmallCases) {
  struct Case {
    Problem p;
    bool offload;
  };
  std::mt19937 rng(3);
  std::vector<Case> cases = {
      {testing::UnitProblem(2, 2, true), false},
      {testing::UnitProblem(2, 3, false), false},
      {testing::UnitProblem(3, 2, true), false},
      {testing::UnitProblem(2, 2, false), false},
  };
  for (int i = 0; i < 4; ++i) cases.push_back({testing::RandomProblem(rng, 2, 2, 1, true), false});
  cases.push_back({testing::RandomProblem(rng, 2, 3, 1, false), false});
  cases.push_back({testing::RandomProblem(rng, 2, 1, 2, true), false});  // interleaved
  // Offload under a tight limit: the optimum must use the host link.
  Problem off = testing::RandomProblem(rng, 2, 2, 1, false, true);
  off.memory_limit = std::vector<double>{off.static_memory[0] + off.activation[0] * 1.5,
                                         off.static_memory[1] + off.activation[1] * 2};
  cases.push_back({off, true});
  for (const Case& c : cases) {
    for (Objective obj : {Objective::kMakespan, Objective::kDeviceSpan}) {
      Problem p = c.p;
      p.objective = obj;
      long n = 0;
      const double opt = testing::BruteForceOptimum(p, c.offload, &n);
      const double lb = ComputeLowerBound(p).value;
      ASSERT_LT(opt, std::numeric_limits<double>::infinity());
      EXPECT_LE(lb, opt + 1e-9) << ToJson(p);
      EXPECT_GT(n, 1);
      // Known optima on unit fused costs: 1F1B meets the bound.
      if (!p.split_backward && p.f[0] == 1.0 && p.b[0] == 1.0 && obj == Objective::kMakespan) {
        EXPECT_DOUBLE_EQ(lb, opt);
      }
    }
  }
}

// The memory-time bound by hand. Two devices, fused f = b = 1, activation 1 on
// stage 0 only, room for one activation on device 0: each micro-batch's stage-0
// activation lives F0 F1 B1 B0 = 4, so 4 micro-batches take 16 on device 0
// alone (the work bound says 8 + 1 + 1 = 10). Offload at t = 0.5 shortens a
// life to f + 2t + b = 3 for 1 of link time: T >= max(16 - x, x) over x <= 4
// offloads gives 12. Both are optimal: the brute force finds 16 and 12 on a
// 2-micro-batch version (8 and 6: x <= 2 gives max(8 - x, x) = 6).
TEST(LowerBound, MemoryTimeBoundByHand) {
  const auto make = [](int m, bool offload) {
    std::string json =
        "\"name\": \"mem\", \"devices\": 2, \"microbatches\": " + std::to_string(m) +
        ", \"split_backward\": false, \"stage_time\": {\"f\": 1, \"b\": 1}, \"memory\": "
        "{\"activation\": [1, 0], \"static\": 0, \"limit\": [1, 1]}";
    if (offload) json += ", \"offload_time\": 0.5";
    return testing::MakeProblem(json);
  };
  const LowerBound kept = ComputeLowerBound(make(4, false));
  EXPECT_DOUBLE_EQ(kept.device_bound, 10);
  EXPECT_NEAR(kept.memory_bound, 16, 1e-9);
  EXPECT_NEAR(kept.value, 16, 1e-9);
  EXPECT_NEAR(ComputeLowerBound(make(4, true)).value, 12, 1e-9);
  EXPECT_NEAR(ComputeLowerBound(make(2, false)).value, 8, 1e-9);
  EXPECT_NEAR(ComputeLowerBound(make(2, true)).value, 6, 1e-9);
  EXPECT_NEAR(testing::BruteForceOptimum(make(2, false), false), 8, 1e-9);
  EXPECT_NEAR(testing::BruteForceOptimum(make(2, true), true), 6, 1e-9);
  Problem span = make(2, true);
  span.objective = Objective::kDeviceSpan;
  EXPECT_NEAR(ComputeLowerBound(span).value, 6, 1e-9);
  // Without a limit the bound is the work bound again.
  Problem free = make(4, true);
  free.memory_limit.reset();
  EXPECT_DOUBLE_EQ(ComputeLowerBound(free).memory_bound, 0);
  EXPECT_DOUBLE_EQ(ComputeLowerBound(free).value, 10);
}

// Room for 1.5 activations holds one whole activation at a time, never 1.5.
// Fused (B = b + w = 2), a life is F0 F1 B1 B0 = 6 and the lives are
// disjoint: 4 micro-batches need 24, where the room alone gives 24 / 1.5 = 16.
// Split, with freed_by_b 0.5, a whole activation and a half one waiting for
// its W fit together: the whole lives (F0 F1 B1 B0 = 4) alone need 16, and
// the last W(0) runs after the last life, 17 (the memory-time with the halves,
// 4 x (4 + 0.5), over the room 1.5 gives only 12 + 1). Brute force on 2
// micro-batches: 12 fused and 9 split, both exactly the bound.
TEST(LowerBound, WholeActivationsThatDoNotShareTheRoom) {
  const auto make = [](int m, bool split) {
    return testing::MakeProblem(
        "\"devices\": 2, \"microbatches\": " + std::to_string(m) +
        ", \"split_backward\": " + (split ? "true" : "false") +
        ", \"stage_time\": {\"f\": 1, \"b\": 1, \"w\": 1}, \"memory\": {\"activation\": [1, 0]," +
        " \"freed_by_b\": [0.5, 0], \"static\": 0, \"limit\": [1.5, 1]}");
  };
  EXPECT_NEAR(ComputeLowerBound(make(4, false)).memory_bound, 24, 1e-6);
  EXPECT_NEAR(ComputeLowerBound(make(2, false)).value, 12, 1e-6);
  EXPECT_NEAR(testing::BruteForceOptimum(make(2, false), false), 12, 1e-9);
  EXPECT_NEAR(ComputeLowerBound(make(4, true)).memory_bound, 17, 1e-6);
  EXPECT_NEAR(ComputeLowerBound(make(2, true)).value, 9, 1e-6);
  EXPECT_NEAR(testing::BruteForceOptimum(make(2, true), false), 9, 1e-9);
  // The activations on stage 1 instead (fused): lives F1 B1 = 3, which start
  // after F0 = 1 and end before B0 = 2: 1 + 2 x 3 + 2 = 9 on 2 micro-batches.
  Problem late = make(2, false);
  late.activation = {0, 1};
  late.freed_by_b = {0, 1};
  late.offloadable = {0, 1};
  late.memory_limit = std::vector<double>{1, 1.5};
  EXPECT_NEAR(ComputeLowerBound(late).value, 9, 1e-6);
  EXPECT_NEAR(testing::BruteForceOptimum(late, false), 9, 1e-9);
}

// Room 1.3 holds one whole activation (1) or two waiting for their W (0.6
// each), never a whole one and one waiting: weighing a whole activation 1 and
// a waiting one 1/2 (the best weights, from a small LP over what fits
// together), each micro-batch takes 4 (F0 F1 B1 B0) + 1/2 (W0) of the span:
// 3 micro-batches 13.5, where whole activations alone give 12 + 1 and the
// amounts over the room they can fill (1.2) 3 x 4.6 / 1.2 = 11.5. Brute force: 15.
Problem RoomForOneWholeOrTwoWaiting() {
  return testing::MakeProblem(
      R"("devices": 2, "microbatches": 3, "split_backward": true,
         "stage_time": {"f": 1, "b": 1, "w": 1}, "memory": {"activation": [1, 0],
         "freed_by_b": [0.4, 0], "static": 0, "limit": [1.3, 1]})");
}

TEST(LowerBound, WeighsWhatCannotShareTheRoom) {
  const Problem p = RoomForOneWholeOrTwoWaiting();
  EXPECT_NEAR(ComputeLowerBound(p).memory_bound, 13.5, 1e-6);
  EXPECT_NEAR(testing::BruteForceOptimum(p, false), 15, 1e-9);  // above it, as a bound must be
}

// A slow host link: room for two activations (each weighs half the room), a
// life F0 (1) + comm 3 + F1 B1 (1) + comm 3 + B0 (1) = 9, offloaded
// 1 + 2 x 2.5 + 1 = 7, so an offload saves (9 - 7) / 2 = 1 of memory-time for
// 5 of link time. The link copies nothing before F0 ends (1) nor after the
// last reload but its B0 (1): on 3 micro-batches T >= 13.5 - x with
// 5x <= T - 2, x offloads a whole number: x = 2 gives 12, x = 1 12.5 (a
// fractional x = 1.98 would give 11.583; with the whole span for the link,
// 5x <= T, x = 2 gives 11.5). Brute force: 13.5.
TEST(LowerBound, TheLinkIdlesBeforeTheFirstForwardAndAfterTheLastReload) {
  const Problem p = testing::MakeProblem(
      R"("devices": 2, "microbatches": 3, "split_backward": false,
         "stage_time": {"f": [1, 0.5], "b": [1, 0.5]}, "comm_time": 3, "offload_time": 2.5,
         "memory": {"activation": [1, 0], "static": 0, "limit": [2, 1]})");
  EXPECT_NEAR(ComputeLowerBound(p).memory_bound, 12, 1e-6);
  EXPECT_NEAR(testing::BruteForceOptimum(p, true), 13.5, 1e-9);
}

// The bound rises to the next multiple of the time grain, the largest step
// every duration and comm time is a multiple of (then the least objective is).
// Memory-time 13.5 on integer times (the room above) proves 14 (brute force:
// 15); a bound already on the grain stays; without a grain (a third) nothing
// is rounded.
TEST(LowerBound, RisesToTheTimeGrain) {
  Problem p = RoomForOneWholeOrTwoWaiting();
  EXPECT_DOUBLE_EQ(TimeGrain(p), 1);
  EXPECT_NEAR(ComputeLowerBound(p).memory_bound, 13.5, 1e-6);
  EXPECT_DOUBLE_EQ(ComputeLowerBound(p).value, 14);
  EXPECT_DOUBLE_EQ(BestLowerBound(p), 15);  // the device search finds the optimum
  EXPECT_DOUBLE_EQ(AtGrain(p, 14), 14);
  EXPECT_DOUBLE_EQ(AtGrain(p, 14 - 1e-12), 14);
  p.comm.assign(1, 0.25);
  EXPECT_DOUBLE_EQ(TimeGrain(p), 0.25);
  EXPECT_DOUBLE_EQ(AtGrain(p, 13.51), 13.75);
  p.f = {1.13, 0.88};
  EXPECT_DOUBLE_EQ(TimeGrain(p), 0.01);
  p.f = {1.0 / 3, 1};
  EXPECT_DOUBLE_EQ(TimeGrain(p), 0);
  EXPECT_DOUBLE_EQ(AtGrain(p, 13.51), 13.51);
  // In microseconds, the grid milliseconds have (1.13, 0.88, 0.25: 0.01).
  EXPECT_DOUBLE_EQ(CommonGrain({1130, 880, 250}), 10);
  EXPECT_DOUBLE_EQ(CommonGrain({1130, 880, 250, 0.01}), 0.01);
  // Large values: a multiple to a thousandth of a grain, not to a billionth
  // of the value (which would make 1000000333 a multiple of 2).
  EXPECT_DOUBLE_EQ(CommonGrain({1000000333}), 1);
  EXPECT_DOUBLE_EQ(CommonGrain({1234567.891, 2469135.782}), 0.001);
  EXPECT_DOUBLE_EQ(CommonGrain({0.1 + 0.2, 0.7}), 0.1);  // 0.30000000000000004
}

// Without offload and with room for one activation, device 0 runs one F (2)
// and then waits for its B: F0 F1 F2 B2 B1 = 6 after its start, idle 6 - 2 = 4
// before the first B; its work 4 x 3 = 12, so its device bound is 16 (12 from
// the work alone; devices 1 and 2 give 11 and 13).
TEST(LowerBound, WarmupIdleWithoutOffload) {
  Problem p = testing::MakeProblem(
      R"("devices": 3, "microbatches": 4, "split_backward": false,
         "stage_time": {"f": [2, 1, 1], "b": 1}, "memory": {"activation": [1, 0, 0],
         "static": 0, "limit": [1, 1, 1]})");
  EXPECT_DOUBLE_EQ(ComputeLowerBound(p).device_bound, 16);
  p.offload = std::vector<double>(3, 1.0);  // the F could go to the host instead
  EXPECT_DOUBLE_EQ(ComputeLowerBound(p).device_bound, 13);
}

// A zero-bubble drain needs room for the W's it defers. Two devices, f = b = 1,
// w = 1 and 0.5, B frees nothing of the activation (1), room for one on
// device 1: once its last B has ended only one W (0.5) can still be waiting
// there, and that micro-batch's B(0) and W(0) (2) must still run, so device 1
// idles at least 1.5 at the end: 1 (head) + 2 x 2.5 (work) + 1.5 = 7.5, the
// optimum (without the limit the W would end the device: 6).
TEST(LowerBound, SplitTailNeedsRoomForTheDeferredWs) {
  Problem p = testing::MakeProblem(
      R"("devices": 2, "microbatches": 2, "split_backward": true,
         "stage_time": {"f": 1, "b": 1, "w": [1, 0.5]},
         "memory": {"activation": 1, "freed_by_b": 0, "static": 0, "limit": [4, 1]})");
  const LowerBound lb = ComputeLowerBound(p);
  EXPECT_DOUBLE_EQ(lb.device_bound, 7.5);
  EXPECT_EQ(lb.binding_device, 1);
  EXPECT_DOUBLE_EQ(testing::BruteForceOptimum(p, false), 7.5);
  (*p.memory_limit)[1] = 2;  // room for both W's: they cover the drain's 2 but 1
  EXPECT_DOUBLE_EQ(ComputeLowerBound(p).device_bound, 7);
  p.memory_limit.reset();
  EXPECT_DOUBLE_EQ(ComputeLowerBound(p).device_bound, 6);
}

// The drain bound on random split problems with tight limits, with and
// without offload: never above the brute-force optimum, and above the bound
// without the limit on some of them.
TEST(LowerBound, SplitTailNeverAboveTheOptimum) {
  std::mt19937 rng(29);
  int raised = 0;
  for (int trial = 0; trial < 16; ++trial) {
    const bool offload = trial % 2 == 1;
    const int devices = offload || trial % 4 < 2 ? 2 : 3;
    Problem p = testing::RandomProblem(rng, devices, 2, 1, true, offload);
    p.memory_limit = p.static_memory;
    for (int d = 0; d < devices; ++d) {
      p.w[d] *= 0.25 + 0.25 * (trial % 4);  // from little of the drain to most of it
      (*p.memory_limit)[d] += p.activation[d] * (1.0 + 0.2 * (trial % 3));
    }
    const double opt = testing::BruteForceOptimum(p, offload);
    if (opt == std::numeric_limits<double>::infinity()) continue;
    const LowerBound lb = ComputeLowerBound(p);
    EXPECT_LE(lb.value, opt + 1e-9) << ToJson(p);
    Problem roomy = p;
    roomy.memory_limit.reset();
    if (lb.device_bound > ComputeLowerBound(roomy).device_bound + 1e-9) ++raised;
  }
  EXPECT_GE(raised, 12) << raised;
}

// Under random tight limits, with and without offload, the memory-time bound
// never exceeds the brute-force optimum. (Three micro-batches with a split
// backward twice only: their brute force takes seconds.)
TEST(LowerBound, MemoryBoundNeverAboveTheOptimum) {
  std::mt19937 rng(17);
  int binding = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const bool offload = trial % 2 == 1;
    const bool split = trial % 3 == 0 && (offload || trial % 12 == 0);
    Problem p = testing::RandomProblem(rng, 2, offload ? 2 : 3, 1, split, offload);
    p.memory_limit = p.static_memory;
    for (int d = 0; d < 2; ++d)  // rooms for 1 to 1.75 activations: whole ones cannot share
      (*p.memory_limit)[d] += p.activation[d] * (1.0 + 0.25 * (trial % 4));
    if (trial % 4 == 3) p.objective = Objective::kDeviceSpan;
    const double opt = testing::BruteForceOptimum(p, offload);
    if (opt == std::numeric_limits<double>::infinity()) continue;
    const LowerBound lb = ComputeLowerBound(p);
    EXPECT_LE(lb.value, opt + 1e-9) << ToJson(p);
    if (lb.memory_bound > std::max(lb.device_bound, lb.critical_path)) ++binding;
  }
  EXPECT_GE(binding, 8);  // the memory bound is the binding one on tight limits
}

TEST(Dag, EdgesAndTopologicalOrderFollowTheFormat) {
  Problem p = testing::UnitProblem(3, 2, true);
  p.offload = std::vector<double>(3, 1.0);
  std::vector<char> off(6, 0);
  off[1 * 2 + 1] = 1;  // offload (stage 1, mb 1)
  const Dag dag = BuildDag(p, off);
  EXPECT_EQ(dag.num_vertices(), 3 * 3 * 2 + 2);
  // F:(S-1)M, B: (S-1)M + SM, W: SM, O,R,B<-R: 3 for the offloaded one.
  int edges = 0;
  for (int v = 0; v < dag.num_vertices(); ++v) edges += dag.succ_end(v) - dag.succ_begin(v);
  EXPECT_EQ(edges, 4 + 4 + 6 + 6 + 3);
  std::vector<int> pos(dag.num_vertices());
  for (int i = 0; i < dag.num_vertices(); ++i) pos[dag.topological_order()[i]] = i;
  for (int v = 0; v < dag.num_vertices(); ++v) {
    for (auto* e = dag.succ_begin(v); e != dag.succ_end(v); ++e) EXPECT_LT(pos[v], pos[e->to]);
  }
  const int b11 = dag.VertexOf({OpType::kB, 1, 1});
  bool has_reload = false;
  for (auto* e = dag.pred_begin(b11); e != dag.pred_end(b11); ++e) {
    has_reload |= dag.ops()[e->to] == Op{OpType::kR, 1, 1};
  }
  EXPECT_TRUE(has_reload);
  // One micro-batch: 3 F, 3 B, the last W, and the offload round trip adds nothing here.
  EXPECT_DOUBLE_EQ(dag.CriticalPath(), 7.0);
}

}  // namespace
}  // namespace optpipe
