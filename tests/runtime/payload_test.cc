// Payloads (ExecutorOptions::payload_bytes): every activation and gradient
// reaches the op that reads it. SyntheticKernel's checksum chain checks each
// micro-batch at the last stage's F and the first stage's B; a value written
// to the wrong micro-batch fails the op that checks it.
#include <gtest/gtest.h>

#include <cstring>

#include "core/format.h"
#include "heuristics/method.h"
#include "runtime/cpu_backend.h"
#include "runtime/executor.h"
#include "runtime/synthetic_kernel.h"

namespace optpipe::runtime {
namespace {

Problem Case(const std::string& name) {
  StatusOr<Problem> p = LoadProblem(std::string(OPTPIPE_SOURCE_DIR) + "/tests/cases/" + name);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

ExecutorOptions Fast(const Problem& p) {
  ExecutorOptions o;
  o.time_scale = TimeScaleFor(p, 0.001);  // order and data matter here, not timing
  o.bytes_per_unit = 4096;
  o.payload_bytes = 64;
  return o;
}

class PayloadTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(PayloadTest, EveryMicroBatchChecksOutBothWays) {
  const auto& [file, method] = GetParam();
  const Problem p = Case(file);
  StatusOr<Solution> s = RunMethod(p, method);
  ASSERT_TRUE(s.ok()) << s.status().message();
  CpuBackend cpu;
  SyntheticKernel kernel(p, Fast(p).time_scale);
  ExecutorOptions o = Fast(p);
  o.iterations = 2;
  Executor ex(p, cpu, kernel, o);
  StatusOr<RunResult> r = ex.Run(s->schedule);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(kernel.forward_checked(), 2 * p.microbatches);
  EXPECT_EQ(kernel.backward_checked(), 2 * p.microbatches);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PayloadTest,
    ::testing::Values(std::pair<std::string, std::string>{"unit-4x8.json", "zb-h1"},
                      std::pair<std::string, std::string>{"unit-4x8-vshape.json", "zb-v"},
                      std::pair<std::string, std::string>{"llama-8dev-offload.json", "po-f"}));

// Stage 1's F writes micro-batch 4's value where micro-batch 5's belongs.
class Misrouting : public SyntheticKernel {
 public:
  using SyntheticKernel::SyntheticKernel;
  Status F(int stage, int microbatch, KernelContext& ctx) override {
    Status st = SyntheticKernel::F(stage, microbatch, ctx);
    if (st.ok() && stage == 1 && microbatch == 5) {
      std::int64_t v = 0;
      std::memcpy(&v, ctx.output.data, sizeof v);
      v -= 1;  // the chain of micro-batch 4
      std::memcpy(ctx.output.data, &v, sizeof v);
    }
    return st;
  }
};

TEST(Payload, AValueForTheWrongMicroBatchFailsTheCheck) {
  const Problem p = Case("unit-4x8.json");
  StatusOr<Solution> s = RunMethod(p, "1f1b");
  ASSERT_TRUE(s.ok());
  CpuBackend cpu;
  Misrouting kernel(p, Fast(p).time_scale);
  Executor ex(p, cpu, kernel, Fast(p));
  StatusOr<RunResult> r = ex.Run(s->schedule);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("payload checksum of 3F5"), std::string::npos)
      << r.status().message();
}

TEST(Payload, WithoutPayloadsKernelsSeeNone) {
  const Problem p = Case("unit-4x8.json");
  StatusOr<Solution> s = RunMethod(p, "1f1b");
  ASSERT_TRUE(s.ok());
  CpuBackend cpu;
  SyntheticKernel kernel(p, Fast(p).time_scale);
  ExecutorOptions o = Fast(p);
  o.payload_bytes = 0;
  Executor ex(p, cpu, kernel, o);
  ASSERT_TRUE(ex.Run(s->schedule).ok());
  EXPECT_EQ(kernel.forward_checked(), 0);
}

}  // namespace
}  // namespace optpipe::runtime
