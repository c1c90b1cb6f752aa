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

// v chunks per device in the interleaved placement; a device's F, B, W and
// activation are split evenly between its chunks (unit costs per device).
Problem UnitChunks(int D, int M, int v, bool split, double comm = 0) {
  std::ostringstream os;
  const double x = 1.0 / v;
  os << "\"name\": \"unit-chunks\", \"devices\": " << D << ", \"microbatches\": " << M
     << ", \"stages_per_device\": " << v << ", \"placement\": \"interleaved\", "
     << "\"split_backward\": " << (split ? "true" : "false") << ", \"stage_time\": {\"f\": " << x
     << ", \"b\": " << x << ", \"w\": " << x << "}, \"comm_time\": " << comm
     << ", \"memory\": {\"activation\": " << x << ", \"freed_by_b\": " << x / 2 << "}";
  return testing::MakeProblem(os.str());
}

using testing::Solve;  // run through the registry, then check independently

double MaxPeak(const SimResult& r) {
  return *std::max_element(r.peak_memory.begin(), r.peak_memory.end());
}

// Megatron's bubble (D - 1)(F + B) / v for a device's whole-model F and B: on
// unit costs with a fused backward, 24 of work + 3 * 3 / 2 = 28.5, against
// 1F1B's 24 + 3 * 3 = 33. With a split backward (W right after its B) the
// backward chain no longer waits for W: 27.
TEST(Interleaved1F1B, UnitCostsMatchMegatron) {
  EXPECT_DOUBLE_EQ(Solve(UnitChunks(4, 8, 2, false), "1f1b-i").sim.makespan, 28.5);
  EXPECT_DOUBLE_EQ(Solve(UnitChunks(4, 8, 2, true), "1f1b-i").sim.makespan, 27.0);
  // More chunks, smaller bubble: (D - 1) * 3 / 4.
  EXPECT_DOUBLE_EQ(Solve(UnitChunks(4, 8, 4, false), "1f1b-i").sim.makespan, 24 + 9.0 / 4);
}

// Megatron's order: device r runs (D - r - 1) * 2 + (v - 1) * g warm-up
// forwards in the schedule table's order (groups of g micro-batches through
// chunk 0, then chunk 1), with the last group the remainder when g does not
// divide M. On 2 devices with M = 5 the best g is 3, and the order is the
// table of Megatron's own example (PP = 2, M = 5, VP = 2, N = 3, from
// Megatron-LM's documentation of its pipeline schedules).
TEST(Interleaved1F1B, FollowsMegatronsScheduleTable) {
  Problem p = UnitChunks(2, 5, 2, false);
  const Solution s = Solve(p, "1f1b-i");
  const std::vector<std::pair<int, int>> table = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1},
                                                  {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}};
  for (int r = 0; r < 2; ++r) {
    std::vector<Op> forwards, expected;
    for (const Op& op : s.schedule.compute[r]) {
      if (op.type == OpType::kF) forwards.push_back(op);
    }
    for (auto [m, c] : table) expected.push_back({OpType::kF, c * 2 + r, m});
    EXPECT_EQ(forwards, expected) << "device " << r;
    // The first backward follows the warm-up and one more forward.
    const auto first_b = std::find_if(s.schedule.compute[r].begin(), s.schedule.compute[r].end(),
                                      [](const Op& op) { return op.type == OpType::kB; });
    EXPECT_EQ(first_b - s.schedule.compute[r].begin(), (2 - r - 1) * 2 + 3 + 1) << "device " << r;
    EXPECT_EQ(first_b->stage, 2 + r);  // the backward starts from the last chunk
  }
}

