#include <gtest/gtest.h>

#include "core/checker.h"
#include "core/lower_bound.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

TEST(Methods, RegistryListsEachOnce) {
  std::set<std::string> names;
  for (const MethodInfo& m : Methods()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_FALSE(m.summary.empty());
    EXPECT_EQ(FindMethod(m.name), &m);
  }
  EXPECT_EQ(FindMethod("no-such-method"), nullptr);
  EXPECT_EQ(RunMethod(testing::UnitProblem(2, 2, true), "no-such-method").status().code(),
            StatusCode::kNotFound);
}

// Every method on random heterogeneous problems: a checker-valid schedule whose
// objective equals the simulator's and is never below the lower bound, or a
// clear not-applicable.
TEST(Methods, RandomProblemsGiveValidSchedulesOrSayWhyNot) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    std::uniform_int_distribution<int> dev(1, 8), mb(1, 32), v(1, 2);
    Problem p = testing::RandomProblem(rng, dev(rng), mb(rng), v(rng), trial % 2 == 0);
    if (trial % 3 == 0) p.objective = Objective::kDeviceSpan;
    const double lb = ComputeLowerBound(p).value;
    SearchOptions quick;  // auto: a deterministic, small search budget
    quick.max_evaluations = 64;
    quick.threads = 1;
    for (const MethodInfo& m : Methods()) {
      StatusOr<Solution> sol = RunMethod(p, m.name, quick);
      if (!m.applicable(p).ok()) {
        EXPECT_EQ(sol.status().code(), StatusCode::kNotApplicable) << m.name;
        EXPECT_NE(sol.status().message().find("not applicable"), std::string::npos);
        continue;
      }
      ASSERT_TRUE(sol.ok()) << m.name << ": " << sol.status().message();
      const CheckReport rep = CheckSchedule(p, ToTimed(p, sol->schedule, sol->sim));
      EXPECT_TRUE(rep.valid()) << m.name << ": " << rep.errors.front();
      EXPECT_NEAR(rep.objective, sol->sim.objective, 1e-9);
      EXPECT_GE(sol->sim.objective, lb - 1e-9) << m.name;
    }
  }
}

TEST(Methods, OneFOneBNeedsOneStagePerDevice) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath("unit-4x8-vshape"));
  ASSERT_TRUE(p.ok());
  StatusOr<Solution> sol = RunMethod(*p, "1f1b");
  EXPECT_EQ(sol.status().code(), StatusCode::kNotApplicable);
  EXPECT_NE(sol.status().message().find("stages_per_device"), std::string::npos);
}

// 1F1B on the Llama case needs 51.3 on device 0: 30.5 static + 8 activations of
// 2.6, minus nothing freed before its first B; PipeOffload exists for this.
TEST(Methods, MemoryInfeasibleSaysWhatItWouldNeed) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath("llama-8dev-offload"));
  ASSERT_TRUE(p.ok());
  StatusOr<Solution> sol = RunMethod(*p, "1f1b");
  ASSERT_EQ(sol.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(sol.status().message().find("needs peak memory [51.3"), std::string::npos)
      << sol.status().message();
  p->memory_limit.reset();
  sol = RunMethod(*p, "1f1b");
  ASSERT_TRUE(sol.ok());
  EXPECT_NEAR(sol->sim.peak_memory[0], 30.5 + 8 * 2.6, 1e-9);
}

}  // namespace
}  // namespace optpipe
