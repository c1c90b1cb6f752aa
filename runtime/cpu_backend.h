// CpuBackend: runs a schedule on CPU threads (always built; what CI tests).
//
// Every lane is a thread of the executor; an op "computes" by keeping its lane
// busy for its duration (sleeping for most of it and spinning the last
// `spin_s`, so that many lanes share a few cores and still end on time). A
// transfer between devices is a message that becomes visible `comm` after its
// producer ended; device memory is malloc'd and touched, page by page.
//
//   CpuBackend cpu;
//   ExecutorOptions opt;
//   opt.time_scale = TimeScaleFor(problem);   // shortest compute op: 10 ms
//   Executor ex(problem, cpu, kernel, opt);
#pragma once

#include <optional>

#include "core/op.h"
#include "core/problem.h"
#include "runtime/backend.h"

namespace optpipe::runtime {

struct CpuBackendOptions {
  // Busy-wait this last part of every op: a sleep may wake late by tens of
  // microseconds, a spin does not. 0: sleep only.
  double spin_s = 300e-6;
  bool touch_pages = true;  // write every page of a new buffer, so the memory is really there
  // Fault injection: the transfer out of this op to another device is lost (its
  // consumer never sees it), as with a dead peer or link. For tests.
  std::optional<Op> lose_transfer_of;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(CpuBackendOptions opt = {}) : opt_(opt) {}
  std::string name() const override { return "cpu"; }
  Status Prepare(const BackendSetup& setup) override;
  Status BeginIteration(Clock::time_point origin) override;
  Status EndIteration(bool aborted) override;
  StatusOr<Buffer> AllocateDevice(int lane, int device, std::size_t bytes) override;
  void FreeDevice(int lane, int device, Buffer b) override;
  StatusOr<Buffer> AllocateHost(int device, std::size_t bytes) override;
  void FreeHost(int device, Buffer b) override;
  StatusOr<Message> Deliver(const Edge& e, double end_s) override;
  Status Await(const Edge& e, const Message& m) override;
  Status RunCompute(int lane, StageKernel& kernel, KernelContext& ctx, Clock::time_point started,
                    const Launched& launched, OpTimes* t) override;
  Status RunCopy(int lane, int device, const Op& op, std::vector<Buffer>& dev,
                 std::vector<Buffer>& host, bool to_host, double seconds, Clock::time_point started,
                 const Launched& launched, OpTimes* t) override;

 private:
  // Sleeps, then spins, until `deadline`; Cancelled when the run stops first.
  Status BusyUntil(Clock::time_point deadline) const;
  StatusOr<Buffer> Allocate(std::size_t bytes) const;
  double Since(Clock::time_point t) const;

  CpuBackendOptions opt_;
  const Problem* p_ = nullptr;
  const RunControl* control_ = nullptr;
  OpSpace space_;
  Clock::time_point origin_;
};

// A time scale (wall seconds per problem time unit) under which the shortest
// compute op of `p` lasts `shortest_op_s`: long against the few tens of
// microseconds a lane needs to hand an op to the next (a wake-up), so the
// measured makespan stays within a few percent of the simulated one.
double TimeScaleFor(const Problem& p, double shortest_op_s = 0.01);

}  // namespace optpipe::runtime