TEST(Interleaved1F1B, NeedsChunksInTheInterleavedPlacementAndEnoughMicrobatches) {
  StatusOr<Solution> s = RunMethod(testing::UnitProblem(4, 8, true), "1f1b-i");
  EXPECT_EQ(s.status().code(), StatusCode::kNotApplicable);
  EXPECT_NE(s.status().message().find("stages_per_device >= 2"), std::string::npos);
  StatusOr<Problem> v = LoadProblem(testing::CasePath("unit-4x8-vshape"));
  ASSERT_TRUE(v.ok());
  s = RunMethod(*v, "1f1b-i");
  EXPECT_EQ(s.status().code(), StatusCode::kNotApplicable);
  EXPECT_NE(s.status().message().find("placement \"interleaved\""), std::string::npos);
  // Megatron's g lies in [D, M].
  s = RunMethod(UnitChunks(4, 3, 2, true), "1f1b-i");
  EXPECT_EQ(s.status().code(), StatusCode::kNotApplicable);
  EXPECT_NE(s.status().message().find("microbatches >= devices"), std::string::npos);
}

// The knob is g. With comm time a larger g hides the transfers but keeps more
// activations in flight; under a tight limit g shrinks back to the default D;
// when not even that fits, the message says what it would need.
TEST(Interleaved1F1B, GroupSizeShrinksUnderATightLimit) {
  Problem p = UnitChunks(4, 8, 2, true, 0.5);
  const Solution free = Solve(p, "1f1b-i");
  EXPECT_GT(MaxPeak(free.sim), 5.5);  // a larger g than D = 4 pays off

  p.memory_limit = std::vector<double>(4, 5.5);  // g = D's peak on device 0
  const Solution tight = Solve(p, "1f1b-i");
  EXPECT_LE(MaxPeak(tight.sim), 5.5 + 1e-9);
  EXPECT_GT(tight.sim.makespan, free.sim.makespan);

  p.memory_limit = std::vector<double>(4, 5.0);
  StatusOr<Solution> s = RunMethod(p, "1f1b-i");
  ASSERT_EQ(s.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(s.status().message().find("g = 4, needs peak memory [5.5, 4.5, 3.5, 2.5]"),
            std::string::npos)
      << s.status().message();
}

// Random heterogeneous problems with 2 to 4 chunks, comm, limits: a checked
// schedule at or above the lower bound, or infeasible with what it would need
// (or not applicable, with fewer micro-batches than devices).
TEST(Interleaved1F1B, RandomProblemsGiveValidSchedulesOrSayWhatTheyNeed) {
  std::mt19937 rng(1729);
  std::uniform_int_distribution<int> dev(1, 8), mb(1, 32), chunks(2, 4);
  std::uniform_real_distribution<double> tight(0.2, 1.2);
  for (int trial = 0; trial < 40; ++trial) {
    const int D = dev(rng), M = mb(rng), v = trial % 3 == 0 ? chunks(rng) : 2;
    Problem p = testing::RandomProblem(rng, D, M, v, trial % 2 == 0);
    if (trial % 5 == 2) p.objective = Objective::kDeviceSpan;
    const bool limited = trial % 3 == 1;
    if (limited) {
      std::vector<double> limit = p.static_memory;
      for (int s = 0; s < p.stages(); ++s) {
        limit[p.stage_device[s]] += tight(rng) * D * p.activation[s];
      }
      p.memory_limit = limit;
    }
    StatusOr<Solution> s = RunMethod(p, "1f1b-i");
    if (M < D) {
      EXPECT_EQ(s.status().code(), StatusCode::kNotApplicable) << s.status().message();
      continue;
    }
    ASSERT_TRUE(Interleaved1F1BApplies(p).ok());
    if (!s.ok()) {
      EXPECT_TRUE(limited) << s.status().message();
      EXPECT_EQ(s.status().code(), StatusCode::kInfeasible) << s.status().message();
      EXPECT_NE(s.status().message().find("needs peak memory ["), std::string::npos)
          << s.status().message();
      continue;
    }
    const CheckReport rep = CheckSchedule(p, ToTimed(p, s->schedule, s->sim));
    EXPECT_TRUE(rep.valid()) << rep.errors.front();
    EXPECT_NEAR(rep.objective, s->sim.objective, 1e-9);
    EXPECT_GE(s->sim.objective, ComputeLowerBound(p).value - 1e-9);
  }
}

}  // namespace
}  // namespace optpipe
