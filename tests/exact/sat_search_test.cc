#include "exact/sat_search.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/checker.h"
#include "core/lower_bound.h"
#include "core/simulator.h"
#include "exact/device_search_bound.h"
#include "exact/sat_encoding.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

constexpr double kTol = 1e-6;

double Round(double x, double grain, double least) {
  return std::max(least, std::round(x / grain) * grain);
}

// `p` with its times on a grid of 0.5 (comm of 0.1) and its memory amounts on
// one of 0.1, so that the search applies.
Problem OnGrid(Problem p) {
  for (std::vector<double>* v : {&p.f, &p.b, &p.w}) {
    for (double& x : *v) x = Round(x, 0.5, 0.5);
  }
  for (double& x : p.comm) x = Round(x, 0.1, 0.0);
  if (p.offload) {
    for (double& x : *p.offload) x = Round(x, 0.5, 0.5);
  }
  for (int s = 0; s < p.stages(); ++s) {
    p.activation[s] = Round(p.activation[s], 0.1, 0.1);
    p.freed_by_b[s] = Round(p.freed_by_b[s], 0.1, 0.0);
    p.offloadable[s] = std::min(p.activation[s], Round(p.offloadable[s], 0.1, 0.0));
  }
  return p;
}

using Case = testing::NamedProblem;

// `method`'s schedule of p (a failure, and an empty solution, where it has none).
Solution Seed(const Problem& p, const std::string& method) {
  StatusOr<Solution> s = RunMethod(p, method);
  EXPECT_TRUE(s.ok()) << method << ": " << s.status().message();
  return s.ok() ? std::move(*s) : Solution{};
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  std::mt19937 rng(17);
  for (testing::NamedProblem& c : testing::TinyProblems(rng)) {
    Problem p = OnGrid(c.p);
    if (p.memory_limit) {  // the rooms TinyProblems gives, for the rounded activations
      for (int d = 0; d < p.devices; ++d) {
        (*p.memory_limit)[d] =
            p.static_memory[d] + p.activation[d] * std::max(1.0, p.devices - d - 0.5);
      }
    }
    cases.push_back({c.name, p});
  }
  // Offload under limits that bind (room for 1.1 to 1.9 activations), on one
  // link per device or one shared, with either backward; one device with two
  // chunks; three devices; two devices with two chunks.
  for (int k = 0; k < 8; ++k) {
    // Shared with a split backward once: that brute force takes seconds.
    const bool split = k % 2 == 1, shared = k == 2 || k == 3 || k == 6;
    Problem p = OnGrid(testing::RandomProblem(rng, 2, 2, 1, split, true));
    if (shared) p.host_links = {{0, 1}};
    p.memory_limit.emplace();
    for (int d = 0; d < 2; ++d) {
      p.memory_limit->push_back(p.static_memory[d] + p.activation[d] * (1.1 + 0.1 * k));
    }
    cases.push_back({"offload-2x2-" + std::to_string(k) + (split ? "-split" : "-fused") +
                         (shared ? "-shared" : ""),
                     p, true});
  }
  Problem chunks = OnGrid(testing::RandomProblem(rng, 1, 2, 2, false, true));
  chunks.memory_limit = std::vector<double>{chunks.static_memory[0] + chunks.activation[0] +
                                            chunks.activation[1] * 0.5};
  cases.push_back({"offload-1x2x2-fused", chunks, true});
  Problem three = OnGrid(testing::RandomProblem(rng, 3, 2, 1, false, true));
  three.memory_limit.emplace();
  for (int d = 0; d < 3; ++d) {
    three.memory_limit->push_back(three.static_memory[d] + three.activation[d] * 1.5);
  }
  cases.push_back({"offload-3x2-fused", three, true});
  // Two devices with two chunks, whose optimum holds its reloads.
  cases.push_back({"offload-held-reloads", testing::HeldReloadsProblem(), true});
  return cases;
}

