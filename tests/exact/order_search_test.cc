#include "exact/order_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include "core/checker.h"
#include "core/lower_bound.h"
#include "core/simulator.h"
#include "exact/milp.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

constexpr double kTol = 1e-6;

TEST(OrderSearch, FindsAndProvesTheBruteForceOptimumOnTinyProblems) {
  std::mt19937 rng(11);
  std::vector<testing::NamedProblem> cases = testing::TinyProblems(rng);
  // The same problems under the device_span objective (each device from its head).
  for (std::size_t k = 0, n = cases.size(); k < n; ++k) {
    testing::NamedProblem c = cases[k];
    c.name += " device_span";
    c.p.objective = Objective::kDeviceSpan;
    cases.push_back(c);
  }
  for (const testing::NamedProblem& c : cases) {
    ASSERT_TRUE(OrderSearchApplies(c.p)) << c.name;
    const double brute = testing::BruteForceOptimum(c.p, false);
    ASSERT_LT(brute, std::numeric_limits<double>::infinity()) << c.name;
    OrderSearchOptions opt;
    opt.time_limit_s = 20;
    testing::ExpectFindsAndProves(
        c.p, brute,
        [&](double lower, double incumbent) { return SearchOrders(c.p, lower, incumbent, opt); },
        c.name);
  }
}

// Beyond brute force: lp_solve's optimum (the model without the order search)
// on small random problems, memory-limited or not.
TEST(OrderSearch, AgreesWithTheMilpOptimum) {
  std::mt19937 rng(17);
  int compared = 0;
  for (int trial = 0; trial < 6; ++trial) {
    const int d = 2 + trial % 2, m = 5 - trial % 2;
    Problem p = testing::RandomProblem(rng, d, m, 1, trial % 3 != 1);
    if (trial % 2 == 0) {
      p.memory_limit = p.static_memory;
      for (int k = 0; k < d; ++k)
        (*p.memory_limit)[k] += p.activation[k] * std::max(1.0, d - k - 0.5);
    }
    const std::string what = "trial " + std::to_string(trial);
    StatusOr<Solution> start = RunMethod(p, "list");
    ASSERT_TRUE(start.ok()) << what << ": " << start.status().message();
    MilpOptions mo;
    mo.time_limit_s = 10;
    mo.order_search_nodes = 0;
    mo.device_search_nodes = 0;
    StatusOr<MilpResult> milp = SolveMilp(p, mo, &start->schedule);
    ASSERT_TRUE(milp.ok()) << what << ": " << milp.status().message();
    if (milp->termination != MilpTermination::kOptimal) continue;
    ++compared;
    OrderSearchOptions opt;
    opt.time_limit_s = 20;
    // From no bound and an incumbent far above: it finds the optimum itself.
    const OrderSearchResult r = SearchOrders(p, 0.0, 2 * start->sim.objective, opt);
    EXPECT_TRUE(r.optimal) << what;
    EXPECT_NEAR(r.best, milp->objective, kTol * milp->objective) << what;
    testing::ExpectSchedule(p, r, what);
  }
  EXPECT_GE(compared, 4);
}

// Random problems, with and without a memory limit, too large to enumerate: whatever the
// budget, the bound stays below every schedule the heuristics find, and a
// schedule the search returns beats the incumbent it was given.
TEST(OrderSearch, BoundNeverAboveKnownSchedules) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 10; ++trial) {
    const int d = 3 + trial % 2, m = 6 + trial % 3;
    Problem p = testing::RandomProblem(rng, d, m, 1, trial % 3 != 0);
    if (trial % 3 != 0) {  // room for 1F1B's activations (and one more), or one fewer
      const double more = trial % 3 == 1 ? 1.0 : -0.5;
      p.memory_limit = p.static_memory;
      for (int k = 0; k < d; ++k)
        (*p.memory_limit)[k] += p.activation[k] * std::max(1.0, d - k + more);
    }
    std::vector<double> known;
    for (const char* name : {"gpipe", "1f1b", "zb-h1", "list"}) {
      if (StatusOr<Solution> s = RunMethod(p, name); s.ok()) known.push_back(s->sim.objective);
    }
    ASSERT_FALSE(known.empty()) << "trial " << trial;
    const double incumbent = *std::max_element(known.begin(), known.end());
    const double core = ComputeLowerBound(p).value;
    OrderSearchOptions opt;
    opt.time_limit_s = 0.5;
    opt.max_nodes = trial % 2 ? 200 : 20000;  // cut short, and (mostly) run to the end
    const OrderSearchResult r = SearchOrders(p, core, incumbent, opt);
    const std::string what = "trial " + std::to_string(trial);
    EXPECT_GE(r.bound, core - kTol) << what;
    EXPECT_LE(r.bound, r.best + kTol) << what;
    for (double k : known) EXPECT_LE(r.bound, k + kTol) << what;
    EXPECT_LE(r.best, incumbent + kTol) << what;
    if (r.schedule) {
      EXPECT_LT(r.best, incumbent - kTol) << what;
      testing::ExpectSchedule(p, r, what);
    }
  }
}

