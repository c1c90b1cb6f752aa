// The two seams of the stage runtime: a StageKernel computes one op of one
// stage (the embedding point for a trainer), a Backend runs ops on hardware
// (CPU threads, or CUDA streams). The executor (runtime/executor.h) owns the
// schedule: lane order, dependencies, memory order, timing and faults; a
// backend only executes what the executor hands it, on the calling lane's thread.
//
//   class MyStage : public StageKernel {            // a trainer's stages
//     Status F(int s, int m, KernelContext& ctx) override { return Forward(s, m, ctx.activation); }
//     ...
//   };
//
// Lanes are numbered like the simulator's: [0, D) the compute lane of each
// device, [D, D + host links) the copy lane of each host link.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/problem.h"
#include "core/status.h"

namespace optpipe::runtime {

using Clock = std::chrono::steady_clock;

// `seconds` (any sign) after `t`.
inline Clock::time_point After(Clock::time_point t, double seconds) {
  return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Cooperative cancellation of one run, shared by lanes, kernels and the
// backend. Anything that may block polls it or sleeps through it.
class RunControl {
 public:
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  // Sleeps until `t`; false (early) when the run stops meanwhile.
  bool SleepUntil(Clock::time_point t) const;
  void Stop();
  void Reset() { stopped_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> stopped_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
};

// The status a kernel or backend returns when it gave up because the run stopped.
Status Cancelled(const std::string& what);
bool IsCancelled(const Status& st);

// A block of device or host memory.
struct Buffer {
  void* data = nullptr;
  std::size_t bytes = 0;
};

// What a stage kernel sees of its op.
struct KernelContext {
  int device = 0;
  Op op;
  // The op's activation on the device, as the executor's pieces (runtime/executor.h:
  // cut at freed_by_b and offloadable); F finds them freshly allocated.
  const std::vector<Buffer>* activation = nullptr;
  // The data the op receives and sends (ExecutorOptions::payload_bytes; null
  // data without): F reads the activation of the stage before from `input`
  // (none on the first stage) and writes its own for the next into `output`
  // (none on the last); B reads the gradient from the stage after from
  // `input` (none on the last stage) and writes the one it sends back into
  // `output` (none on the first).
  Buffer input, output;
  // The device's compute stream (a cudaStream_t) on the CUDA backend; null on the CPU.
  void* stream = nullptr;
  const RunControl* control = nullptr;
  // Keeps the device busy until `seconds` after the op started: sleep, then spin
  // on the CPU backend; a spin kernel on `stream` with CUDA. Fails (Cancelled)
  // when the run stops meanwhile.
  std::function<Status(double seconds)> occupy;
};

// One stage's compute, called by the executor on the device's compute lane.
// Kernels must return (Cancelled) soon after ctx.control->stopped() turns true.
class StageKernel {
 public:
  virtual ~StageKernel() = default;
  virtual Status F(int stage, int microbatch, KernelContext& ctx) = 0;
  // The activation gradient; with a fused backward (split_backward false) all of it.
  virtual Status B(int stage, int microbatch, KernelContext& ctx) = 0;
  virtual Status W(int stage, int microbatch, KernelContext& ctx) = 0;

  // ctx.op, by the method of its type.
  Status Run(KernelContext& ctx) {
    switch (ctx.op.type) {
      case OpType::kF:
        return F(ctx.op.stage, ctx.op.microbatch, ctx);
      case OpType::kB:
        return B(ctx.op.stage, ctx.op.microbatch, ctx);
      case OpType::kW:
        return W(ctx.op.stage, ctx.op.microbatch, ctx);
      default:
        return Internal("not a compute op: " + ToString(ctx.op));
    }
  }
};

// A dependency between two ops (core/dag.h), with its transfer time.
struct Edge {
  int id = 0;
  int from = 0, to = 0;            // OpSpace indices
  int from_lane = 0, to_lane = 0;  // lanes that run them
  int from_device = 0, to_device = 0;
  double lag_s = 0;       // the problem's comm time, in wall seconds (0 on one device)
  std::size_t bytes = 0;  // the payload it carries (F to F and B to B between stages)
};

// What a producer's lane hands to the consumer's lane once the producer ended.
struct Message {
  double ready_s = 0;  // CPU: when the data is there (producer end + lag), since the origin
  int slot = -1;       // backend handle (CUDA: the event that marks the arrival)
};

// When one op ran, in seconds since the iteration's origin.
struct OpTimes {
  double start = 0, end = 0;
};

// What a backend calls once an op is launched, with when it ends (seconds
// since the origin; CUDA: an estimate): the executor then delivers to the
// op's consumers. A backend that orders the consumers after the op on the
// device (CUDA: they wait on its end event) may call it as soon as the op is
// queued, so that they queue behind it without waiting for the host to see
// it end; the CPU backend calls it when the op has ended.
using Launched = std::function<Status(double end_s)>;

struct BackendSetup {
  const Problem* problem = nullptr;
  double time_scale = 0;  // wall seconds per problem time unit
  const RunControl* control = nullptr;
  int ops = 0;  // OpSpace size: op indices are below it
  std::vector<Edge> edges;
  // Host memory [D] that the offloads of one iteration need at most.
  std::vector<std::size_t> host_bytes;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Once per Executor::Run, before any lane starts. What `setup` points to
  // (problem, control) lives until that Run returns.
  virtual Status Prepare(const BackendSetup& setup) = 0;
  // Sets the origin of the iteration's times; before its lanes start.
  virtual Status BeginIteration(Clock::time_point origin) = 0;
  // After every lane of an iteration returned (ok or not): settle what is in flight.
  virtual Status EndIteration(bool aborted) = 0;

  // Memory. `lane` is the lane that allocates or frees (its stream orders
  // it); the ops that used a buffer freed have ended.
  virtual StatusOr<Buffer> AllocateDevice(int lane, int device, std::size_t bytes) = 0;
  virtual void FreeDevice(int lane, int device, Buffer b) = 0;
  virtual StatusOr<Buffer> AllocateHost(int device, std::size_t bytes) = 0;
  virtual void FreeHost(int device, Buffer b) = 0;

  // Producer side of a dependency: `e.from` ends at `end_s` (see Launched);
  // start the transfer.
  virtual StatusOr<Message> Deliver(const Edge& e, double end_s) = 0;
  // Consumer side, before the op starts: wait for (or order the lane after) the data.
  virtual Status Await(const Edge& e, const Message& m) = 0;

  // Runs F/B/W through `kernel`, calls `launched` once (unless it fails
  // first) and returns when the op has finished. `started` is when the lane
  // began the op (its allocation included).
  virtual Status RunCompute(int lane, StageKernel& kernel, KernelContext& ctx,
                            Clock::time_point started, const Launched& launched, OpTimes* t) = 0;
  // Runs O (to_host) or R: copies the pieces and lasts at least `seconds`;
  // `launched` as for RunCompute.
  virtual Status RunCopy(int lane, int device, const Op& op, std::vector<Buffer>& dev,
                         std::vector<Buffer>& host, bool to_host, double seconds,
                         Clock::time_point started, const Launched& launched, OpTimes* t) = 0;
};

}  // namespace optpipe::runtime