TEST(SatSearch, FindsAndProvesTheBruteForceOptimumOnTinyProblems) {
  int below_bound = 0;
  for (const Case& c : Cases()) {
    ASSERT_TRUE(SatSearchApplies(c.p)) << c.name;
    const double brute = testing::BruteForceOptimum(c.p, c.offload);
    ASSERT_LT(brute, std::numeric_limits<double>::infinity()) << c.name;
    if (AtGrain(c.p, BestLowerBound(c.p)) < brute - kTol) ++below_bound;
    SatSearchOptions opt;
    opt.time_limit_s = 20;
    testing::ExpectFindsAndProves(
        c.p, brute,
        [&](double lower, double incumbent) {
          return SearchTimeIndexed(c.p, lower, incumbent, opt);
        },
        c.name);
    // Given a bound one grain below: one probe there decides it.
    SatSearchResult r = SearchTimeIndexed(c.p, brute - TimeGrain(c.p), brute, opt);
    EXPECT_TRUE(r.optimal) << c.name;
    EXPECT_EQ(r.probes, 1) << c.name;
  }
  // The proofs are the search's own where the core bounds fall short.
  EXPECT_GE(below_bound, 3);
}

// Every schedule the probes find better than the best so far is reported,
// simulated as it is, the last being the one returned (from an incumbent of
// twice the list scheduler's objective: the probes find schedules at once).
TEST(SatSearch, ReportsEveryBetterScheduleItFinds) {
  int found = 0;
  for (const Case& c : Cases()) {
    const double incumbent = 2 * Seed(c.p, "list").sim.objective;
    std::vector<double> reported;
    SatSearchOptions opt;
    opt.time_limit_s = 20;
    opt.on_schedule = [&](const Schedule& s, const SimResult& run) {
      const double before = reported.empty() ? incumbent : reported.back();
      EXPECT_LT(run.objective, before - kTol) << c.name;
      EXPECT_NEAR(Simulate(c.p, s)->objective, run.objective, kTol) << c.name;
      reported.push_back(run.objective);
    };
    const SatSearchResult r = SearchTimeIndexed(c.p, BestLowerBound(c.p), incumbent, opt);
    ASSERT_TRUE(r.schedule.has_value()) << c.name;
    ASSERT_FALSE(reported.empty()) << c.name;
    EXPECT_DOUBLE_EQ(reported.back(), r.sim->objective) << c.name;
    found += static_cast<int>(reported.size());
  }
  EXPECT_GT(found, static_cast<int>(Cases().size()));  // some probes find several
}

// A session's solvers serve a later call below the horizon they were
// encoded at, what they learned included, and still find and prove the
// optimum; a call above it encodes anew. The optimum is the one a search
// without a session proves (FindsAndProvesTheBruteForceOptimumOnTinyProblems
// holds it to the brute force on these cases, which take seconds to enumerate).
TEST(SatSearch, ASessionCarriesItsEncodingToTheNextCall) {
  for (const Case& c : Cases()) {
    if (!c.offload) continue;
    SatSearchOptions fresh;
    fresh.time_limit_s = 20;
    const SatSearchResult alone = SearchTimeIndexed(c.p, 0, Seed(c.p, "list").sim.objective, fresh);
    ASSERT_TRUE(alone.optimal) << c.name;
    const double optimum = alone.best;
    SatSession session;
    SatSearchOptions opt;
    opt.time_limit_s = 20;
    opt.session = &session;
    int calls = 0;
    testing::ExpectFindsAndProves(
        c.p, optimum,
        [&](double lower, double incumbent) {
          SatSearchResult r = SearchTimeIndexed(c.p, lower, incumbent, opt);
          EXPECT_EQ(r.encodings, calls++ == 0 ? 1 : 0) << c.name;
          return r;
        },
        c.name);
    const SatSearchResult above = SearchTimeIndexed(c.p, 0, 3 * optimum + 1, opt);
    EXPECT_EQ(above.encodings, 1) << c.name;
    EXPECT_TRUE(above.optimal) << c.name;
    EXPECT_NEAR(above.best, optimum, kTol * optimum) << c.name;
  }
}

// Four devices, five micro-batches, room for two activations, a round trip
// (2 + 2) longer than a stage's F + B (1 + 2): a schedule of 24 exists (see
// Milp.NeverClaimsAnOptimumAboveAKnownSchedule), where the micro-batch kept
// on the first stages overtakes another. From po-keep's 25 the search must
// find one at 24 or below, never prove 25.
TEST(SatSearch, FindsTheScheduleWhereAMicroBatchOvertakesAnother) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 5, "split_backward": false,
         "stage_time": {"f": 1, "b": 2}, "offload_time": 2,
         "memory": {"activation": 1, "limit": 2})");
  ASSERT_TRUE(SatSearchApplies(p));
  const Solution warm = Seed(p, "po-keep");
  ASSERT_DOUBLE_EQ(warm.sim.makespan, 25);
  SatSearchOptions opt;
  opt.time_limit_s = 20;
  opt.hint = &warm.sim;  // first guesses from po-keep's times
  const SatSearchResult r = SearchTimeIndexed(p, BestLowerBound(p), 25, opt);
  EXPECT_LE(r.best, 24 + kTol);
  EXPECT_LE(r.bound, 24 + kTol);
  testing::ExpectSchedule(p, r, "4x5");
}

