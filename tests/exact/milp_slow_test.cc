// Exact claims whose search takes ten seconds or more (ctest label `slow`).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/checker.h"
#include "exact/device_search_bound.h"
#include "exact/milp.h"
#include "exact/sat_search.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

constexpr double kTol = 1e-9;

// Unit costs, 4 devices, 8 micro-batches, room for two activations, a round
// trip of 4 per 3 of compute. The device search proves 32; the SAT probes on
// the time grid, below po-h's schedule, find one of 33 and prove that none
// ends by 32 (about 10 s; one solver, so the same search every run). milp,
// given that bound and schedule, returns it as optimal.
TEST(MilpSlow, TheTightProblemsOptimumIs33) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 8, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 2})");
  ASSERT_TRUE(SatSearchApplies(p));
  const double lower = BestLowerBound(p, DeviceSearchOptions{1'000'000, 60.0});  // nodes end it
  EXPECT_NEAR(lower, 32, kTol);
  const Solution po_h = testing::Solve(p, "po-h");
  ASSERT_GT(po_h.sim.objective, 33);

  std::vector<std::string> lines;
  SatSearchOptions sat;
  sat.time_limit_s = 300;  // a cap: the search ends once it proves the optimum
  sat.solvers = 1;
  sat.hint = &po_h.sim;
  sat.log = [&](const std::string& line) { lines.push_back(line); };
  const SatSearchResult r = SearchTimeIndexed(p, lower, po_h.sim.objective, sat);
  EXPECT_TRUE(r.optimal);
  EXPECT_NEAR(r.best, 33, kTol);
  EXPECT_NEAR(r.bound, 33, kTol);
  bool none_by_32 = false;
  for (const std::string& line : lines) none_by_32 |= line.find("by 32: none") != std::string::npos;
  EXPECT_TRUE(none_by_32);
  testing::ExpectSchedule(p, r, "tight");
  ASSERT_TRUE(r.schedule.has_value());

  MilpOptions opt;
  opt.time_limit_s = 60;
  opt.known_bound = r.bound;
  StatusOr<MilpResult> m = SolveMilp(p, opt, &*r.schedule);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->termination, MilpTermination::kOptimal);
  EXPECT_NEAR(m->objective, 33, kTol);
  ASSERT_TRUE(m->schedule && m->sim);
  const CheckReport rep = CheckSchedule(p, ToTimed(p, *m->schedule, *m->sim));
  EXPECT_TRUE(rep.valid()) << (rep.valid() ? "" : rep.errors.front());
  EXPECT_NEAR(rep.objective, 33, 1e-6);
}

}  // namespace
}  // namespace optpipe
