// One iteration of a run: a thread per lane walks its ops in schedule order
// (dependencies, memory turn, the op itself, frees and messages), then the
// measured result.
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include "runtime/executor_internal.h"

namespace optpipe::runtime::internal {

Iteration::Iteration(const Problem& p, const Plan& pl, const ExecutorOptions& o, Backend& be,
                     StageKernel& k, RunControl& control)
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
  payload_.assign(pl.edges.size(), {});
  for (const Edge& e : pl.edges) {
    const bool mine = pl.me < 0 || e.from_device == pl.me || e.to_device == pl.me;
    if (e.bytes > 0 && mine) payload_[e.id].assign(e.bytes, std::byte{0});
  }
}

Status Iteration::Run(double watchdog_s, RunTrace* trace, int iteration) {
  control_.Reset();
  origin_ = Clock::now() + std::chrono::milliseconds(5);
  if (o_.peers) {  // rank 0's origin, far enough ahead for every rank to hear of it
    StatusOr<Clock::time_point> agreed =
        o_.peers->AgreeOrigin(Clock::now() + std::chrono::milliseconds(20));
    if (!agreed.ok()) return agreed.status();
    origin_ = *agreed;
  }
  if (Status st = be_.BeginIteration(origin_); !st.ok()) return st;
  last_progress_ = std::max(origin_, Clock::now());
  // Lanes without an op of this process's device (another rank's) do not start.
  std::vector<int> local;
  for (int r = 0; r < pl_.lanes; ++r) {
    if (pl_.me < 0 || !pl_.lane_ops[r].empty()) {
      local.push_back(r);
    } else {
      lanes_[r].kind = LaneKind::kDone;
      lanes_[r].note = "another rank's";
    }
  }
  running_ = static_cast<int>(local.size());
  std::vector<std::thread> threads;
  threads.reserve(local.size());
  for (int r : local) threads.emplace_back([this, r] { LaneMain(r); });
  Watch(watchdog_s);
  for (std::thread& t : threads) t.join();
  if (o_.peers && !stopped_) {
    if (Status st = o_.peers->Flush(control_); !st.ok()) StopLocked(st);
  }
  const Status end = be_.EndIteration(stopped_);
  trace->iteration = iteration;
  trace->stop_s = stopped_ ? Seconds(stop_time_ - origin_) : -1.0;
  trace->lanes.clear();
  for (int r = 0; r < pl_.lanes; ++r) trace->lanes.push_back(Report(r));
  if (stopped_) return first_error_;
  if (!end.ok()) return end;
  for (int d = 0; d < pl_.D; ++d) {
    if (pl_.me >= 0 && d != pl_.me) continue;
    if (next_[d] != static_cast<int>(pl_.mem_seq[d].size()) ||
        mem_bytes_[d] != pl_.static_bytes[d]) {
      return Internal("device " + std::to_string(d) + ": memory events left after the iteration");
    }
  }
  return OkStatus();
}

IterationResult Iteration::Result() const {
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

bool Iteration::RunOp(int r, int i) {
  const Op op = pl_.space.At(i);
  const int d = pl_.device_of[i];
  // 1. Dependencies.
  for (int eid : pl_.in_edges[i]) {
    Message m;
    const Edge& e = pl_.edges[eid];
    if (Remote(pl_, e)) {  // from another rank: its message is the data and the producer's end
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_) return false;
        SetState(r, LaneKind::kAwait, i, eid);
      }
      StatusOr<double> end_s =
          o_.peers->Recv(e.from_device, eid, payload_[eid].data(), e.bytes, control_);
      if (end_s.ok()) m.ready_s = *end_s + e.lag_s;
      const Status st = end_s.ok() ? be_.Await(e, m) : end_s.status();
      if (!st.ok()) {
        Fail(r, i, st);
        return false;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        Progress();
      }
      continue;
    }
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
  if (allocates && !AwaitMemoryTurn(r, i, d, ticket)) return false;
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
  if (allocates && !AllocatePieces(r, i, d, ticket, dev, from, to)) return false;
  // 3. Run it. Its consumers hear of it once the backend has launched it
  // (Launched: CUDA may queue them behind its end event, the CPU tells them
  // when it has ended).
  const Launched deliver = [&](double end_s) -> Status {
    for (int eid : pl_.out_edges[i]) {
      const Edge& e = pl_.edges[eid];
      if (Remote(pl_, e)) {
        if (Status st = o_.peers->Send(e.to_device, eid, payload_[eid].data(), e.bytes, end_s);
            !st.ok()) {
          return st;
        }
        continue;
      }
      StatusOr<Message> m = be_.Deliver(pl_.edges[eid], end_s);
      if (!m.ok()) return m.status();
      std::lock_guard<std::mutex> lock(mu_);
      msg_[eid] = *m;
      arrived_[eid] = 1;
      lane_cv_[pl_.edges[eid].to_lane].notify_all();
    }
    return OkStatus();
  };
  OpTimes t;
  Status st;
  if (IsCompute(op.type)) {
    KernelContext ctx;
    ctx.device = d;
    ctx.op = op;
    ctx.activation = &dev;
    ctx.control = &control_;
    if (pl_.data_in[i] >= 0) {
      std::vector<std::byte>& in = payload_[pl_.data_in[i]];
      ctx.input = Buffer{in.data(), in.size()};
    }
    if (pl_.data_out[i] >= 0) {
      std::vector<std::byte>& out = payload_[pl_.data_out[i]];
      ctx.output = Buffer{out.data(), out.size()};
    }
    st = be_.RunCompute(r, kernel_, ctx, started, deliver, &t);
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
    st = be_.RunCopy(r, d, op, dsub, host, to_host, pl_.expected_s[i], started, deliver, &t);
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
  // 4. Frees, in the device's memory order.
  std::vector<Buffer> to_free;
  {
    std::lock_guard<std::mutex> lock(mu_);
    times_[i] = t;
    ran_[i] = 1;
    ++lanes_[r].done;
    Progress();
    if (ticket >= 0 && !allocates) ReleasePiecesLocked(i, d, ticket, dev, from, to, &to_free);
  }
  FreeNow(r, d, to_free);
  return true;
}

void Iteration::LaneMain(int r) {
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

}  // namespace optpipe::runtime::internal