// With a split backward a W frees what its B leaves, so the memory at a
// forward's start depends on B and W together, which the memory precedences
// (one op type each) cannot say: leaves whose orders break the limit would
// keep every probe open. The memory rule at each forward closes these 4x8
// problems within a few hundred nodes, never above a heuristic's schedule.
TEST(OrderSearch, MemoryRuleClosesSplitBackwardProblems) {
  std::mt19937 rng(2);
  for (int trial = 0; trial < 6; ++trial) {
    const int d = 4, m = 8;
    Problem p = testing::RandomProblem(rng, d, m, 1, trial % 2 == 0);
    p.memory_limit = p.static_memory;
    for (int k = 0; k < d; ++k) (*p.memory_limit)[k] += p.activation[k] * (d - k + 0.5);
    StatusOr<Solution> list = RunMethod(p, "list");
    ASSERT_TRUE(list.ok()) << list.status().message();
    OrderSearchOptions opt;
    opt.time_limit_s = 20;
    opt.max_nodes = 5000;
    const OrderSearchResult r =
        SearchOrders(p, ComputeLowerBound(p).value, list->sim.objective, opt);
    const std::string what = "trial " + std::to_string(trial);
    EXPECT_TRUE(r.optimal) << what << ": bound " << r.bound << ", best " << r.best;
    EXPECT_LE(r.best, list->sim.objective + kTol) << what;
    for (const char* name : {"1f1b", "zb-h1"}) {
      if (StatusOr<Solution> h = RunMethod(p, name); h.ok()) {
        EXPECT_LE(r.bound, h->sim.objective + kTol) << what << " " << name;
      }
    }
    if (r.schedule) testing::ExpectSchedule(p, r, what);
  }
}

TEST(OrderSearch, StopTokenEndsItWithTheBoundItHad) {
  std::mt19937 rng(3);
  Problem p = testing::RandomProblem(rng, 4, 8, 1, true);
  std::atomic<bool> stop{true};
  OrderSearchOptions opt;
  opt.stop = &stop;
  const OrderSearchResult r = SearchOrders(p, 1.0, 1000.0, opt);
  EXPECT_EQ(r.nodes, 0);
  EXPECT_EQ(r.bound, 1.0);
  EXPECT_FALSE(r.optimal);
  EXPECT_FALSE(r.schedule.has_value());
}

TEST(OrderSearch, AppliesWithoutOffloadUpToASize) {
  EXPECT_TRUE(OrderSearchApplies(testing::UnitProblem(16, 128, true)));
  EXPECT_FALSE(OrderSearchApplies(testing::UnitProblem(32, 256, true)));  // 590k pairs a device
  std::mt19937 rng(3);
  Problem p = testing::RandomProblem(rng, 2, 2, 1, true);
  EXPECT_TRUE(OrderSearchApplies(p));
  p.objective = Objective::kDeviceSpan;
  EXPECT_TRUE(OrderSearchApplies(p));
  // Two stages a device, stage 1 not the lowest of any: a device may start
  // after its head, so its span is not what the windows bound.
  Problem late = testing::RandomProblem(rng, 2, 2, 2, true);
  late.stage_device = {0, 0, 1, 1};
  late.objective = Objective::kDeviceSpan;
  ASSERT_TRUE(Validate(late).ok());
  EXPECT_FALSE(OrderSearchApplies(late));
  late.objective = Objective::kMakespan;
  EXPECT_TRUE(OrderSearchApplies(late));
  Problem off = testing::RandomProblem(rng, 2, 2, 1, true, true);
  off.memory_limit = std::vector<double>{off.static_memory[0] + 1.5 * off.activation[0],
                                         off.static_memory[1] + 2 * off.activation[1]};
  EXPECT_FALSE(OrderSearchApplies(off));
}

}  // namespace
}  // namespace optpipe
