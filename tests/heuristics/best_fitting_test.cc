#include "heuristics/best_fitting.h"

#include <gtest/gtest.h>

#include <atomic>

#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

// Fused unit costs, 4 devices x 8 micro-batches, activation 1: GPipe holds all
// 8 activations on every device, 1F1B d - i on rank i; both take
// (M + D - 1)(f + b) = 22 with f = 1, b = 1 (fused: b + w). A tie broken by
// memory, so 1F1B wins even when it comes second.
Problem Fused(double limit = 0) {
  std::string mem = "\"memory\": {\"activation\": 1";
  if (limit > 0) mem += ", \"limit\": " + std::to_string(limit);
  return testing::MakeProblem(
      "\"name\": \"fused\", \"devices\": 4, \"microbatches\": 8, \"split_backward\": false, "
      "\"stage_time\": {\"f\": 1, \"b\": 1}, " +
      mem + "}");
}

struct Pair {
  Schedule gpipe, ofob;
  explicit Pair(const Problem& p) {
    Problem free = p;
    free.memory_limit.reset();
    gpipe = *BuildGPipe(free);
    ofob = *BuildOneFOneB(free);
  }
  std::optional<Schedule> operator()(int i) const { return i == 0 ? gpipe : ofob; }
};

std::string Label(int i) { return i == 0 ? "gpipe" : "1f1b"; }

TEST(BestFitting, EqualObjectivesGoToTheLowerPeak) {
  const Problem p = Fused();
  const Pair make(p);
  ASSERT_DOUBLE_EQ(Simulate(p, make.gpipe)->makespan, 22);
  ASSERT_DOUBLE_EQ(Simulate(p, make.ofob)->makespan, 22);
  int chosen = -1;
  StatusOr<Schedule> s = BestFitting(p, "order", 2, make, Label, {}, &chosen);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(chosen, 1);
  EXPECT_EQ(ToText(p, *s), ToText(p, make.ofob));
}

TEST(BestFitting, OnlyWhatFitsTheLimitCounts) {
  const Problem p = Fused(4);  // 1F1B's peak on rank 0; GPipe needs 8
  const Pair make(p);
  int chosen = -1;
  StatusOr<Schedule> s = BestFitting(
      p, "order", 2, [&](int) { return std::optional(make.gpipe); }, Label, {}, &chosen);
  ASSERT_EQ(s.status().code(), StatusCode::kInfeasible);
  // GPipe's order cannot run at all under 4: it needs all 8 on every device.
  EXPECT_NE(s.status().message().find("needs peak memory [8, 8, 8, 8]"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("the leanest, gpipe,"), std::string::npos)
      << s.status().message();
  ASSERT_TRUE(BestFitting(p, "order", 2, make, Label, {}, &chosen).ok());
  EXPECT_EQ(chosen, 1);
}

TEST(BestFitting, StopTokenLeavesOnlyTheFirstCandidate) {
  const Problem p = Fused();
  const Pair make(p);
  std::atomic<bool> stop{true};
  SearchOptions opt;
  opt.stop = &stop;
  std::atomic<int> built{0};
  int chosen = -1;
  const auto counting = [&](int i) {
    ++built;
    return make(i);
  };
  ASSERT_TRUE(BestFitting(p, "order", 2, counting, Label, opt, &chosen).ok());
  EXPECT_EQ(built.load(), 1);
  EXPECT_EQ(chosen, 0);  // GPipe, the only one scored

  // The deterministic mode ignores the clock: every candidate is scored.
  SearchOptions det;
  det.time_limit_s = 0;
  det.max_evaluations = 1;
  built = 0;
  ASSERT_TRUE(BestFitting(p, "order", 40, counting, Label, det, &chosen).ok());
  EXPECT_EQ(built.load(), 40);
  EXPECT_EQ(chosen, 1);
}

// When nothing fits, finding what the leanest candidate needs runs on the
// search's clock too: stopped after 3 candidates, it re-runs only the first
// without the limit (no bisection of the raise: its peak without a limit).
TEST(BestFitting, WhatTheLeanestNeedsKeepsToTheClock) {
  const Problem p = Fused(4);
  const Pair make(p);
  std::atomic<bool> stop{false};
  SearchOptions opt;
  opt.stop = &stop;
  opt.threads = 1;
  int built = 0;
  const auto gpipe_only = [&](int i) {
    ++built;
    if (i == 2) stop = true;
    return std::optional(make.gpipe);
  };
  StatusOr<Schedule> s = BestFitting(p, "order", 8, gpipe_only, Label, opt);
  ASSERT_EQ(s.status().code(), StatusCode::kInfeasible);
  EXPECT_EQ(built, 4);  // 0, 1, 2 under the limit; 0 again without it
  EXPECT_NE(s.status().message().find("no order fits (3 tried; 1 re-run without the limit in the "
                                      "time given); the leanest, gpipe, needs peak memory [8, 8"),
            std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace optpipe
