#include "core/planner/plan.h"

#include <gtest/gtest.h>

#include "core/checker.h"
#include "core/format.h"
#include "core/planner/config.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ModelConfig Model(const std::string& name) {
  StatusOr<ModelConfig> m =
      LoadModelConfig(std::string(OPTPIPE_SOURCE_DIR) + "/tests/cases/models/" + name + ".json");
  EXPECT_TRUE(m.ok()) << m.status().message();
  return *m;
}

PlanOptions Shape(int devices, int v, int microbatches) {
  PlanOptions o;
  o.devices = devices;
  o.stages_per_device = v;
  o.microbatches = microbatches;
  return o;
}

// A hardware file out of any real range (1e-300 TFLOP/s: every time
// infinite) is bad input, named by the field it breaks.
TEST(Plan, HardwareOutOfRangeIsBadInput) {
  Hardware hw = *HardwarePreset("h100");
  hw.peak_tflops = 1e-300;
  StatusOr<Plan> plan = BuildPlan(BuildCosts(Model("llama-8b"), hw), hw, Shape(8, 1, 4));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message().rfind(
                "the model and hardware give an invalid problem: stage_time", 0),
            0u)
      << plan.status().message();
}

TEST(Plan, Gpt105bOnEightDevicesLoadsValidatesAndSchedules) {
  const Hardware hw = *HardwarePreset("h100");
  const ModelCosts c = BuildCosts(Model("gpt-10.5b"), hw);
  StatusOr<Plan> plan = BuildPlan(c, hw, Shape(8, 1, 16));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // Through the file format and back.
  StatusOr<Problem> p = ParseProblem(ToJson(plan->problem));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, plan->problem);
  EXPECT_TRUE(Validate(*p).ok());
  EXPECT_EQ(p->devices, 8);
  EXPECT_EQ(p->stages(), 8);
  ASSERT_TRUE(p->memory_limit);
  EXPECT_EQ((*p->memory_limit)[0], 80);
  ASSERT_TRUE(p->offload_allowed());
  EXPECT_EQ(p->host_links.size(), 8u);  // H100: one host link per GPU

  // Every layer in exactly one stage; embedding first, head last; F/B/W and
  // memory are the checkpoint plan's.
  ASSERT_EQ(plan->stages.size(), 8u);
  EXPECT_EQ(plan->stages.front().first, 0);
  EXPECT_EQ(plan->stages.back().last, 39);
  for (std::size_t s = 0; s < 8; ++s) {
    const StagePlan& st = plan->stages[s];
    if (s > 0) {
      EXPECT_EQ(st.first, plan->stages[s - 1].last + 1);
    }
    EXPECT_DOUBLE_EQ(p->f[s], st.checkpoints.f);
    EXPECT_DOUBLE_EQ(p->b[s], st.checkpoints.b);
    EXPECT_DOUBLE_EQ(p->activation[s], st.checkpoints.activation / kGiB);
    EXPECT_LE(st.checkpoints.need, st.budget);
    EXPECT_DOUBLE_EQ((*p->offload)[s], st.checkpoints.activation / c.host_bytes_per_ms);
    EXPECT_LE(st.time(), plan->objective + 1e-9);
  }
  EXPECT_LE(plan->objective, plan->even_objective);

  StatusOr<Solution> sol = RunMethod(*p, "list");
  ASSERT_TRUE(sol.ok()) << sol.status().message();
  const CheckReport rep = CheckSchedule(*p, ToTimed(*p, sol->schedule, sol->sim));
  EXPECT_TRUE(rep.valid()) << (rep.errors.empty() ? "" : rep.errors[0]);
  // 1F1B, whose in-flight depth the plan sizes memory for, fits as well.
  EXPECT_TRUE(RunMethod(*p, "1f1b").ok());
}

TEST(Plan, MemoryPressureMakesTheDpBeatTheEvenSplit) {
  const Hardware hw = *HardwarePreset("h100");
  ModelConfig m = Model("gpt-10.5b");
  m.microbatch_size = 2;
  StatusOr<Plan> plan = BuildPlan(BuildCosts(m, hw), hw, Shape(8, 1, 16));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_LT(plan->objective, plan->even_objective);
  // Stage 0 holds 8 micro-batches and must recompute; the last holds one and need not.
  EXPECT_GT(plan->stages.front().checkpoints.recompute, 0);
  EXPECT_EQ(plan->stages.back().checkpoints.recompute, 0);
  EXPECT_TRUE(RunMethod(plan->problem, "1f1b").ok());
}

TEST(Plan, InterleavedStagesAndSharedHostLinks) {
  const Hardware hw = *HardwarePreset("a100");
  const ModelCosts c = BuildCosts(Model("gpt-5.8b"), hw);
  StatusOr<Plan> plan = BuildPlan(c, hw, Shape(4, 2, 8));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const Problem& p = plan->problem;
  EXPECT_EQ(p.stages(), 8);
  EXPECT_EQ(p.stage_device, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(p.host_links, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(Validate(p).ok());
  EXPECT_TRUE(RunMethod(p, "list").ok());
}

TEST(Plan, InFlightFollowsOneFOneBAndInterleavedWarmUp) {
  Problem shape;
  shape.devices = 4;
  shape.microbatches = 8;
  shape.stage_device = {0, 1, 2, 3};
  EXPECT_EQ(InFlight(shape, 0), 4);
  EXPECT_EQ(InFlight(shape, 3), 1);
  shape.microbatches = 2;
  EXPECT_EQ(InFlight(shape, 0), 2);
  // v = 2: device 0 warms up 2*(4-0-1) + (2-1)*4 = 10 chunks, + 1 in steady
  // state = 11 over its 2 stages -> 6 each; device 3: 0 + 4 + 1 = 5 -> 3.
  shape.microbatches = 8;
  shape.stages_per_device = 2;
  shape.stage_device = {0, 1, 2, 3, 0, 1, 2, 3};
  EXPECT_EQ(InFlight(shape, 0), 6);
  EXPECT_EQ(InFlight(shape, 7), 3);
}

TEST(Plan, SaysWhatTheClosestPartitionNeedsWhenNothingFits) {
  const Hardware hw = *HardwarePreset("h100");
  StatusOr<Plan> plan = BuildPlan(BuildCosts(Model("gpt-42.9b"), hw), hw, Shape(8, 1, 16));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(plan.status().message().find("needs"), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("GiB on device"), std::string::npos);
}

TEST(Plan, RejectsShapesNamingTheOption) {
  const Hardware hw = *HardwarePreset("h100");
  const ModelCosts c = BuildCosts(Model("gpt-10.5b"), hw);
  StatusOr<Plan> plan = BuildPlan(c, hw, Shape(40, 1, 4));  // 40 stages > 38 layers
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.status().message().rfind("devices:", 0), 0u) << plan.status().message();
  plan = BuildPlan(c, hw, Shape(8, 1, 0));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message().rfind("microbatches:", 0), 0u);
  PlanOptions o = Shape(4, 1, 4);
  o.placement = "zigzag";
  plan = BuildPlan(c, hw, o);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message().rfind("placement:", 0), 0u);
}

}  // namespace
}  // namespace optpipe::planner
