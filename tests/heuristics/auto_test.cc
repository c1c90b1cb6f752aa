#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <random>

#include "core/checker.h"
#include "core/lower_bound.h"
#include "core/simulator.h"
#include "exact/device_search_bound.h"
#include "heuristics/auto_method.h"
#include "heuristics/list_scheduler.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

SearchOptions Budget(std::int64_t evals, int threads, std::uint64_t seed = 1) {
  SearchOptions o;
  o.time_limit_s = 60;  // the budget, not the clock, ends these runs
  o.max_evaluations = evals;
  o.threads = threads;
  o.seed = seed;
  return o;
}

Problem Heterogeneous(std::uint32_t seed, bool offload = false) {
  std::mt19937 rng(seed);
  return testing::RandomProblem(rng, 4, 10, 1, true, offload);
}

TEST(LocalSearch, SameSeedOneThreadReproducesExactly) {
  const Problem p = Heterogeneous(21);
  const Schedule start = *BuildOneFOneB(p);
  StatusOr<SearchResult> a = LocalSearch(p, start, Budget(600, 1));
  StatusOr<SearchResult> b = LocalSearch(p, start, Budget(600, 1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ToText(p, a->schedule), ToText(p, b->schedule));
  EXPECT_EQ(a->evaluations, b->evaluations);
}

// The batch is drawn before it is scored, so thread timing cannot matter.
// A budget of evaluations replaces the clock: a run whose time limit has
// passed before it starts spends the whole budget and gives the schedule of a
// run with all the time it wants, in the search and in auto.
TEST(LocalSearch, ABudgetIgnoresTheClock) {
  const Problem p = Heterogeneous(21, true);
  const Schedule start = *BuildOneFOneB(p);
  SearchOptions late = Budget(600, 1);
  late.time_limit_s = 0;
  StatusOr<SearchResult> a = LocalSearch(p, start, late);
  StatusOr<SearchResult> b = LocalSearch(p, start, Budget(600, 1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->stop, b->stop);
  EXPECT_EQ(a->evaluations, b->evaluations);
  EXPECT_EQ(ToText(p, a->schedule), ToText(p, b->schedule));
  late.max_evaluations = 20'000;
  StatusOr<AutoResult> x = RunAuto(p, late);
  StatusOr<AutoResult> y = RunAuto(p, Budget(20'000, 1));
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(x->search.evaluations, y->search.evaluations);
  EXPECT_EQ(ToText(p, x->solution.schedule), ToText(p, y->solution.schedule));
}

TEST(LocalSearch, ManyThreadsGiveTheOneThreadResult) {
  const Problem p = Heterogeneous(22);
  const Schedule start = *BuildOneFOneB(p);
  StatusOr<SearchResult> one = LocalSearch(p, start, Budget(600, 1));
  StatusOr<SearchResult> many = LocalSearch(p, start, Budget(600, 4));
  ASSERT_TRUE(one.ok() && many.ok());
  EXPECT_EQ(ToText(p, one->schedule), ToText(p, many->schedule));
}

TEST(LocalSearch, EveryIncumbentIsValidAndBetter) {
  const Problem p = Heterogeneous(23);
  const Schedule start = *BuildOneFOneB(p);
  SearchOptions opt = Budget(2000, 1);
  std::vector<double> seen;
  opt.on_improvement = [&](const Schedule& s, const SimResult& r) {
    const CheckReport rep = CheckSchedule(p, ToTimed(p, s, r));
    EXPECT_TRUE(rep.valid()) << rep.errors.front();
    EXPECT_NEAR(rep.objective, r.objective, 1e-9);
    seen.push_back(r.objective);
  };
  StatusOr<SearchResult> r = LocalSearch(p, start, opt);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->improvements, 0);  // 1F1B with a lazy-able W always leaves room here
  ASSERT_EQ(seen.size(), static_cast<std::size_t>(r->improvements));
  double last = r->start_objective;
  for (double v : seen) {
    EXPECT_LT(v, last);
    last = v;
  }
  EXPECT_DOUBLE_EQ(last, r->sim.objective);
  EXPECT_GE(r->sim.objective, ComputeLowerBound(p).value - 1e-9);
}

TEST(LocalSearch, StopsAtTheBoundAndOnRequest) {
  const Problem unit = testing::UnitProblem(4, 8, true);
  StatusOr<SearchResult> r = LocalSearch(unit, *BuildList(unit), Budget(1000, 1));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, SearchStop::kBound);  // list already meets the bound: nothing to do
  std::atomic<bool> stop{true};
  SearchOptions opt = Budget(1000, 1);
  opt.stop = &stop;
  r = LocalSearch(Heterogeneous(24), *BuildOneFOneB(Heterogeneous(24)), opt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop, SearchStop::kInterrupted);
}

// Unit costs, 3 devices, room for 2 activations, a round trip of 2: the
// device search proves 21 where ComputeLowerBound gives 20. Told that bound,
// auto stops where it meets it; without it, it spends its whole budget.
// Equal objectives: the lower sum of device spans wins, then the lower sum of
// op ends (slots a schedule does not use are NaN and count nothing).
TEST(LocalSearch, TiesGoToShorterSpansThenEarlierEnds) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  SimResult a;
  a.objective = 10;
  a.span = {10, 8};
  a.end = {1, 5, nan, 10};
  SimResult b = a;
  EXPECT_FALSE(Better(a, b));
  b.end = {2, 5, nan, 10};
  EXPECT_TRUE(Better(a, b));
  EXPECT_FALSE(Better(b, a));
  b.span = {10, 7};
  EXPECT_TRUE(Better(b, a));
  b.objective = 10.5;
  EXPECT_TRUE(Better(a, b));
}

TEST(Auto, StopsAtAKnownBound) {
  const Problem p = testing::MakeProblem(
      R"("devices": 3, "microbatches": 6, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 1, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 2})");
  const double bound = BestLowerBound(p);
  ASSERT_DOUBLE_EQ(ComputeLowerBound(p).value, 20);
  ASSERT_DOUBLE_EQ(bound, 21);
  StatusOr<AutoResult> blind = RunAuto(p, Budget(20000, 1));
  ASSERT_TRUE(blind.ok()) << blind.status().message();
  ASSERT_DOUBLE_EQ(blind->solution.sim.objective, bound);  // optimal, but auto cannot tell
  EXPECT_NE(blind->search.stop, SearchStop::kBound);
  SearchOptions told = Budget(20000, 1);
  told.known_bound = bound;
  StatusOr<AutoResult> r = RunAuto(p, told);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->solution.sim.objective, bound);
  EXPECT_EQ(r->search.stop, SearchStop::kBound);
  EXPECT_LT(r->search.evaluations, blind->search.evaluations);
}