// Three devices with two chunks each, six micro-batches, room for three
// activations, a slow link: from the list scheduler's schedule each probe just
// below the best finds a schedule at its target (the hint's times lead it
// there), so a descent one grain a probe took a probe per grain (9 to the
// optimum, 42); doubling the step while they find takes about log2 of the
// grains (5: 50, 48, 45, 43, 42). Two racing solvers find each in
// milliseconds, where one alone took 19 s.
TEST(SatSearch, DescentDoublesItsStepWhileProbesFind) {
  const Problem p = testing::MakeProblem(
      R"("devices": 3, "microbatches": 6, "stages_per_device": 2, "split_backward": false,
         "stage_time": {"f": 1, "b": 2}, "offload_time": 2,
         "memory": {"activation": 1, "limit": 3})");
  const Solution list = Seed(p, "list");
  SatSearchOptions opt;
  opt.time_limit_s = 60;
  opt.solvers = 2;
  opt.hint = &list.sim;
  const SatSearchResult r = SearchTimeIndexed(p, BestLowerBound(p), list.sim.objective, opt);
  ASSERT_TRUE(r.optimal);
  const double grains = list.sim.objective - r.best;  // of 1
  ASSERT_GE(grains, 8);
  EXPECT_LE(r.probes, std::ceil(std::log2(grains)) + 3);
  testing::ExpectSchedule(p, r, "3x6");
}

// Without a memory limit the simulator's times are the least a schedule's
// orders allow, so with every op held to 1F1B's orders a probe finds a
// schedule at its makespan and none a grain below, while the problem itself
// (nothing held) has one below: zero-bubble orders.
TEST(SatEncoding, KeepHoldsAScheduleOutsideItsNeighbourhood) {
  const Problem p = testing::UnitProblem(4, 8, true);
  const Solution s = Seed(p, "1f1b");
  const int T = sat::Grains(s.sim.objective, 1.0);
  ASSERT_GT(T, 0);
  CaDiCaL::Solver solver;
  sat::Encoding enc(p, T, 1.0, 1.0, solver);
  ASSERT_EQ(enc.Build(40'000'000, [] { return false; }), sat::Encoding::Built::kOk);
  const std::vector<int> held = enc.Keep(s.sim, [](int) { return false; });
  EXPECT_FALSE(held.empty());
  EXPECT_TRUE(enc.Keep(s.sim, [](int) { return true; }).empty());
  const auto probe = [&](int horizon, bool hold) {
    if (hold) {
      for (int lit : held) solver.assume(lit);
    }
    solver.assume(enc.Cap(horizon));
    return solver.solve();
  };
  ASSERT_EQ(probe(T, true), 10);
  StatusOr<Schedule> decoded = OrdersOf(p, enc.Decode());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->compute, s.schedule.compute);
  EXPECT_EQ(probe(T - 1, true), 20);
  EXPECT_EQ(probe(T - 1, false), 10);
}

// Loose: a micro-batch taken out of 1F1B's schedule goes back anywhere (no
// pair with one of its ops is held) while every other op keeps 1F1B's order
// among the others; held strictly it could not move past them.
TEST(SatEncoding, LooseKeepFreesAMicroBatchAndHoldsTheOthers) {
  const Problem p = testing::UnitProblem(4, 8, true);
  const Solution s = Seed(p, "1f1b");
  const int T = sat::Grains(s.sim.objective, 1.0);
  CaDiCaL::Solver solver;
  sat::Encoding enc(p, T, 1.0, 1.0, solver);
  ASSERT_EQ(enc.Build(40'000'000, [] { return false; }), sat::Encoding::Built::kOk);
  const OpSpace space = p.op_space();
  const int out = 3;
  const auto free = [&](int i) { return space.At(i).microbatch == out; };
  const std::vector<int> strict = enc.Keep(s.sim, free), loose = enc.Keep(s.sim, free, true);
  EXPECT_LT(loose.size(), strict.size());
  for (int lit : loose) solver.assume(lit);
  solver.assume(enc.Cap(T));
  ASSERT_EQ(solver.solve(), 10);
  StatusOr<Schedule> decoded = OrdersOf(p, enc.Decode());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  const auto others = [&](std::vector<Op> lane) {
    std::erase_if(lane, [&](const Op& op) { return op.microbatch == out; });
    return lane;
  };
  for (int d = 0; d < p.devices; ++d) {
    EXPECT_EQ(others(decoded->compute[d]), others(s.schedule.compute[d])) << "device " << d;
  }
  // Held strictly, the micro-batch keeps its place too: 1F1B's orders.
  for (int lit : strict) solver.assume(lit);
  solver.assume(enc.Cap(T));
  ASSERT_EQ(solver.solve(), 10);
  decoded = OrdersOf(p, enc.Decode());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->compute, s.schedule.compute);
}

