#include "runtime/executor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

#include "core/dag.h"
#include "core/text_format.h"

namespace optpipe::runtime {

// --- RunControl -------------------------------------------------------------

bool RunControl::SleepUntil(Clock::time_point t) const {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_until(lock, t, [this] { return stopped(); });
}

void RunControl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

namespace {
constexpr const char* kCancelledPrefix = "cancelled: ";
}  // namespace

Status Cancelled(const std::string& what) { return Internal(kCancelledPrefix + what); }
bool IsCancelled(const Status& st) {
  return !st.ok() && st.message().rfind(kCancelledPrefix, 0) == 0;
}

std::int64_t BytesOf(double units, double bytes_per_unit) {
  return static_cast<std::int64_t>(std::llround(units * bytes_per_unit));
}

namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// --- The plan: everything a run needs that does not change between iterations.

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
  std::vector<std::vector<int>> lane_ops;  // [lane] op indices in schedule order
  std::vector<int> lane_of, device_of;     // [op index]
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

std::string LaneName(const Plan& pl, int r) {
  return r < pl.D ? "device " + std::to_string(r) : "host link " + std::to_string(r - pl.D);
}

// A topological rank of every op over dependencies and lane order: breaks ties
// between memory events at one instant without ever ordering an op before one
// it waits for.
std::vector<int> TopologicalRank(const Problem& p, const Plan& pl) {
  const int n = pl.space.size();
  std::vector<std::vector<int>> succ(n);
  std::vector<int> indeg(n, 0), rank(n, -1);
  for (const std::vector<int>& lane : pl.lane_ops) {
    for (std::size_t k = 0; k + 1 < lane.size(); ++k) {
      succ[lane[k]].push_back(lane[k + 1]);
      ++indeg[lane[k + 1]];
    }
  }
  for (const Edge& e : pl.edges) {
    succ[e.from].push_back(e.to);
    ++indeg[e.to];
  }
  std::vector<int> ready;
  for (const std::vector<int>& lane : pl.lane_ops) {
    if (!lane.empty() && indeg[lane.front()] == 0) ready.push_back(lane.front());
  }
  int next = 0;
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    rank[i] = next++;
    for (int j : succ[i]) {
      if (--indeg[j] == 0) ready.push_back(j);
    }
  }
  (void)p;
  return rank;
}

