#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <random>

#include "core/checker.h"
#include "core/lower_bound.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

using testing::UnitProblem;

using testing::Solve;  // run through the registry, then check independently

double MaxPeak(const SimResult& r) {
  return *std::max_element(r.peak_memory.begin(), r.peak_memory.end());
}

// Unit costs (F = B = W = 1, comm 0, one activation per micro-batch): the
// bubbles the Zero Bubble paper derives. 1F1B (fused) takes (m + p - 1) * 3;
// ZB-H1 leaves (p - 1)(F + B - W) after the m(F + B + W) of work, a third of
// 1F1B's (p - 1)(F + B + W); ZB-H2 leaves none on any device: each device runs
// m(F + B + W) without a gap, device p-1 starting p - 1 after device 0.
TEST(ZeroBubble, UnitCostsMatchThePaper) {
  Problem fused = UnitProblem(4, 8, false);
  EXPECT_DOUBLE_EQ(Solve(fused, "1f1b").sim.makespan, 33.0);

  Problem p = UnitProblem(4, 8, true);
  const Solution h1 = Solve(p, "zb-h1");
  EXPECT_DOUBLE_EQ(h1.sim.makespan, 27.0);  // 24 + 3 * (1 + 1 - 1)
  const Solution h2 = Solve(p, "zb-h2");
  EXPECT_DOUBLE_EQ(h2.sim.device_span, 24.0);
  EXPECT_DOUBLE_EQ(h2.sim.makespan, 27.0);
  for (double span : h2.sim.span) EXPECT_DOUBLE_EQ(span, 24.0);

  Problem fused8 = UnitProblem(8, 16, false);
  EXPECT_DOUBLE_EQ(Solve(fused8, "1f1b").sim.makespan, 69.0);
  Problem p8 = UnitProblem(8, 16, true);
  EXPECT_DOUBLE_EQ(Solve(p8, "zb-h1").sim.makespan, 55.0);  // 48 + 7
  EXPECT_DOUBLE_EQ(Solve(p8, "zb-h2").sim.device_span, 48.0);
}

// ZB-H1 stays within 1F1B's peak (p activations, reached on device 0);
// ZB-H2 spends up to 2p - 1 activations for its zero bubble.
TEST(ZeroBubble, PeakMemoryMatchesThePaper) {
  Problem p = UnitProblem(4, 8, true);
  const Solution one_f_one_b = Solve(p, "1f1b");
  const Solution h1 = Solve(p, "zb-h1");
  EXPECT_DOUBLE_EQ(MaxPeak(h1.sim), MaxPeak(one_f_one_b.sim));
  EXPECT_DOUBLE_EQ(h1.sim.peak_memory[0], 4.0);
  EXPECT_DOUBLE_EQ(Solve(p, "zb-h2").sim.peak_memory[0], 7.0);
}

// With a fused backward there is no W to move: ZB-H1 is 1F1B.
TEST(ZeroBubble, FusedBackwardDegradesToOneFOneB) {
  for (auto [D, M] : {std::pair{4, 8}, {8, 16}, {3, 2}}) {
    Problem p = UnitProblem(D, M, false);
    const Solution h1 = Solve(p, "zb-h1");
    const Solution base = Solve(p, "1f1b");
    EXPECT_DOUBLE_EQ(h1.sim.makespan, base.sim.makespan);
    EXPECT_EQ(h1.sim.peak_memory, base.sim.peak_memory);
    EXPECT_LE(Solve(p, "zb-h2").sim.makespan, base.sim.makespan + 1e-9);
  }
}

TEST(ZeroBubble, NeedsOneStagePerDevice) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath("unit-4x8-vshape"));
  ASSERT_TRUE(p.ok());
  for (const char* m : {"zb-h1", "zb-h2"}) {
    StatusOr<Solution> s = RunMethod(*p, m);
    EXPECT_EQ(s.status().code(), StatusCode::kNotApplicable) << m;
    EXPECT_NE(s.status().message().find("stages_per_device = 1"), std::string::npos)
        << s.status().message();
  }
}

