// SyntheticKernel: a stage kernel for benchmarks and tests. Every F, B and W
// keeps its device busy for the problem's duration of the op (core/problem.h
// Duration) times the time scale, through the backend's KernelContext::occupy
// (sleep-and-spin on the CPU, a spin kernel on a GPU). With payloads
// (KernelContext input/output) it also runs a checksum chain through them:
// a value that reached the wrong op, or none, fails the op that checks it.
//
//   SyntheticKernel k(problem, 0.01);                        // 1 time unit = 10 ms
//   SyntheticFaults faults;
//   faults.fail = Op{OpType::kB, 2, 3};                      // fault injection
//   SyntheticKernel bad(problem, 0.01, faults);
#pragma once

#include <atomic>
#include <optional>

#include "core/problem.h"
#include "runtime/backend.h"

namespace optpipe::runtime {

struct SyntheticFaults {
  std::optional<Op> fail;  // this op returns an error halfway through its duration
  std::optional<Op> hang;  // this op never finishes (until the run is stopped)
};

class SyntheticKernel : public StageKernel {
 public:
  SyntheticKernel(const Problem& p, double time_scale, SyntheticFaults faults = {})
      : p_(p), time_scale_(time_scale), faults_(faults) {}
  Status F(int stage, int microbatch, KernelContext& ctx) override;
  Status B(int stage, int microbatch, KernelContext& ctx) override;
  Status W(int stage, int microbatch, KernelContext& ctx) override;

  // Micro-batches whose payload chain checked out: forward at the last
  // stage, backward at the first (ExecutorOptions::payload_bytes >= 8).
  int forward_checked() const { return forward_checked_.load(); }
  int backward_checked() const { return backward_checked_.load(); }

 private:
  Status Run(const Op& op, KernelContext& ctx);
  Status Checksum(const Op& op, KernelContext& ctx);
  const Problem& p_;
  double time_scale_;
  SyntheticFaults faults_;
  std::atomic<int> forward_checked_{0}, backward_checked_{0};
};

}  // namespace optpipe::runtime