// Windows narrowed to one start each, 1F1B's: the encoding holds that
// schedule and little else (no order to choose), and below its makespan an op
// has no start left.
TEST(SatEncoding, LimitNarrowsEveryOpToItsWindow) {
  const Problem p = testing::UnitProblem(4, 8, true);
  const Solution s = Seed(p, "1f1b");
  const int T = sat::Grains(s.sim.objective, 1.0);
  std::vector<std::pair<int, int>> at(p.op_space().size(), {0, -1});  // copies: none
  for (std::size_t i = 0; i < at.size(); ++i) {
    if (!std::isnan(s.sim.start[i]))
      at[i] = {sat::Grains(s.sim.start[i], 1.0), sat::Grains(s.sim.start[i], 1.0)};
  }
  CaDiCaL::Solver free_solver;
  sat::Encoding free_enc(p, T, 1.0, 1.0, free_solver);
  ASSERT_EQ(free_enc.Build(40'000'000, [] { return false; }), sat::Encoding::Built::kOk);
  CaDiCaL::Solver solver;
  sat::Encoding enc(p, T, 1.0, 1.0, solver);
  enc.Limit(at);
  ASSERT_EQ(enc.Build(40'000'000, [] { return false; }), sat::Encoding::Built::kOk);
  EXPECT_LT(enc.variables() * 10, free_enc.variables());
  ASSERT_EQ(solver.solve(), 10);
  StatusOr<Schedule> decoded = OrdersOf(p, enc.Decode());
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->compute, s.schedule.compute);
  CaDiCaL::Solver below_solver;
  sat::Encoding below(p, T - 1, 1.0, 1.0, below_solver);
  below.Limit(at);
  EXPECT_EQ(below.Build(40'000'000, [] { return false; }), sat::Encoding::Built::kEmpty);
}

// Compute ops held to 1F1B's starts, on a grain a ten-thousandth of an op:
// what is left free, the copies between a forward and its backward, has
// about 10^5 start variables, more than a budget of 10^5 literals allows.
// Build says so before it numbers them (a window of the large neighbourhood
// search once numbered billions of copies' variables, and ran out of memory).
TEST(SatEncoding, CountsTheCopiesStartVariablesAgainstItsBudget) {
  const Problem p = testing::MakeProblem(
      R"("devices": 2, "microbatches": 4,
         "stage_time": {"f": 10000, "b": 10000, "w": 10000}, "offload_time": 10000,
         "memory": {"activation": 1, "limit": 3})");
  const Solution s = Seed(p, "1f1b");
  std::vector<std::pair<int, int>> at(p.op_space().size(), {0, 1'000'000});  // copies: free
  for (std::size_t i = 0; i < at.size(); ++i) {
    if (!std::isnan(s.sim.start[i]))
      at[i] = {sat::Grains(s.sim.start[i], 1.0), sat::Grains(s.sim.start[i], 1.0)};
  }
  const int T = sat::Grains(s.sim.objective, 1.0);
  constexpr std::int64_t kBudget = 100'000;
  CaDiCaL::Solver solver;
  sat::Encoding enc(p, T, 1.0, 1.0, solver);
  enc.Limit(at);
  EXPECT_GT(enc.Estimate(), kBudget);
  sat::Encoding again(p, T, 1.0, 1.0, solver);
  again.Limit(at);
  EXPECT_EQ(again.Build(kBudget, [] { return false; }), sat::Encoding::Built::kTooLarge);
  EXPECT_LT(again.variables(), kBudget);
  // With the budget it needs, the same encoding holds 1F1B.
  CaDiCaL::Solver roomy_solver;
  sat::Encoding roomy(p, T, 1.0, 1.0, roomy_solver);
  roomy.Limit(at);
  ASSERT_EQ(roomy.Build(40'000'000, [] { return false; }), sat::Encoding::Built::kOk);
  EXPECT_GT(roomy.variables(), kBudget / 2);
  EXPECT_EQ(roomy_solver.solve(), 10);
}