Plan BuildPlan(const Problem& p, const Schedule& s, const SimResult& sim,
               const ExecutorOptions& o) {
  Plan pl;
  pl.D = p.devices;
  pl.M = p.microbatches;
  pl.space = p.op_space();
  pl.offloaded = OffloadedSet(p, s);
  pl.link_of_device = LinkOfDevice(p);
  pl.lanes = p.devices + static_cast<int>(p.host_links.size());
  const int n = pl.space.size();
  pl.lane_of.assign(n, -1);
  pl.device_of.assign(n, -1);
  pl.in_edges.assign(n, {});
  pl.out_edges.assign(n, {});
  pl.expected_s.assign(n, 0.0);
  pl.lane_ops.resize(pl.lanes);
  for (int r = 0; r < pl.lanes; ++r) {
    const std::vector<Op>& lane = r < pl.D ? s.compute[r] : s.copy[r - pl.D];
    for (const Op& op : lane) {
      const int i = pl.space.Index(op);
      pl.lane_ops[r].push_back(i);
      pl.lane_of[i] = r;
      pl.device_of[i] = DeviceOf(p, op);
      pl.expected_s[i] = Duration(p, op) * o.time_scale;
      pl.longest_s = std::max(pl.longest_s, pl.expected_s[i]);
    }
  }
  for (int r = 0; r < pl.lanes; ++r) {
    for (int i : pl.lane_ops[r]) {
      ForEachPredecessor(p, pl.offloaded, pl.space.At(i), [&](const Op& q, double lag) {
        const int qi = pl.space.Index(q);
        Edge e;
        e.id = static_cast<int>(pl.edges.size());
        e.from = qi;
        e.to = i;
        e.from_lane = pl.lane_of[qi];
        e.to_lane = r;
        e.from_device = pl.device_of[qi];
        e.to_device = pl.device_of[i];
        e.lag_s = lag * o.time_scale;
        pl.longest_s = std::max(pl.longest_s, e.lag_s);
        pl.in_edges[i].push_back(e.id);
        pl.out_edges[qi].push_back(e.id);
        pl.edges.push_back(e);
      });
    }
  }

  // Pieces of every stage's activation.
  const int S = p.stages();
  pl.piece_bytes.resize(S);
  pl.b_pieces.assign(S, 0);
  pl.o_pieces.assign(S, 0);
  for (int st = 0; st < S; ++st) {
    const double a = p.activation[st];
    const double fb = p.split_backward ? p.freed_by_b[st] : a;
    const double off = p.offloadable[st];
    std::vector<std::int64_t> cuts = {0, BytesOf(fb, o.bytes_per_unit),
                                      BytesOf(off, o.bytes_per_unit), BytesOf(a, o.bytes_per_unit)};
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      pl.piece_bytes[st].push_back(static_cast<std::size_t>(cuts[k + 1] - cuts[k]));
    }
    const auto below = [&](std::int64_t b) {
      return static_cast<int>(std::find(cuts.begin(), cuts.end(), b) - cuts.begin());
    };
    pl.b_pieces[st] = below(BytesOf(fb, o.bytes_per_unit));
    pl.o_pieces[st] = below(BytesOf(off, o.bytes_per_unit));
  }
  const auto bytes_of_pieces = [&](int st, int from, int to) {
    std::int64_t b = 0;
    for (int k = from; k < to; ++k) b += static_cast<std::int64_t>(pl.piece_bytes[st][k]);
    return b;
  };

  // Memory events in the simulator's order: by time, frees of ops that took
  // time before anything else at that instant (FORMAT.md), then by topological rank.
  const std::vector<int> rank = TopologicalRank(p, pl);
  struct Keyed {
    double t;
    int cls, rank;
    MemEvent e;
  };
  std::vector<std::vector<Keyed>> keyed(pl.D);
  pl.host_bytes.assign(pl.D, 0);
  for (int r = 0; r < pl.lanes; ++r) {
    for (int i : pl.lane_ops[r]) {
      const Op op = pl.space.At(i);
      const int st = op.stage, d = pl.device_of[i];
      const int npieces = static_cast<int>(pl.piece_bytes[st].size());
      const double al = Allocates(p, op), fr = Frees(p, op);
      MemEvent e;
      e.op = i;
      if (al > 0) {
        e.alloc = true;
        e.units = al;
        e.bytes = op.type == OpType::kF ? bytes_of_pieces(st, 0, npieces)
                                        : bytes_of_pieces(st, 0, pl.o_pieces[st]);
        keyed[d].push_back({sim.start[i], 1, rank[i], e});
      } else if (fr > 0) {
        e.units = fr;
        switch (op.type) {
          case OpType::kB:
            e.bytes = bytes_of_pieces(st, 0, pl.b_pieces[st]);
            break;
          case OpType::kW:
            e.bytes = bytes_of_pieces(st, pl.b_pieces[st], npieces);
            break;
          default:
            e.bytes = bytes_of_pieces(st, 0, pl.o_pieces[st]);
            break;
        }
        const int cls = sim.end[i] > sim.start[i] ? 0 : 1;
        keyed[d].push_back({sim.end[i], cls, rank[i], e});
      }
      if (op.type == OpType::kO) {
        pl.host_bytes[d] += static_cast<std::size_t>(bytes_of_pieces(st, 0, pl.o_pieces[st]));
      }
    }
  }
  pl.ticket.assign(n, -1);
  pl.mem_seq.assign(pl.D, {});
  pl.mem_offset.assign(pl.D + 1, 0);
  pl.static_bytes.assign(pl.D, 0);
  pl.peak_bytes.assign(pl.D, 0);
  for (int d = 0; d < pl.D; ++d) {
    std::sort(keyed[d].begin(), keyed[d].end(), [](const Keyed& a, const Keyed& b) {
      if (a.t != b.t) return a.t < b.t;
      if (a.cls != b.cls) return a.cls < b.cls;
      return a.rank < b.rank;
    });
    pl.static_bytes[d] = BytesOf(p.static_memory[d], o.bytes_per_unit);
    std::int64_t bytes = pl.static_bytes[d];
    pl.peak_bytes[d] = bytes;
    for (const Keyed& k : keyed[d]) {
      pl.ticket[k.e.op] = static_cast<int>(pl.mem_seq[d].size());
      pl.mem_seq[d].push_back(k.e);
      bytes += k.e.alloc ? k.e.bytes : -k.e.bytes;
      pl.peak_bytes[d] = std::max(pl.peak_bytes[d], bytes);
    }
    pl.mem_offset[d + 1] = pl.mem_offset[d] + static_cast<int>(pl.mem_seq[d].size());
  }
  return pl;
}

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

