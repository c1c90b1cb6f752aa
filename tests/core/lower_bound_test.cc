#include "core/lower_bound.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/dag.h"
#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

// The optimum over every order-driven schedule of a tiny problem.
double BruteForceOptimum(const Problem& p, bool offload, long* count = nullptr) {
  double best = std::numeric_limits<double>::infinity();
  Simulator sim(p);
  sim.set_describe_deadlocks(false);  // many orders deadlock; only the optimum matters
  long n = 0;
  testing::ForEachSchedule(p, offload, [&](const Schedule& s) {
    StatusOr<SimResult> r = sim.Run(s);
    ++n;
    if (r.ok()) best = std::min(best, r->objective);
  });
  if (count) *count = n;
  return best;
}

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
      const double opt = BruteForceOptimum(p, c.offload, &n);
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