// Unit costs, 6 devices, 12 micro-batches, a round trip of 4 per 3 of compute
// and room for 3 activations (auto's best is 45, the bound 42).
Problem SixByTwelveSlowLink() {
  return testing::MakeProblem(
      R"("devices": 6, "microbatches": 12,
         "stage_time": {"f": 1, "b": 1, "w": 1}, "offload_time": 2,
         "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 3})");
}

// The neighbourhoods around the list scheduler's 48 find a better schedule.
void ExpectNeighbourhoodsImproveTheList(const Problem& p, const SatSearchOptions& opt,
                                        const std::string& label) {
  const Solution list = Seed(p, "list");
  ASSERT_DOUBLE_EQ(list.sim.objective, 48);
  std::vector<double> reported;   // on_schedule: each better than the one before
  std::atomic<bool> stop{false};  // after two: the rest of the time adds nothing here
  SatSearchOptions with_report = opt;
  with_report.stop = &stop;
  with_report.on_schedule = [&](const Schedule& s, const SimResult& run) {
    EXPECT_LT(run.objective, reported.empty() ? 48 - kTol : reported.back() - kTol) << label;
    EXPECT_NEAR(Simulate(p, s)->objective, run.objective, kTol) << label;
    reported.push_back(run.objective);
    if (reported.size() >= 2) stop = true;
  };
  const SatSearchResult r = SearchNeighbourhoods(p, list.sim, with_report);
  EXPECT_LT(r.best, 48 - kTol);
  EXPECT_GE(r.neighbourhood_schedules, 1);
  EXPECT_EQ(static_cast<int>(reported.size()), r.neighbourhood_schedules) << label;
  if (!reported.empty()) {
    EXPECT_DOUBLE_EQ(reported.back(), r.best) << label;
  }
  EXPECT_GE(r.best, ComputeLowerBound(p).value - kTol);
  testing::ExpectSchedule(p, r, label);
}

// Within seconds (45 in 1.5-2.1 s, one solver, in 2 of 3 runs).
TEST(SatSearch, NeighbourhoodsImproveAWeakSchedule) {
  const Problem p = SixByTwelveSlowLink();
  ASSERT_TRUE(SatSearchApplies(p));
  SatSearchOptions opt;
  opt.time_limit_s = 4;
  ExpectNeighbourhoodsImproveTheList(p, opt, "6x12");
}

// With a literal budget too small for the whole encoding the neighbourhoods
// encode only their windows, and still improve it.
TEST(SatSearch, WindowNeighbourhoodsWhereTheWholeProblemIsTooLarge) {
  const Problem p = SixByTwelveSlowLink();
  SatSearchOptions opt;
  opt.time_limit_s = 4;
  opt.solvers = 1;
  opt.max_literals = 300'000;
  ASSERT_GT(SatLaneLiterals(p, 47), opt.max_literals);
  ExpectNeighbourhoodsImproveTheList(p, opt, "6x12 windows");
}

// Unit costs, 8 devices, 16 micro-batches, a round trip of 4 per 3 of
// compute, room for 3: below po-keep's 62 the search as auto's polish runs
// it (one solver led by that schedule's times, neighbourhoods where the probe
// is cut short) finds 61. It is stopped once it has: probes below 61 only bound.
TEST(SatSearch, AutosPolishFindsTheSlowLinks61BelowPoKeep) {
  const Problem p = testing::MakeProblem(
      R"("devices": 8, "microbatches": 16, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 3})");
  ASSERT_TRUE(SatSearchApplies(p));
  ASSERT_TRUE(SatSearchIsLarge(p));
  const Solution keep = Seed(p, "po-keep");
  ASSERT_DOUBLE_EQ(keep.sim.objective, 62);
  std::atomic<bool> stop{false};
  SatSession session;
  SatSearchOptions opt;
  opt.time_limit_s = 40;  // a cap; the probe just below the best gets an eighth
  opt.stop = &stop;
  opt.hint = &keep.sim;
  opt.solvers = 1;
  opt.session = &session;
  opt.neighbourhood_share = 0.5;
  opt.on_schedule = [&](const Schedule&, const SimResult& run) {
    if (run.objective <= 61 + kTol) stop = true;
  };
  const SatSearchResult r = SearchTimeIndexed(p, ComputeLowerBound(p).value, 62, opt);
  EXPECT_LE(r.best, 61 + kTol);
  testing::ExpectSchedule(p, r, "8x16");
}