// The knob is the memory cap: ZB-H2 under a limit that only ZB-H1's memory
// fits falls back to ZB-H1's cap (same makespan, within the limit); between
// the two it keeps the best cap that fits; below one activation nothing fits
// and the message says what ZB-H1 would need.
TEST(ZeroBubble, MemoryCapIsChosenToFitTheLimit) {
  Problem p = UnitProblem(4, 8, true);
  p.memory_limit = std::vector<double>(4, 4.0);
  const Solution h2 = Solve(p, "zb-h2");
  EXPECT_LE(MaxPeak(h2.sim), 4.0 + 1e-9);
  EXPECT_DOUBLE_EQ(h2.sim.makespan, 27.0);

  p.memory_limit = std::vector<double>(4, 5.5);
  const Solution mid = Solve(p, "zb-h2");
  EXPECT_LE(MaxPeak(mid.sim), 5.5 + 1e-9);
  EXPECT_LE(mid.sim.makespan, 27.0 + 1e-9);

  p.memory_limit = std::vector<double>(4, 0.5);
  for (const char* m : {"zb-h1", "zb-h2"}) {
    StatusOr<Solution> s = RunMethod(p, m);
    ASSERT_EQ(s.status().code(), StatusCode::kInfeasible) << m;
    EXPECT_NE(s.status().message().find("4 activations per device, needs peak memory [4"),
              std::string::npos)
        << s.status().message();
    EXPECT_NE(s.status().message().find("against memory.limit [0.5"), std::string::npos);
  }
}

// ZB-H2 scans its caps on the caller's clock: stopped (or out of time) it
// keeps the first cap it always builds, the published 2p - 1 activations; a
// budget of evaluations (the deterministic mode) ignores the clock. On this
// heterogeneous problem a later cap is better, so the cut shows.
TEST(ZeroBubble, H2ScansItsCapsOnTheCallersClock) {
  std::mt19937 rng(17);
  const Problem p = testing::RandomProblem(rng, 4, 8, 1, true);
  const Solution full = Solve(p, "zb-h2");
  std::atomic<bool> stop{true};
  SearchOptions stopped;
  stopped.stop = &stop;
  StatusOr<Solution> first = RunMethod(p, "zb-h2", stopped);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_GT(first->sim.makespan, full.sim.makespan + 0.1);
  // More than ZB-H1's cap of 4 activations on device 0: a deeper cap.
  EXPECT_GT(first->sim.peak_memory[0], p.static_memory[0] + 4 * p.activation[0]);
  SearchOptions timeless;
  timeless.time_limit_s = 0;
  timeless.max_evaluations = 1;
  StatusOr<Solution> all = RunMethod(p, "zb-h2", timeless);
  ASSERT_TRUE(all.ok());
  EXPECT_DOUBLE_EQ(all->sim.makespan, full.sim.makespan);
}

// Random heterogeneous problems (times, comm, memory, placement, limits): a
// checked schedule at or above the lower bound, or infeasible with the memory
// it would need.
TEST(ZeroBubble, RandomProblemsGiveValidSchedulesOrSayWhatTheyNeed) {
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> dev(1, 8), mb(1, 32);
  std::uniform_real_distribution<double> tight(0.2, 1.2);
  for (int trial = 0; trial < 40; ++trial) {
    const int D = dev(rng), M = mb(rng);
    Problem p = testing::RandomProblem(rng, D, M, 1, trial % 3 != 0);
    if (trial % 4 == 1) {  // any device order works: stage s on device perm[s]
      std::iota(p.stage_device.begin(), p.stage_device.end(), 0);
      std::shuffle(p.stage_device.begin(), p.stage_device.end(), rng);
    }
    if (trial % 5 == 2) p.objective = Objective::kDeviceSpan;
    const bool limited = trial % 2 == 1;
    if (limited) {
      std::vector<double> limit = p.static_memory;
      for (int s = 0; s < p.stages(); ++s) {
        limit[p.stage_device[s]] += tight(rng) * D * p.activation[s];
      }
      p.memory_limit = limit;
    }
    const double lb = ComputeLowerBound(p).value;
    for (const char* m : {"zb-h1", "zb-h2"}) {
      ASSERT_TRUE(FindMethod(m)->applicable(p).ok());
      StatusOr<Solution> s = RunMethod(p, m);
      if (!s.ok()) {
        EXPECT_TRUE(limited) << m << ": " << s.status().message();
        EXPECT_EQ(s.status().code(), StatusCode::kInfeasible) << s.status().message();
        EXPECT_NE(s.status().message().find("needs peak memory ["), std::string::npos)
            << s.status().message();
        continue;
      }
      const CheckReport rep = CheckSchedule(p, ToTimed(p, s->schedule, s->sim));
      EXPECT_TRUE(rep.valid()) << m << ": " << rep.errors.front();
      EXPECT_NEAR(rep.objective, s->sim.objective, 1e-9) << m;
      EXPECT_GE(s->sim.objective, lb - 1e-9) << m;
    }
  }
}

}  // namespace
}  // namespace optpipe