// auto is never worse than its best seed, and reports every seed.
TEST(Auto, NeverWorseThanAnySeed) {
  for (std::uint32_t seed : {31u, 32u, 33u}) {
    Problem p = Heterogeneous(seed, true);
    p.memory_limit.emplace();
    for (int d = 0; d < p.devices; ++d)
      p.memory_limit->push_back(p.static_memory[d] + 3 * p.activation[d]);
    StatusOr<AutoResult> r = RunAuto(p, Budget(300, 1));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->seeds.size(), Methods().size() - 1);
    for (const SeedOutcome& s : r->seeds) {
      if (s.status.ok()) {
        EXPECT_LE(r->solution.sim.objective, s.objective + 1e-9) << s.method;
      }
    }
    const CheckReport rep = CheckSchedule(p, ToTimed(p, r->solution.schedule, r->solution.sim));
    EXPECT_TRUE(rep.valid());
  }
}

// Seeds close to the best get searches of their own (multi-start): the result
// is never worse than any seed, valid, and the same on every run.
TEST(Auto, RestartsFromTheOtherSeeds) {
  int restarted = 0;
  for (std::uint32_t seed : {41u, 42u, 43u}) {
    std::mt19937 rng(seed);
    Problem p = testing::RandomProblem(rng, 3, 6, 1, true, true);
    p.memory_limit.emplace();
    for (int d = 0; d < p.devices; ++d)
      p.memory_limit->push_back(p.static_memory[d] + 2.5 * p.activation[d]);
    StatusOr<AutoResult> r = RunAuto(p, Budget(20'000, 1));
    if (!r.ok()) continue;  // nothing fits this limit
    const StatusOr<AutoResult> again = RunAuto(p, Budget(20'000, 1));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(ToText(p, r->solution.schedule), ToText(p, again->solution.schedule));
    EXPECT_EQ(r->restarts, again->restarts);
    EXPECT_EQ(r->reseeds, again->reseeds);
    int ok_seeds = 0;
    for (const SeedOutcome& o : r->seeds) {
      if (!o.status.ok()) continue;
      ++ok_seeds;
      EXPECT_LE(r->solution.sim.objective, o.objective + 1e-9) << o.method;
    }
    EXPECT_LE(r->restarts, ok_seeds - 1);
    restarted += r->restarts > 0;
    const CheckReport rep = CheckSchedule(p, ToTimed(p, r->solution.schedule, r->solution.sim));
    EXPECT_TRUE(rep.valid());
  }
  EXPECT_EQ(restarted, 3);
}

// With a budget no search can use up on a tiny problem, every search ends at a
// local optimum and the incumbent is searched again with other draws.
TEST(Auto, SearchesAgainWithOtherDrawsWhenBudgetIsLeft) {
  std::mt19937 rng(47);
  Problem p = testing::RandomProblem(rng, 2, 3, 1, true, true);
  p.memory_limit.emplace();
  for (int d = 0; d < p.devices; ++d)
    p.memory_limit->push_back(p.static_memory[d] + 1.5 * p.activation[d]);
  StatusOr<AutoResult> r = RunAuto(p, Budget(600'000, 1));
  ASSERT_TRUE(r.ok()) << r.status().message();
  if (r->search.stop == SearchStop::kBound) GTEST_SKIP() << "the seed meets the bound";
  EXPECT_GT(r->reseeds, 0);
  const StatusOr<AutoResult> again = RunAuto(p, Budget(600'000, 1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ToText(p, r->solution.schedule), ToText(p, again->solution.schedule));
  EXPECT_EQ(r->reseeds, again->reseeds);
}

// A link too slow to carry every activation (a round trip of 4 per 3 units of
// compute, room for 5): neither the list scheduler's settings nor PipeOffload
// with a searched set of kept activations meets the lower bound; tuning the
// list scheduler's kept activations and warm-up depths together does, so
// the result is optimal.
TEST(Auto, TunesKeptActivationsAndWarmupTogether) {
  const Problem p = testing::MakeProblem(
      R"("devices": 8, "microbatches": 16, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 5})");
  const double bound = ComputeLowerBound(p).value;
  ASSERT_DOUBLE_EQ(bound, 55);  // (D - 1) + 3M
  StatusOr<AutoResult> r = RunAuto(p, Budget(2000, 1));
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const SeedOutcome& s : r->seeds) {
    if (s.status.ok()) {
      EXPECT_GT(s.objective, bound + 1) << s.method;
    }
  }
  EXPECT_EQ(r->winner.rfind("list (tuned: ", 0), 0u) << r->winner;
  EXPECT_DOUBLE_EQ(r->solution.sim.objective, bound);
  const CheckReport rep = CheckSchedule(p, ToTimed(p, r->solution.schedule, r->solution.sim));
  EXPECT_TRUE(rep.valid());
}

// Two stages per device, room for two activations, a round trip (2 + 2)
// longer than a micro-batch's work on a stage (1 + 2): the device search
// proves 36, and a schedule of 36 exists (an exact time-indexed model finds
// one): every forward first, the activations offloaded as fast as the link
// takes them, then the backwards with the reloads hidden behind them. From
// 1F1B-like warm-ups alone the search ended at 41 after a minute.
TEST(Auto, ReachesTheProvenOptimumBreadthFirst) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 4, "stages_per_device": 2, "split_backward": false,
         "stage_time": {"f": 1, "b": 2}, "offload_time": 2, "memory": {"activation": 1,
         "limit": 2})");
  const double bound = BestLowerBound(p);
  ASSERT_DOUBLE_EQ(bound, 36);
  StatusOr<AutoResult> r = RunAuto(p, Budget(2000, 1));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->solution.sim.objective, bound);
  const CheckReport rep = CheckSchedule(p, ToTimed(p, r->solution.schedule, r->solution.sim));
  EXPECT_TRUE(rep.valid());
}

// On the clock, seeds not started once half of the time is spent are
// skipped after one has a schedule (the list scheduler's, started first),
// and the result is still valid; with an evaluation budget every seed runs.
TEST(Auto, SkipsSeedsLeftWhenTheirTimeIsSpent) {
  const auto outcome = [](const AutoResult& r, const std::string& method) {
    for (const SeedOutcome& s : r.seeds) {
      if (s.method == method) return s;
    }
    return SeedOutcome{};
  };
  // 240k ops: the list seed alone takes far longer than the half millisecond.
  const Problem big = testing::UnitProblem(4, 20000, true);
  SearchOptions clock;
  clock.time_limit_s = 0.001;
  clock.threads = 1;
  StatusOr<AutoResult> r = RunAuto(big, clock);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(outcome(*r, "list").status.ok());
  int skipped = 0;
  for (const MethodInfo& m : Methods()) {
    if (m.name == "auto" || m.name == "list" || !m.applicable(big).ok()) continue;
    const SeedOutcome s = outcome(*r, m.name);
    EXPECT_EQ(s.status.code(), StatusCode::kNotApplicable) << m.name;
    EXPECT_EQ(s.status.message().rfind("not run:", 0), 0u) << m.name << ": " << s.status.message();
    ++skipped;
  }
  EXPECT_GE(skipped, 5);
  EXPECT_TRUE(CheckSchedule(big, ToTimed(big, r->solution.schedule, r->solution.sim)).valid());

  const Problem small = testing::UnitProblem(4, 1000, true);
  SearchOptions budget = Budget(1, 1);
  budget.time_limit_s = 0.001;
  StatusOr<AutoResult> all = RunAuto(small, budget);
  ASSERT_TRUE(all.ok()) << all.status().message();
  for (const SeedOutcome& s : all->seeds) {
    EXPECT_NE(s.status.message().rfind("not run:", 0), 0u) << s.method;
  }
}

TEST(Auto, InfeasibleWhenNothingFits) {
  Problem p = testing::UnitProblem(2, 4, true);
  p.memory_limit = std::vector<double>{0.5, 0.5};  // not even one activation
  StatusOr<AutoResult> r = RunAuto(p, Budget(10, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInfeasible);
}

// The walk restarts from kicked incumbents (iterated local search), so on tiny
// problems it reaches the brute-force optimum (every order, and with offload
// every order of each device's allocations, reloads held), from a poor
// start, with and without offload and memory limits.
TEST(LocalSearch, ReachesTheBruteForceOptimumOnTinyProblems) {
  std::mt19937 rng(11);
  int trials = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const bool offload = trial % 2 == 1;
    const int d = offload ? 2 : 2 + trial % 2, m = offload || d == 3 ? 2 : 3;
    // Split backward with offload only once, without it twice: their
    // enumeration is the slow part.
    const bool split = offload ? trial == 1 : trial % 6 == 2;
    Problem p = testing::RandomProblem(rng, d, m, 1, split, offload);
    if (trial % 4 >= 2) {  // room for about one activation per device and a half
      p.memory_limit = p.static_memory;
      for (int i = 0; i < d; ++i) (*p.memory_limit)[i] += 1.5 * p.activation[i];
    }
    const double brute = testing::BruteForceOptimum(p, offload);
    StatusOr<Schedule> start = BuildList(p);
    if (!start.ok()) continue;  // nothing the list scheduler finds fits: no start
    ++trials;
    StatusOr<SearchResult> r = LocalSearch(p, *start, Budget(20000, 1));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_NEAR(r->sim.objective, brute, 1e-9)
        << "trial " << trial << ", " << d << "x" << m << (offload ? " offload" : "") << "\n"
        << ToText(p, r->schedule);
  }
  EXPECT_GE(trials, 8);
}

// A problem whose optimum, the critical path (16), holds its reloads
// (testing::HeldReloadsProblem): from the best order replayed as soon as
// possible (22) the walk reaches 16 by holding reloads until just before
// their backwards.
TEST(LocalSearch, HoldsReloadsThatWouldTakeAForwardsMemory) {
  const Problem p = testing::HeldReloadsProblem();
  ASSERT_NEAR(ComputeLowerBound(p).value, 16, 1e-9);
  std::optional<Schedule> start;
  double asap = std::numeric_limits<double>::infinity();
  Simulator sim(p);
  sim.set_describe_deadlocks(false);
  testing::ForEachSchedule(p, true, [&](const Schedule& s) {
    if (StatusOr<SimResult> r = sim.Run(s); r.ok() && r->objective < asap) {
      asap = r->objective;
      start = s;
    }
  });
  ASSERT_TRUE(start.has_value());
  ASSERT_NEAR(asap, 22, 1e-9);
  StatusOr<SearchResult> r = LocalSearch(p, *start, Budget(20000, 1));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->sim.objective, 16, 1e-9) << ToText(p, r->schedule);
  EXPECT_FALSE(r->schedule.release.empty());
}

}  // namespace
}  // namespace optpipe