TEST(SatSearch, AppliesOnlyOnAGrid) {
  Problem p = testing::UnitProblem(2, 2, true);
  EXPECT_TRUE(SatSearchApplies(p));
  p.objective = Objective::kDeviceSpan;
  EXPECT_FALSE(SatSearchApplies(p));  // spans start at each device's first op
  p = testing::UnitProblem(2, 2, true);
  p.w.assign(p.stages(), 0.0);
  EXPECT_FALSE(SatSearchApplies(p));  // a W of no length
  p = testing::UnitProblem(2, 2, true);
  p.f[0] = 1.0 / 3;
  EXPECT_FALSE(SatSearchApplies(p));  // no time grain
  p = testing::UnitProblem(2, 2, true);
  p.memory_limit = std::vector<double>{1.5, 1.5};
  p.activation[1] = 1.0 / 3;
  EXPECT_FALSE(SatSearchApplies(p));  // no memory grain
  p.activation[1] = 1;
  EXPECT_TRUE(SatSearchApplies(p));
  p.memory_limit = std::vector<double>{5000, 5000};
  EXPECT_FALSE(SatSearchApplies(p));  // room for more than 1000 grains
}

// Unit costs scaled to 1000000333 (times in picoseconds, say): the horizon
// spans billions of grains of 1, more than an encoding may (sat::kMaxGrains).
// The probes prove nothing there, where their grains once wrapped around an
// int and a probe "proved" no schedule below one twice as long as 1F1B's.
TEST(SatSearch, ProvesNothingWhereTheHorizonSpansTooManyGrains) {
  Problem p = testing::UnitProblem(2, 2, true);
  for (std::vector<double>* v : {&p.f, &p.b, &p.w}) {
    for (double& x : *v) x *= 1000000333;
  }
  ASSERT_TRUE(SatSearchApplies(p));
  ASSERT_DOUBLE_EQ(TimeGrain(p), 1.0);
  const Solution s = Seed(p, "1f1b");
  EXPECT_GT(SatLaneLiterals(p, s.sim.objective), SatSearchOptions{}.max_literals);
  SatSearchOptions opt;
  opt.time_limit_s = 2;
  const SatSearchResult r = SearchTimeIndexed(p, 0, 2 * s.sim.objective, opt);
  EXPECT_FALSE(r.optimal);
  EXPECT_DOUBLE_EQ(r.bound, 0);
}

TEST(SatSearch, StopsWhenToldAndKeepsTheLowerBound) {
  const Problem p = testing::UnitProblem(4, 8, true);
  std::atomic<bool> stop{true};
  SatSearchOptions opt;
  opt.stop = &stop;
  const SatSearchResult r = SearchTimeIndexed(p, 20, 40, opt);
  EXPECT_EQ(r.probes, 0);
  EXPECT_FALSE(r.optimal);
  EXPECT_DOUBLE_EQ(r.bound, 20);
  EXPECT_DOUBLE_EQ(r.best, 40);
}

// Unit costs, 8 devices with two chunks each, 16 micro-batches, a slow host
// link and room for 5 activations: its encoding at a horizon of 123 has 8.7
// million clauses and takes seconds to build (and 1.7 GB), far more than the
// call's 0.4 s.
TEST(SatSearch, KeepsToItsTimeWhileEncoding) {
  const Problem p = testing::MakeProblem(
      R"("devices": 8, "microbatches": 16, "stages_per_device": 2, "placement": "interleaved",
         "stage_time": {"f": 1, "b": 1, "w": 1}, "offload_time": 2,
         "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 5})");
  ASSERT_TRUE(SatSearchApplies(p));
  SatSearchOptions opt;
  opt.time_limit_s = 0.4;
  std::vector<std::string> lines;
  opt.log = [&](const std::string& line) { lines.push_back(line); };
  const auto t0 = std::chrono::steady_clock::now();
  const SatSearchResult r = SearchTimeIndexed(p, 100, 124, opt);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("cut short while encoding"), std::string::npos) << lines[0];
  EXPECT_LT(seconds, 3 * opt.time_limit_s);
  EXPECT_DOUBLE_EQ(r.bound, 100);
  EXPECT_FALSE(r.schedule.has_value());
}

}  // namespace
}  // namespace optpipe
