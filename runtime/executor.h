// Executor: runs a Schedule for real, exactly in its per-lane order, and
// measures it.
//
// One thread per lane (the compute lane of every device, the copy lane of every
// host link) walks its ops in the schedule's order. Each op waits for its
// dependencies (core/dag.h: the previous stage's F, the next stage's B with the
// comm time as a transfer, its own reload), then runs through the Backend:
// F/B/W call the StageKernel, O/R copy the activation to host memory and back.
//
// Memory is real and counted by the executor: an activation of `a` units is
// `a * bytes_per_unit` bytes of device memory, allocated at F's start in pieces
// cut at freed_by_b and offloadable; B frees the freed_by_b part at its end, W the
// rest, O moves the offloadable part to host memory and R brings it back. On
// every device the allocations and frees happen in the order the simulator
// (core/simulator.h) predicts: an allocation waits for the frees before it
// (as the simulator's memory-blocked ops do), and a free that comes early is
// held back until its turn. So the measured peak per device equals the
// simulator's prediction exactly, and the order alone can never exceed
// memory.limit. Times are the simulator's only if the hardware keeps up:
// measured minus simulated makespan is the runtime's overhead.
//
// Faults: an op whose kernel or copy fails, or no op starting or finishing for
// `watchdog_s` (a stuck peer, a lost transfer), stops every lane; Run then
// returns the first error, naming the device, the op and the cause, and never a
// partial result. trace() tells where every lane stopped.
//
//   CpuBackend cpu;                                        // runtime/cpu_backend.h
//   SyntheticKernel kernel(problem, 0.01);                  // runtime/synthetic_kernel.h
//   ExecutorOptions opt;
//   opt.time_scale = 0.01;                                   // 1 time unit = 10 ms
//   Executor ex(problem, cpu, kernel, opt);
//   StatusOr<RunResult> r = ex.Run(schedule);
//   if (r.ok()) std::cout << r->iterations[0].makespan << " vs " << r->predicted.makespan;
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"
#include "runtime/backend.h"

namespace optpipe::runtime {

class Peers;  // runtime/peers.h

struct ExecutorOptions {
  // Wall seconds per problem time unit (> 0): a synthetic op of duration T lasts T * time_scale.
  double time_scale = 0.01;
  // Bytes per problem memory unit (> 0): an activation of a units is llround(a * bytes_per_unit).
  double bytes_per_unit = 1 << 20;
  // Runs of the whole schedule, one after the other.
  int iterations = 1;
  // No op starting or ending for this long stops the run; 0: 2 s + 4x the longest op.
  double watchdog_s = 0;
  // Hold memory.static as a real buffer on every device too (it is counted either way).
  bool allocate_static = true;
  // Set from any thread (a Ctrl-C handler) to stop the run within 0.1 s: every
  // lane stops; Run returns the iterations that ended before (RunResult::
  // interrupted), or fails with "interrupted" (IsCancelled) if none did.
  const std::atomic<bool>* stop = nullptr;
  // Bytes every activation (F to the next stage's F) and gradient (B to the
  // previous stage's B) carries from the producer's KernelContext::output
  // into the consumer's ::input (runtime/backend.h); 0: none.
  std::size_t payload_bytes = 0;
  // One process per device (runtime/peers.h): this process runs device
  // peers->rank()'s lanes and exchanges the messages of the others' edges;
  // rank 0's RunResult has every rank's ops. Null: every device here.
  Peers* peers = nullptr;
};

// One op as it ran, in problem time units since the iteration's first start.
struct MeasuredOp {
  Op op;
  int device = 0;
  int lane = 0;
  double start = 0, end = 0;
};

struct IterationResult {
  std::vector<MeasuredOp> ops;              // in OpSpace index order
  std::vector<std::vector<Op>> lane_order;  // [lane] ops in the order they started
  double makespan = 0;                      // problem units
  double device_span = 0;
  double objective = 0;
  std::vector<double> peak_memory;       // [D] problem units, static included
  std::vector<std::int64_t> peak_bytes;  // [D] bytes held at the peak, static included
  double wall_s = 0;                     // wall time of the iteration
};

struct RunResult {
  SimResult predicted;                             // the simulator's times and memory
  std::vector<std::int64_t> predicted_peak_bytes;  // [D] the same memory in bytes
  std::vector<IterationResult> iterations;
  double time_scale = 0;
  double bytes_per_unit = 0;
  bool interrupted = false;  // ExecutorOptions::stop ended it after `iterations`
};

// Where every lane stood when the last run ended.
struct LaneReport {
  std::string lane;  // "device 2", "host link 0"
  int ops_done = 0;  // ops that finished
  int ops_total = 0;
  std::string state;         // "finished", "stopped while waiting with 2F3 for 1F3", ...
  double last_start_s = -1;  // when its last op started, since the iteration's origin
  double exit_s = -1;        // when the lane's thread returned
};
struct RunTrace {
  int iteration = -1;  // the iteration that ended the run
  double stop_s = -1;  // when the run was stopped (since the origin); -1: it was not
  std::vector<LaneReport> lanes;
};

class Executor {
 public:
  // Keeps references: keep the problem, backend and kernel alive.
  Executor(const Problem& p, Backend& backend, StageKernel& kernel, ExecutorOptions opt = {});

  // Runs `s` opt.iterations times. Fails with the simulator's status for a
  // schedule it rejects, and with the first fault of a run.
  StatusOr<RunResult> Run(const Schedule& s);
  const RunTrace& trace() const { return trace_; }

 private:
  const Problem& p_;
  Backend& backend_;
  StageKernel& kernel_;
  ExecutorOptions opt_;
  RunTrace trace_;
};

// Bytes of `units` memory units: llround(units * bytes_per_unit).
std::int64_t BytesOf(double units, double bytes_per_unit);

}  // namespace optpipe::runtime
