#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "core/checker.h"
#include "core/lower_bound.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

// Two chunks per device in a V, each half of a unit device: f = b = w = 0.5 and
// activation 0.5 per chunk, so one device's micro-batch is F + B + W = 3 and
// one activation (both chunks) is 1, as in the unit v = 1 problems.
Problem UnitV(int D, int M, bool split, double freed_by_b = 0.25) {
  std::ostringstream os;
  os << "\"name\": \"unit-v\", \"devices\": " << D << ", \"microbatches\": " << M
     << ", \"stages_per_device\": 2, \"placement\": \"vshape\", \"split_backward\": "
     << (split ? "true" : "false") << ", \"stage_time\": {\"f\": 0.5, \"b\": 0.5, \"w\": 0.5}, "
     << "\"memory\": {\"activation\": 0.5, \"freed_by_b\": " << freed_by_b << "}";
  return testing::MakeProblem(os.str());
}

using testing::Solve;  // run through the registry, then check independently

// Peak activations: peak memory minus static memory, in whole-device activations.
double PeakActivations(const Problem& p, const SimResult& r) {
  double peak = 0;
  for (int d = 0; d < p.devices; ++d) peak = std::max(peak, r.peak_memory[d] - p.static_memory[d]);
  return peak;
}

// ZB-V: zero bubble at 1F1B's memory. Every device works m(F + B + W) = 24
// without a gap; device 3 starts 1.5 (three half-stage forwards) after device 0.
TEST(VSchedules, ZBVHasZeroBubbleAtOneFOneBMemory) {
  Problem p = UnitV(4, 8, true);
  const Solution zbv = Solve(p, "zb-v");
  EXPECT_DOUBLE_EQ(zbv.sim.device_span, 24.0);
  EXPECT_DOUBLE_EQ(zbv.sim.makespan, 25.5);
  for (double span : zbv.sim.span) EXPECT_DOUBLE_EQ(span, 24.0);
  const Solution one_f_one_b = Solve(testing::UnitProblem(4, 8, true), "1f1b");
  EXPECT_DOUBLE_EQ(PeakActivations(p, zbv.sim), 4.0);
  EXPECT_DOUBLE_EQ(one_f_one_b.sim.peak_memory[0], 4.0);

  EXPECT_DOUBLE_EQ(Solve(UnitV(8, 16, true), "zb-v").sim.makespan, 51.5);
}

// V-Half and V-Min: the paper's building blocks at (p + 2) / 2 = 3 and 2
// activations against 1F1B's p = 4, for a little more time than ZB-V.
TEST(VSchedules, VHalfAndVMinTradeTimeForMemory) {
  Problem p = UnitV(4, 8, true);
  const Solution half = Solve(p, "v-half");
  EXPECT_DOUBLE_EQ(half.sim.makespan, 26.5);
  EXPECT_DOUBLE_EQ(PeakActivations(p, half.sim), 3.0);
  const Solution min = Solve(p, "v-min");
  EXPECT_DOUBLE_EQ(min.sim.makespan, 29.5);
  EXPECT_DOUBLE_EQ(PeakActivations(p, min.sim), 2.0);

  // The same peaks when, as in the paper's accounting, an activation is held
  // until its W.
  Problem held = UnitV(4, 8, true, 0.0);
  EXPECT_DOUBLE_EQ(PeakActivations(held, Solve(held, "v-half").sim), 3.0);
  EXPECT_DOUBLE_EQ(PeakActivations(held, Solve(held, "v-min").sim), 2.0);

  Problem p8 = UnitV(8, 16, true);
  EXPECT_DOUBLE_EQ(PeakActivations(p8, Solve(p8, "v-half").sim), 5.0);  // (8 + 2) / 2
  EXPECT_LE(PeakActivations(p8, Solve(p8, "v-min").sim), 8.0 / 2);
}

// Every size, down to a single device and fewer micro-batches than devices,
// gives valid orders for both backward kinds.
TEST(VSchedules, BuildingBlocksWorkForEverySize) {
  for (int D = 1; D <= 8; ++D) {
    for (int M : {1, 2, 3, D, 2 * D + 1}) {
      for (bool split : {true, false}) {
        Problem p = UnitV(D, M, split);
        for (const char* m : {"zb-v", "v-half", "v-min"}) {
          SCOPED_TRACE(std::string(m) + " D=" + std::to_string(D) + " M=" + std::to_string(M));
          Solve(p, m);
        }
      }
    }
  }
}

TEST(VSchedules, NeedTwoChunksInAV) {
  for (const char* m : {"zb-v", "v-half", "v-min"}) {
    StatusOr<Solution> s = RunMethod(testing::UnitProblem(4, 8, true), m);
    EXPECT_EQ(s.status().code(), StatusCode::kNotApplicable) << m;
    EXPECT_NE(s.status().message().find("stages_per_device = 2"), std::string::npos);
    Problem interleaved = UnitV(4, 8, true);
    interleaved.stage_device = *PlaceStages("interleaved", 4, 2);
    s = RunMethod(interleaved, m);
    EXPECT_EQ(s.status().code(), StatusCode::kNotApplicable) << m;
    EXPECT_NE(s.status().message().find("placement \"vshape\""), std::string::npos);
  }
}

// ZB-V's cap is 1F1B's memory; under a lower limit the limit becomes the cap.
// V-Half's block has no knob: below its memory it says what it needs.
TEST(VSchedules, MemoryLimit) {
  Problem p = UnitV(4, 8, true);
  p.memory_limit = std::vector<double>(4, 3.0);
  const Solution zbv = Solve(p, "zb-v");
  EXPECT_LE(PeakActivations(p, zbv.sim), 3.0 + 1e-9);
  EXPECT_GT(zbv.sim.makespan, 25.5);
  EXPECT_DOUBLE_EQ(Solve(p, "v-half").sim.makespan, 26.5);

  p.memory_limit = std::vector<double>(4, 2.5);
  StatusOr<Solution> s = RunMethod(p, "v-half");
  ASSERT_EQ(s.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(s.status().message().find("needs peak memory [3, 3, 3, 3] against memory.limit [2.5"),
            std::string::npos)
      << s.status().message();
  EXPECT_LE(PeakActivations(p, Solve(p, "v-min").sim), 2.0 + 1e-9);

  p.memory_limit = std::vector<double>(4, 0.75);  // less than both chunks' activations
  s = RunMethod(p, "zb-v");
  ASSERT_EQ(s.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(s.status().message().find("needs peak memory [4, 4, 4, 4]"), std::string::npos)
      << s.status().message();
}

// Random heterogeneous V problems (times, comm, memory, limits): a checked
// schedule at or above the lower bound, or infeasible with what it would need.
TEST(VSchedules, RandomProblemsGiveValidSchedulesOrSayWhatTheyNeed) {
  std::mt19937 rng(405);
  std::uniform_int_distribution<int> dev(1, 8), mb(1, 32);
  std::uniform_real_distribution<double> tight(0.2, 1.2);
  for (int trial = 0; trial < 30; ++trial) {
    const int D = dev(rng), M = mb(rng);
    Problem p = testing::RandomProblem(rng, D, M, 2, trial % 3 != 0);
    p.placement = "vshape";
    p.stage_device = *PlaceStages("vshape", D, 2);
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
    for (const char* m : {"zb-v", "v-half", "v-min"}) {
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
