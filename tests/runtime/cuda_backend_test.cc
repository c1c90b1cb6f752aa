// The CUDA backend. Builds everywhere; the tests that need a GPU skip (GTEST_SKIP)
// when the build has no CUDA or cudaGetDeviceCount fails or finds none. Run
// just these with `ctest -R CudaBackend`. They run with the process's
// CUDA_DEVICE_MAX_CONNECTIONS (8 unless set: there consumers hear of an op once
// the host saw it end); tests/tools/gpu_test.sh runs `optpipe run`, which sets
// 32 (consumers queue behind it on the GPU). On an H200 both pass either way.
#include "runtime/cuda_backend.h"

#include <gtest/gtest.h>

#include "core/format.h"
#include "heuristics/method.h"
#include "runtime/executor.h"
#include "runtime/synthetic_kernel.h"
#include "tests/testing.h"

namespace optpipe::runtime {
namespace {

// The reason to skip, or "" when a GPU is there.
std::string NoGpu() {
  if (!CudaBackendBuilt()) return "built without the CUDA backend";
  StatusOr<int> n = CudaDeviceCount();
  if (!n.ok()) return "no usable CUDA runtime: " + n.status().message();
  if (*n == 0) return "no GPU";
  return "";
}

TEST(CudaBackend, CheckStatusNamesCallLocationAndOp) {
  if (!CudaBackendBuilt()) GTEST_SKIP() << "built without the CUDA backend";
  // 2 is cudaErrorMemoryAllocation; NCCL 1 is ncclUnhandledCudaError. Neither needs a GPU.
  const Status cuda = CudaCallStatus(2, false, "cudaMallocAsync(&ptr, bytes, s)",
                                     "/x/runtime/cuda_backend.cc", 42, "2F3 on device 2");
  EXPECT_EQ(cuda.code(), StatusCode::kInternal);
  const std::string& m = cuda.message();
  EXPECT_NE(m.find("cudaMallocAsync(&ptr, bytes, s) failed"), std::string::npos) << m;
  EXPECT_NE(m.find("cudaErrorMemoryAllocation"), std::string::npos) << m;
  EXPECT_NE(m.find("runtime/cuda_backend.cc:42"), std::string::npos) << m;
  EXPECT_NE(m.find("(2F3 on device 2)"), std::string::npos) << m;
  const Status nccl =
      CudaCallStatus(1, true, "ncclSend(...)", "runtime/cuda_backend.cc", 7, "transfer");
  EXPECT_NE(nccl.message().find("NCCL error 1"), std::string::npos) << nccl.message();
  EXPECT_NE(CudaVersions().find("NCCL"), std::string::npos);
}

TEST(CudaBackend, NoGpuIsAnErrorNotACrash) {
  const std::string why = NoGpu();
  if (why.empty()) GTEST_SKIP() << "a GPU is present";
  StatusOr<std::unique_ptr<Backend>> b = MakeCudaBackend();
  EXPECT_FALSE(b.ok());
  EXPECT_FALSE(b.status().message().empty());
}

TEST(CudaBackend, RunsUnitCaseWithExactMemoryAndOrder) {
  if (const std::string why = NoGpu(); !why.empty()) GTEST_SKIP() << why;
  StatusOr<Problem> p = LoadProblem(testing::CasePath("unit-4x8"));
  ASSERT_TRUE(p.ok());
  StatusOr<Solution> sol = RunMethod(*p, "1f1b");
  ASSERT_TRUE(sol.ok());
  StatusOr<std::unique_ptr<Backend>> cuda = MakeCudaBackend();
  ASSERT_TRUE(cuda.ok()) << cuda.status().message();
  ExecutorOptions opt;
  opt.time_scale = 0.002;  // 2 ms ops: ~10 us launch + event overhead is 0.5%
  opt.iterations = 2;
  SyntheticKernel kernel(*p, opt.time_scale);
  Executor ex(*p, **cuda, kernel, opt);
  StatusOr<RunResult> r = ex.Run(sol->schedule);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const IterationResult& it : r->iterations) {
    EXPECT_LE(it.makespan, 1.10 * r->predicted.makespan);
    EXPECT_GE(it.makespan, 0.99 * r->predicted.makespan);
    for (int d = 0; d < p->devices; ++d) {
      EXPECT_NEAR(it.peak_memory[d], r->predicted.peak_memory[d], 1e-9);
      EXPECT_EQ(it.peak_bytes[d], r->predicted_peak_bytes[d]);
      EXPECT_EQ(it.lane_order[d], sol->schedule.compute[d]);
    }
  }
}

TEST(CudaBackend, RunsOffloadCase) {
  if (const std::string why = NoGpu(); !why.empty()) GTEST_SKIP() << why;
  StatusOr<Problem> p = LoadProblem(testing::CasePath("llama-8dev-offload"));
  ASSERT_TRUE(p.ok());
  StatusOr<Solution> sol = RunMethod(*p, "list");
  ASSERT_TRUE(sol.ok());
  StatusOr<std::unique_ptr<Backend>> cuda = MakeCudaBackend();
  ASSERT_TRUE(cuda.ok()) << cuda.status().message();
  ExecutorOptions opt;
  opt.time_scale = 1e-4;
  SyntheticKernel kernel(*p, opt.time_scale);
  StatusOr<RunResult> r = Executor(*p, **cuda, kernel, opt).Run(sol->schedule);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const IterationResult& it = r->iterations[0];
  EXPECT_LE(it.makespan, 1.10 * r->predicted.makespan);
  for (int d = 0; d < p->devices; ++d) EXPECT_EQ(it.peak_bytes[d], r->predicted_peak_bytes[d]);
}

TEST(CudaBackend, FailingOpStopsEveryLane) {
  if (const std::string why = NoGpu(); !why.empty()) GTEST_SKIP() << why;
  StatusOr<Problem> p = LoadProblem(testing::CasePath("unit-4x8"));
  ASSERT_TRUE(p.ok());
  StatusOr<Solution> sol = RunMethod(*p, "1f1b");
  ASSERT_TRUE(sol.ok());
  StatusOr<std::unique_ptr<Backend>> cuda = MakeCudaBackend();
  ASSERT_TRUE(cuda.ok());
  ExecutorOptions opt;
  opt.time_scale = 0.002;
  SyntheticFaults faults;
  faults.fail = Op{OpType::kB, 2, 3};
  SyntheticKernel kernel(*p, opt.time_scale, faults);
  Executor ex(*p, **cuda, kernel, opt);
  StatusOr<RunResult> r = ex.Run(sol->schedule);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device 2: op 2B3 failed"), std::string::npos)
      << r.status().message();
  for (const LaneReport& l : ex.trace().lanes) EXPECT_NE(l.state, "still running") << l.lane;
}

}  // namespace
}  // namespace optpipe::runtime
