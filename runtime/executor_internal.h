// Internals of the Executor (runtime/executor.h), shared by its files: the
// Plan of a run and the Iteration that runs it once, whose methods
// runtime/executor_*.cc define by concept. Private to runtime/.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "runtime/peers.h"

namespace optpipe::runtime::internal {

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// --- The plan: everything a run needs that does not change between iterations
// (runtime/executor_plan.cc).

struct MemEvent {
  int op = 0;
  bool alloc = false;
  double units = 0;
  std::int64_t bytes = 0;
};

struct Plan {
  int D = 0, lanes = 0, M = 0;
  OpSpace space;
  std::vector<char> offloaded;
  std::vector<int> link_of_device;
  int me = -1;                             // the device this process runs; -1: all
  std::vector<std::vector<int>> lane_ops;  // [lane] op indices in schedule order (this process's)
  std::vector<std::vector<int>> all_lane_ops;  // [lane] every device's
  std::vector<int> data_in, data_out;          // [op index] the edge whose payload it reads/writes
  std::vector<int> lane_of, device_of;         // [op index]
  std::vector<Edge> edges;
  std::vector<std::vector<int>> in_edges, out_edges;  // [op index] edge ids
  // Memory: per device the simulator's order of allocations and frees.
  std::vector<std::vector<MemEvent>> mem_seq;  // [D]
  std::vector<int> mem_offset;                 // [D] start of a device's events in flat arrays
  std::vector<int> ticket;                     // [op index] position in its device's sequence, -1
  // Activation pieces of a stage: cut at freed_by_b and offloadable.
  std::vector<std::vector<std::size_t>> piece_bytes;  // [S][k]
  std::vector<int> b_pieces, o_pieces;                // [S] pieces below freed_by_b / offloadable
  std::vector<std::int64_t> static_bytes;             // [D]
  std::vector<std::int64_t> peak_bytes;               // [D] predicted
  std::vector<std::size_t> host_bytes;                // [D]
  std::vector<double> expected_s;                     // [op index] wall duration
  double longest_s = 0;
};

std::string LaneName(const Plan& pl, int r);

Plan BuildPlan(const Problem& p, const Schedule& s, const SimResult& sim, const ExecutorOptions& o);

// --- One iteration -----------------------------------------------------------

enum class LaneKind { kIdle, kWaitDep, kAwait, kWaitMemory, kRunning, kDone, kStopped, kFailed };

struct LaneState {
  LaneKind kind = LaneKind::kIdle;
  int op = -1, edge = -1;
  Clock::time_point since;
  int done = 0;
  double last_start = -1, exit = -1;
  std::string note;  // how the lane ended
};

// One run of the whole schedule: a thread per lane, a memory ledger per device
// and a watchdog on the calling thread.
class Iteration {
 public:
  // runtime/executor_iteration.cc
  Iteration(const Problem& p, const Plan& pl, const ExecutorOptions& o, Backend& be, StageKernel& k,
            RunControl& control);
  ~Iteration() { ReleaseAll(); }

  Status Run(double watchdog_s, RunTrace* trace, int iteration);
  IterationResult Result() const;
  // One process per device: rank 0 collects every rank's times and peaks
  // (runtime/executor_ranks.cc); every rank calls it after a good iteration.
  Status GatherRanks();

 private:
  double Since(Clock::time_point t) const { return Seconds(t - origin_); }

  void Progress() { last_progress_ = std::max(last_progress_, Clock::now()); }

  void SetState(int r, LaneKind kind, int op, int edge) {
    LaneState& ls = lanes_[r];
    ls.kind = kind;
    ls.op = op;
    ls.edge = edge;
    ls.since = Clock::now();
  }

  std::size_t Sm(const Op& op) const {
    return static_cast<std::size_t>(op.stage) * pl_.M + op.microbatch;
  }

  // --- lanes (runtime/executor_iteration.cc) ---
  // Runs one op of lane r; false when the lane must stop.
  bool RunOp(int r, int i);
  void LaneMain(int r);

  // --- the memory ledger (runtime/executor_memory.cc) ---
  // Waits for op i's allocation turn in device d's order; false when the run stopped.
  bool AwaitMemoryTurn(int r, int i, int d, int ticket);
  // Allocates op i's pieces [from, to) of `dev` and books them; false on a fault.
  bool AllocatePieces(int r, int i, int d, int ticket, std::vector<Buffer>& dev, int from, int to);
  // Hands op i's freed pieces [from, to) of `dev` to the ledger (under mu_).
  void ReleasePiecesLocked(int i, int d, int ticket, std::vector<Buffer>& dev, int from, int to,
                           std::vector<Buffer>* to_free);
  void AdvanceLocked(int d, std::vector<Buffer>* to_free);
  void NotifyDevice(int d);
  // Frees `bufs` of device d from lane r.
  void FreeNow(int r, int d, std::vector<Buffer>& bufs);
  std::pair<int, int> PieceRange(const Op& op) const;
  void ReleaseAll();

  // --- watchdog, faults and the trace (runtime/executor_faults.cc) ---
  void Watch(double watchdog_s);
  void StopLocked(Status st);
  void Fail(int r, int op, const Status& st);
  std::string Waiting(int r) const;
  std::string WatchdogMessage(Clock::time_point now, double watchdog_s) const;
  LaneReport Report(int r) const;

  const Problem& p_;
  const Plan& pl_;
  const ExecutorOptions& o_;
  Backend& be_;
  StageKernel& kernel_;
  RunControl& control_;
  Clock::time_point origin_;

  std::mutex mu_;
  std::unique_ptr<std::condition_variable[]> lane_cv_;
  std::condition_variable main_cv_;
  int running_ = 0;
  bool stopped_ = false;
  Clock::time_point stop_time_, last_progress_;
  Status first_error_;
  std::vector<LaneState> lanes_;
  std::vector<char> arrived_;
  std::vector<Message> msg_;
  std::vector<int> next_;
  std::vector<char> free_ready_;
  std::vector<std::vector<Buffer>> free_bufs_;
  std::vector<double> mem_, peak_;
  std::vector<std::int64_t> mem_bytes_, peak_bytes_;
  std::vector<std::vector<Buffer>> dev_, host_;
  std::vector<OpTimes> times_;
  std::vector<char> ran_;
  std::vector<std::vector<Op>> lane_order_;
  std::vector<std::vector<std::byte>> payload_;  // [edge] what a data edge carries
};

// True when edge `e` of the plan crosses to another process.
inline bool Remote(const Plan& pl, const Edge& e) {
  return pl.me >= 0 && (e.from_device != pl.me || e.to_device != pl.me);
}

}  // namespace optpipe::runtime::internal