class Iteration {
 public:
  Iteration(const Problem& p, const Plan& pl, const ExecutorOptions& o, Backend& be, StageKernel& k,
            RunControl& control)
      : p_(p),
        pl_(pl),
        o_(o),
        be_(be),
        kernel_(k),
        control_(control),
        lane_cv_(std::make_unique<std::condition_variable[]>(pl.lanes)) {
    const int n = pl.space.size();
    const std::size_t sm = static_cast<std::size_t>(p.stages()) * p.microbatches;
    arrived_.assign(pl.edges.size(), 0);
    msg_.assign(pl.edges.size(), Message{});
    next_.assign(pl.D, 0);
    free_ready_.assign(pl.mem_offset[pl.D], 0);
    free_bufs_.assign(n, {});
    mem_ = p.static_memory;
    peak_ = p.static_memory;
    mem_bytes_ = pl.static_bytes;
    peak_bytes_ = pl.static_bytes;
    dev_.assign(sm, {});
    host_.assign(sm, {});
    times_.assign(n, OpTimes{});
    ran_.assign(n, 0);
    lane_order_.assign(pl.lanes, {});
    lanes_.assign(pl.lanes, LaneState{});
  }

  ~Iteration() { ReleaseAll(); }

  Status Run(double watchdog_s, RunTrace* trace, int iteration) {
    control_.Reset();
    origin_ = Clock::now() + std::chrono::milliseconds(5);
    if (Status st = be_.BeginIteration(origin_); !st.ok()) return st;
    last_progress_ = origin_;
    running_ = pl_.lanes;
    std::vector<std::thread> threads;
    threads.reserve(pl_.lanes);
    for (int r = 0; r < pl_.lanes; ++r) threads.emplace_back([this, r] { LaneMain(r); });
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto poll = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(std::clamp(watchdog_s / 10, 0.001, 0.1)));
      while (running_ > 0) {
        main_cv_.wait_for(lock, poll);
        if (stopped_ || running_ == 0) continue;
        const Clock::time_point now = Clock::now();
        if (now > last_progress_ && Seconds(now - last_progress_) > watchdog_s) {
          StopLocked(Internal(WatchdogMessage(now, watchdog_s)));
        }
      }
    }
    for (std::thread& t : threads) t.join();
    const Status end = be_.EndIteration(stopped_);
    trace->iteration = iteration;
    trace->stop_s = stopped_ ? Seconds(stop_time_ - origin_) : -1.0;
    trace->lanes.clear();
    for (int r = 0; r < pl_.lanes; ++r) trace->lanes.push_back(Report(r));
    if (stopped_) return first_error_;
    if (!end.ok()) return end;
    for (int d = 0; d < pl_.D; ++d) {
      if (next_[d] != static_cast<int>(pl_.mem_seq[d].size()) ||
          mem_bytes_[d] != pl_.static_bytes[d]) {
        return Internal("device " + std::to_string(d) + ": memory events left after the iteration");
      }
    }
    return OkStatus();
  }

  IterationResult Result() const {
    IterationResult res;
    const double scale = o_.time_scale;
    double first = std::numeric_limits<double>::infinity(), last = -first;
    for (int i = 0; i < pl_.space.size(); ++i) {
      if (!ran_[i]) continue;
      first = std::min(first, times_[i].start);
      last = std::max(last, times_[i].end);
    }
    std::vector<double> dfirst(pl_.D, std::numeric_limits<double>::infinity());
    std::vector<double> dlast(pl_.D, -std::numeric_limits<double>::infinity());
    for (int i = 0; i < pl_.space.size(); ++i) {
      if (!ran_[i]) continue;
      MeasuredOp m;
      m.op = pl_.space.At(i);
      m.device = pl_.device_of[i];
      m.lane = pl_.lane_of[i];
      m.start = (times_[i].start - first) / scale;
      m.end = (times_[i].end - first) / scale;
      dfirst[m.device] = std::min(dfirst[m.device], m.start);
      dlast[m.device] = std::max(dlast[m.device], m.end);
      res.ops.push_back(m);
    }
    res.lane_order = lane_order_;
    res.makespan = res.ops.empty() ? 0.0 : (last - first) / scale;
    for (int d = 0; d < pl_.D; ++d) {
      if (dlast[d] >= dfirst[d]) res.device_span = std::max(res.device_span, dlast[d] - dfirst[d]);
    }
    res.objective = p_.objective == Objective::kMakespan ? res.makespan : res.device_span;
    res.peak_memory = peak_;
    res.peak_bytes = peak_bytes_;
    res.wall_s = res.ops.empty() ? 0.0 : last - first;
    return res;
  }

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

  void StopLocked(Status st) {
    if (stopped_) return;
    stopped_ = true;
    stop_time_ = Clock::now();
    first_error_ = std::move(st);
    control_.Stop();
    for (int r = 0; r < pl_.lanes; ++r) lane_cv_[r].notify_all();
    main_cv_.notify_all();
  }

  void Fail(int r, int op, const Status& st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ && IsCancelled(st)) return;
    lanes_[r].kind = LaneKind::kFailed;
    lanes_[r].note = "failed in " + (op >= 0 ? ToString(pl_.space.At(op)) : std::string("?"));
    std::string where = LaneName(pl_, r);
    if (r >= pl_.D && op >= 0) where += " (device " + std::to_string(pl_.device_of[op]) + ")";
    StopLocked(Status(st.code(), where + ": op " + (op >= 0 ? ToString(pl_.space.At(op)) : "?") +
                                     " failed: " + st.message()));
  }

  // Applies the frees at the head of device d's memory order that have happened.
  void AdvanceLocked(int d, std::vector<Buffer>* to_free) {
    const std::vector<MemEvent>& seq = pl_.mem_seq[d];
    bool moved = false;
    while (next_[d] < static_cast<int>(seq.size())) {
      const MemEvent& e = seq[next_[d]];
      if (e.alloc || !free_ready_[pl_.mem_offset[d] + next_[d]]) break;
      mem_[d] -= e.units;
      mem_bytes_[d] -= e.bytes;
      for (Buffer& b : free_bufs_[e.op]) to_free->push_back(b);
      free_bufs_[e.op].clear();
      ++next_[d];
      moved = true;
    }
    if (moved) NotifyDevice(d);
  }

  void NotifyDevice(int d) {
    lane_cv_[d].notify_all();
    lane_cv_[pl_.D + pl_.link_of_device[d]].notify_all();
  }

  void FreeNow(int d, std::vector<Buffer>& bufs) {
    for (Buffer& b : bufs) {
      if (b.data) be_.FreeDevice(d, b);
    }
    bufs.clear();
  }

  // The activation pieces an op allocates or frees: [from, to).
  std::pair<int, int> PieceRange(const Op& op) const {
    const int all = static_cast<int>(pl_.piece_bytes[op.stage].size());
    switch (op.type) {
      case OpType::kF:
        return {0, all};
      case OpType::kR:
      case OpType::kO:
        return {0, pl_.o_pieces[op.stage]};
      case OpType::kB:
        return {0, pl_.b_pieces[op.stage]};
      case OpType::kW:
        return {pl_.b_pieces[op.stage], all};
    }
    return {0, 0};
  }

  std::size_t Sm(const Op& op) const {
    return static_cast<std::size_t>(op.stage) * pl_.M + op.microbatch;
  }

  // Runs one op of lane r; false when the lane must stop.
  bool RunOp(int r, int i) {
    const Op op = pl_.space.At(i);
    const int d = pl_.device_of[i];
    // 1. Dependencies.
    for (int eid : pl_.in_edges[i]) {
      Message m;
      {
        std::unique_lock<std::mutex> lock(mu_);
        SetState(r, LaneKind::kWaitDep, i, eid);
        lane_cv_[r].wait(lock, [&] { return stopped_ || arrived_[eid]; });
        if (stopped_) return false;
        m = msg_[eid];
        SetState(r, LaneKind::kAwait, i, eid);
      }
      if (Status st = be_.Await(pl_.edges[eid], m); !st.ok()) {
        Fail(r, i, st);
        return false;
      }
    }
    // 2. Memory: wait for this allocation's turn in the device's order.
    const int ticket = pl_.ticket[i];
    const bool allocates = ticket >= 0 && pl_.mem_seq[d][ticket].alloc;
    if (allocates) {
      std::unique_lock<std::mutex> lock(mu_);
      SetState(r, LaneKind::kWaitMemory, i, -1);
      lane_cv_[r].wait(lock, [&] { return stopped_ || next_[d] == ticket; });
      if (stopped_) return false;
    }
    const Clock::time_point started = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return false;
      SetState(r, LaneKind::kRunning, i, -1);
      lanes_[r].last_start = Since(started);
      lane_order_[r].push_back(op);
      Progress();
    }
    std::vector<Buffer>& dev = dev_[Sm(op)];
    const auto [from, to] = PieceRange(op);
    if (allocates) {
      const MemEvent& e = pl_.mem_seq[d][ticket];
      if (dev.empty()) dev.assign(pl_.piece_bytes[op.stage].size(), Buffer{});
      for (int k = from; k < to; ++k) {
        const std::size_t bytes = pl_.piece_bytes[op.stage][k];
        if (bytes == 0) continue;
        StatusOr<Buffer> b = be_.AllocateDevice(r, d, bytes);
        if (!b.ok()) {
          Fail(r, i, b.status());
          return false;
        }
        dev[k] = *b;
      }
      std::vector<Buffer> to_free;
      bool over = false;
      double now_mem = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        mem_[d] += e.units;
        mem_bytes_[d] += e.bytes;
        peak_[d] = std::max(peak_[d], mem_[d]);
        peak_bytes_[d] = std::max(peak_bytes_[d], mem_bytes_[d]);
        now_mem = mem_[d];
        if (p_.memory_limit) {
          const double limit = (*p_.memory_limit)[d];
          over = now_mem > limit + 1e-9 * std::max(1.0, limit);
        }
        ++next_[d];
        AdvanceLocked(d, &to_free);
        NotifyDevice(d);
      }
      FreeNow(d, to_free);
      if (over) {
        Fail(r, i,
             Internal("memory " + FormatNumber(now_mem, 3) + " exceeds memory.limit " +
                      FormatNumber((*p_.memory_limit)[d], 3)));
        return false;
      }
    }
    // 3. Run it.
    OpTimes t;
    Status st;
    if (IsCompute(op.type)) {
      KernelContext ctx;
      ctx.device = d;
      ctx.op = op;
      ctx.activation = &dev;
      ctx.control = &control_;
      st = be_.RunCompute(r, kernel_, ctx, started, &t);
    } else {
      std::vector<Buffer>& host = host_[Sm(op)];
      std::vector<Buffer> dsub(dev.begin() + from, dev.begin() + to);
      const bool to_host = op.type == OpType::kO;
      if (to_host) {
        host.assign(to - from, Buffer{});
        for (int k = from; k < to; ++k) {
          const std::size_t bytes = pl_.piece_bytes[op.stage][k];
          if (bytes == 0) continue;
          StatusOr<Buffer> b = be_.AllocateHost(d, bytes);
          if (!b.ok()) {
            Fail(r, i, b.status());
            return false;
          }
          host[k - from] = *b;
        }
      }
      st = be_.RunCopy(r, d, op, dsub, host, to_host, pl_.expected_s[i], started, &t);
      if (st.ok() && !to_host) {
        for (Buffer& b : host) {
          if (b.data) be_.FreeHost(d, b);
        }
        host.clear();
      }
    }
    if (!st.ok()) {
      Fail(r, i, st);
      return false;
    }
    // 4. Frees (in the device's memory order) and the messages to the consumers.
    std::vector<Buffer> to_free;
    {
      std::lock_guard<std::mutex> lock(mu_);
      times_[i] = t;
      ran_[i] = 1;
      ++lanes_[r].done;
      Progress();
      if (ticket >= 0 && !allocates) {
        std::vector<Buffer>& out = free_bufs_[i];
        for (int k = from; k < to; ++k) {
          if (dev[k].data) out.push_back(dev[k]);
          dev[k] = Buffer{};
        }
        free_ready_[pl_.mem_offset[d] + ticket] = 1;
        AdvanceLocked(d, &to_free);
      }
    }
    FreeNow(d, to_free);
    for (int eid : pl_.out_edges[i]) {
      StatusOr<Message> m = be_.Deliver(pl_.edges[eid], t.end);
      if (!m.ok()) {
        Fail(r, i, m.status());
        return false;
      }
      std::lock_guard<std::mutex> lock(mu_);
      msg_[eid] = *m;
      arrived_[eid] = 1;
      lane_cv_[pl_.edges[eid].to_lane].notify_all();
    }
    return true;
  }

  void LaneMain(int r) {
    bool ok = control_.SleepUntil(origin_);
    if (ok) {
      for (int i : pl_.lane_ops[r]) {
        if (!RunOp(r, i)) {
          ok = false;
          break;
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    LaneState& ls = lanes_[r];
    if (ok) {
      ls.kind = LaneKind::kDone;
      ls.note = "finished";
    } else if (ls.kind == LaneKind::kRunning) {
      ls.kind = LaneKind::kStopped;
      ls.note = "stopped in " + ToString(pl_.space.At(ls.op));
    } else if (ls.kind != LaneKind::kFailed) {
      ls.note = ls.op < 0 ? "stopped before its first op" : "stopped: it " + Waiting(r);
      ls.kind = LaneKind::kStopped;
    }
    ls.exit = Since(Clock::now());
    --running_;
    main_cv_.notify_all();
  }

  std::string Waiting(int r) const {
    const LaneState& ls = lanes_[r];
    const std::string op = ls.op >= 0 ? ToString(pl_.space.At(ls.op)) : "?";
    if (ls.edge >= 0) {
      const Edge& e = pl_.edges[ls.edge];
      const std::string from = ToString(pl_.space.At(e.from));
      const std::string dev = "device " + std::to_string(e.from_device);
      if (ls.kind == LaneKind::kAwait || arrived_[ls.edge]) {
        return "waits with " + op + " for the transfer of " + from + " from " + dev +
               ", which ended at " + FormatNumber(times_[e.from].end, 3) + " s";
      }
      return "waits with " + op + " for " + from + " (" + LaneName(pl_, e.from_lane) + ")";
    }
    if (ls.kind == LaneKind::kWaitMemory) {
      return "waits with " + op + " for its turn to allocate memory on device " +
             std::to_string(pl_.device_of[ls.op]);
    }
    return "has not started";
  }

  std::string WatchdogMessage(Clock::time_point now, double watchdog_s) const {
    std::ostringstream os;
    os << "watchdog: no op started or finished for " << FormatNumber(watchdog_s, 3) << " s";
    std::vector<std::string> parts;
    for (int r = 0; r < pl_.lanes; ++r) {  // running ops first: they hold the others
      const LaneState& ls = lanes_[r];
      if (ls.kind != LaneKind::kRunning) continue;
      parts.push_back(LaneName(pl_, r) + " is stuck in " + ToString(pl_.space.At(ls.op)) +
                      " (running for " + FormatNumber(Seconds(now - ls.since), 3) +
                      " s, expected " + FormatNumber(pl_.expected_s[ls.op], 3) + " s)");
    }
    for (int r = 0; r < pl_.lanes; ++r) {
      const LaneState& ls = lanes_[r];
      if (ls.kind == LaneKind::kWaitDep || ls.kind == LaneKind::kAwait ||
          ls.kind == LaneKind::kWaitMemory) {
        parts.push_back(LaneName(pl_, r) + " " + Waiting(r));
      }
    }
    const std::size_t shown = std::min<std::size_t>(parts.size(), 4);
    for (std::size_t k = 0; k < shown; ++k) os << (k ? "; " : ": ") << parts[k];
    if (parts.size() > shown) os << "; and " << parts.size() - shown << " more lanes wait";
    return os.str();
  }

  LaneReport Report(int r) const {
    const LaneState& ls = lanes_[r];
    LaneReport rep;
    rep.lane = LaneName(pl_, r);
    rep.ops_done = ls.done;
    rep.ops_total = static_cast<int>(pl_.lane_ops[r].size());
    rep.last_start_s = ls.last_start;
    rep.exit_s = ls.exit;
    rep.state = ls.note.empty() ? "still running" : ls.note;
    return rep;
  }

  // Frees whatever an aborted iteration left allocated.
  void ReleaseAll() {
    for (std::size_t k = 0; k < dev_.size(); ++k) {
      const int d = p_.stage_device[k / pl_.M];
      for (Buffer& b : dev_[k]) {
        if (b.data) be_.FreeDevice(d, b);
      }
      for (Buffer& b : host_[k]) {
        if (b.data) be_.FreeHost(d, b);
      }
    }
    for (int i = 0; i < pl_.space.size(); ++i) {
      for (Buffer& b : free_bufs_[i]) {
        if (b.data) be_.FreeDevice(pl_.device_of[i], b);
      }
    }
  }

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
};

}  // namespace

Executor::Executor(const Problem& p, Backend& backend, StageKernel& kernel, ExecutorOptions opt)
    : p_(p), backend_(backend), kernel_(kernel), opt_(opt) {}

StatusOr<RunResult> Executor::Run(const Schedule& s) {
  trace_ = RunTrace{};
  if (!(opt_.time_scale > 0) || !std::isfinite(opt_.time_scale)) {
    return InvalidArgument("time_scale: must be a finite number > 0");
  }
  if (!(opt_.bytes_per_unit > 0) || !std::isfinite(opt_.bytes_per_unit)) {
    return InvalidArgument("bytes_per_unit: must be a finite number > 0");
  }
  if (opt_.iterations < 1) return InvalidArgument("iterations: must be >= 1");
  if (opt_.watchdog_s < 0) return InvalidArgument("watchdog_s: must be >= 0");
  StatusOr<SimResult> sim = Simulate(p_, s);
  if (!sim.ok()) return sim.status();
  const Plan plan = BuildPlan(p_, s, *sim, opt_);
  const double watchdog = opt_.watchdog_s > 0 ? opt_.watchdog_s : 2.0 + 4.0 * plan.longest_s;

  RunControl control;
  BackendSetup setup;
  setup.problem = &p_;
  setup.time_scale = opt_.time_scale;
  setup.control = &control;
  setup.ops = plan.space.size();
  setup.edges = plan.edges;
  setup.host_bytes = plan.host_bytes;
  if (Status st = backend_.Prepare(setup); !st.ok()) return st;

  RunResult res;
  res.predicted = *sim;
  res.predicted_peak_bytes = plan.peak_bytes;
  res.time_scale = opt_.time_scale;
  res.bytes_per_unit = opt_.bytes_per_unit;

  // Static memory (weights, optimizer state) held for the whole run.
  std::vector<Buffer> statics(plan.D);
  const auto release_statics = [&] {
    for (int d = 0; d < plan.D; ++d) {
      if (statics[d].data) backend_.FreeDevice(d, statics[d]);
      statics[d] = Buffer{};
    }
  };
  if (opt_.allocate_static) {
    for (int d = 0; d < plan.D; ++d) {
      if (plan.static_bytes[d] <= 0) continue;
      StatusOr<Buffer> b =
          backend_.AllocateDevice(d, d, static_cast<std::size_t>(plan.static_bytes[d]));
      if (!b.ok()) {
        release_statics();
        return Status(b.status().code(),
                      "device " + std::to_string(d) + ": static memory: " + b.status().message());
      }
      statics[d] = *b;
    }
  }
  for (int it = 0; it < opt_.iterations; ++it) {
    Iteration iter(p_, plan, opt_, backend_, kernel_, control);
    Status st = iter.Run(watchdog, &trace_, it);
    if (!st.ok()) {
      release_statics();
      if (opt_.iterations > 1) {
        return Status(st.code(), "iteration " + std::to_string(it) + ": " + st.message());
      }
      return st;
    }
    res.iterations.push_back(iter.Result());
  }
  release_statics();
  return res;
}

}  // namespace optpipe::runtime
