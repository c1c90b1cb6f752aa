#include "core/simulator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "core/dag.h"
#include "core/text_format.h"

namespace optpipe {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
// What a failed run says when the caller asked for no names (set_describe_deadlocks).
constexpr const char* kDeadlockMessage = "the orders deadlock under memory.limit";

}  // namespace

Simulator::Simulator(const Problem& p)
    : p_(&p), space_(p.op_space()), link_of_device_(LinkOfDevice(p)) {}

const std::vector<Op>& Simulator::Lane(const Schedule& s, int r) const {
  return r < p_->devices ? s.compute[r] : s.copy[r - p_->devices];
}

Status Simulator::CheckStructure(const Schedule& s) {
  const Problem& p = *p_;
  if (s.compute.size() != static_cast<std::size_t>(p.devices) ||
      s.copy.size() != p.host_links.size()) {
    return InvalidArgument("schedule has " + std::to_string(s.compute.size()) +
                           " device lanes and " + std::to_string(s.copy.size()) +
                           " host-link lanes; the problem has " + std::to_string(p.devices) +
                           " and " + std::to_string(p.host_links.size()));
  }
  if (!s.release.empty() && s.release.size() != static_cast<std::size_t>(space_.size())) {
    return InvalidArgument("schedule has " + std::to_string(s.release.size()) +
                           " release times; the problem has " + std::to_string(space_.size()) +
                           " op slots");
  }
  const int lanes = p.devices + static_cast<int>(p.host_links.size());
  std::vector<char>& seen = seen_;
  seen.assign(space_.size(), 0);
  offloaded_.assign(static_cast<std::size_t>(p.stages()) * p.microbatches, 0);
  std::size_t count = 0;
  for (int r = 0; r < lanes; ++r) {
    const bool compute = r < p.devices;
    const auto lane_name = [&] {
      return compute ? "device " + std::to_string(r) : "host link " + std::to_string(r - p.devices);
    };
    for (const Op& op : Lane(s, r)) {
      // Messages are built only on the error paths: this loop runs on every simulation.
      const auto bad = [&](const std::string& why) {
        return InvalidArgument(lane_name() + ": op " + ToString(op) + why);
      };
      if (!space_.Contains(op)) {
        return bad(" is outside the problem's " + std::to_string(p.stages()) + " stages x " +
                   std::to_string(p.microbatches) + " micro-batches");
      }
      if (IsCompute(op.type) != compute) return bad(" does not belong on this kind of lane");
      if (op.type == OpType::kW && !p.split_backward) return bad(" but the problem fuses W into B");
      if (IsCopy(op.type) && !p.offload_allowed()) return bad(" but the problem allows no offload");
      const int d = DeviceOf(p, op);
      if (compute ? d != r : link_of_device_[d] != r - p.devices) {
        return bad(" belongs to device " + std::to_string(d) +
                   (compute ? "" : " (host link " + std::to_string(link_of_device_[d]) + ")"));
      }
      char& mark = seen[space_.Index(op)];
      if (mark) return bad(" appears twice");
      mark = 1;
      ++count;
      if (op.type == OpType::kO) {
        offloaded_[static_cast<std::size_t>(op.stage) * p.microbatches + op.microbatch] = 1;
      }
    }
  }
  // Counting keeps the common (valid) case linear without building the op list.
  const std::size_t sm = static_cast<std::size_t>(p.stages()) * p.microbatches;
  std::size_t offloads = 0;
  for (std::size_t k = 0; k < sm; ++k) {
    offloads += offloaded_[k];
    if (seen[4 * sm + k] && !offloaded_[k]) {
      return InvalidArgument("op " + ToString(space_.At(static_cast<int>(4 * sm + k))) +
                             " reloads an activation never offloaded");
    }
  }
  if (count != sm * (p.split_backward ? 3 : 2) + 2 * offloads) {
    for (const Op& op : AllOps(p, offloaded_)) {
      if (!seen[space_.Index(op)]) {
        return InvalidArgument("op " + ToString(op) + " is missing from the schedule");
      }
    }
  }
  return OkStatus();
}

void Summarize(const Problem& p, SimResult& r) {
  const int D = p.devices;
  const OpSpace space = p.op_space();
  double first = std::numeric_limits<double>::infinity(), last = -first;
  std::vector<double> dfirst(D, first), dlast(D, last);
  for (std::size_t i = 0; i < r.start.size(); ++i) {
    if (std::isnan(r.start[i])) continue;
    const int d = DeviceOf(p, space.At(static_cast<int>(i)));
    first = std::min(first, r.start[i]);
    last = std::max(last, r.end[i]);
    dfirst[d] = std::min(dfirst[d], r.start[i]);
    dlast[d] = std::max(dlast[d], r.end[i]);
  }
  r.makespan = last >= first ? last - first : 0.0;
  r.span.assign(D, 0.0);
  r.device_span = 0;
  double busy = 0;
  for (int d = 0; d < D; ++d) {
    if (dlast[d] >= dfirst[d]) r.span[d] = dlast[d] - dfirst[d];
    r.device_span = std::max(r.device_span, r.span[d]);
    busy += r.busy[d];
  }
  r.objective = p.objective == Objective::kMakespan ? r.makespan : r.device_span;
  r.bubble_ratio = r.makespan > 0 ? 1.0 - busy / (D * r.makespan) : 0.0;
}

namespace {

// Summarize for a run of `s`: a device's first op is the first of its lane
// and its last op the last of it (its copies run between its forwards and
// backwards: O after F, R after O, B after R), so the spans need only the
// lanes' ends, not every op.
void SummarizeLanes(const Problem& p, const Schedule& s, const OpSpace& space, SimResult& r) {
  const int D = p.devices;
  double first = std::numeric_limits<double>::infinity(), last = -first, busy = 0;
  r.span.assign(D, 0.0);
  r.device_span = 0;
  for (int d = 0; d < D; ++d) {
    busy += r.busy[d];
    const std::vector<Op>& lane = s.compute[d];
    if (lane.empty()) continue;
    const double a = r.start[space.Index(lane.front())], b = r.end[space.Index(lane.back())];
    first = std::min(first, a);
    last = std::max(last, b);
    r.span[d] = b - a;
    r.device_span = std::max(r.device_span, r.span[d]);
  }
  r.makespan = last >= first ? last - first : 0.0;
  r.objective = p.objective == Objective::kMakespan ? r.makespan : r.device_span;
  r.bubble_ratio = r.makespan > 0 ? 1.0 - busy / (D * r.makespan) : 0.0;
}

}  // namespace

StatusOr<SimResult> Simulator::Run(const Schedule& s) {
  timed_by_ = TimedBy::kNone;
  if (Status st = CheckStructure(s); !st.ok()) return st;
  return Time(s, nullptr, 0.0);
}

StatusOr<SimResult> Simulator::Time(const Schedule& s, const SimResult* base_run, double from) {
  if (timing_ == Timing::kAuto) {
    SimResult res;
    double wait_at = 0;
    switch (LongestPath(s, base_run, from, res, wait_at)) {
      case PassEnd::kTimed:
        timed_by_ = TimedBy::kLongestPath;
        return res;
      case PassEnd::kDeadlock:
        if (describe_) break;  // Loop names the ops
        timed_by_ = TimedBy::kLongestPath;
        return Infeasible(kDeadlockMessage);
      case PassEnd::kWaits:
        if (wait_at <= from) break;
        // Up to the first allocation that waits, the pass is the event loop:
        // Loop goes on from there, with the pass's times and memory.
        timed_by_ = TimedBy::kBoth;
        return Loop(s, &res, wait_at, /*memory_handed_over=*/true);
      case PassEnd::kNotExact:
        break;
    }
  }
  timed_by_ = TimedBy::kEventLoop;
  return Loop(s, base_run, from);
}

double Simulator::FirstChange(const Schedule& s, const Schedule& base, const SimResult& base_run) {
  const Problem& p = *p_;
  const int lanes = p.devices + static_cast<int>(p.host_links.size());
  // An op at a changed place may start as soon as its lane is free of the
  // unchanged ops before it.
  const auto free_before = [&](const std::vector<Op>& lane, std::size_t k) {
    return k == 0 ? 0.0 : base_run.end[space_.Index(lane[k - 1])];
  };
  double from = std::numeric_limits<double>::infinity();
  for (int r = 0; r < lanes && from > 0; ++r) {
    const std::vector<Op>& a = Lane(s, r);
    const std::vector<Op>& b = Lane(base, r);
    const std::size_t k = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
    if (k < a.size() || k < b.size()) from = std::min(from, free_before(a, k));
  }
  if (!s.release.empty() || !base.release.empty()) {
    for (int i = 0; i < space_.size() && from > 0; ++i) {
      const double rs = s.ReleaseOf(i);
      if (rs == base.ReleaseOf(i)) continue;
      const double was = base_run.start[i];
      from = std::min(from, std::isnan(was) ? rs : std::min(rs, was));
    }
  }
  // An activation offloaded in one and kept in the other: its B waits for a
  // reload in one only.
  const std::size_t sm = static_cast<std::size_t>(p.stages()) * p.microbatches;
  base_offloaded_.assign(sm, 0);
  for (const auto& lane : base.copy) {
    for (const Op& op : lane) {
      if (op.type == OpType::kO)
        base_offloaded_[static_cast<std::size_t>(op.stage) * p.microbatches + op.microbatch] = 1;
    }
  }
  for (std::size_t k = 0; k < sm && from > 0; ++k) {
    if (offloaded_[k] == base_offloaded_[k]) continue;
    const Op b{OpType::kB, static_cast<int>(k / p.microbatches),
               static_cast<int>(k % p.microbatches)};
    const std::vector<Op>& lane = s.compute[DeviceOf(p, b)];
    const std::size_t at = std::find(lane.begin(), lane.end(), b) - lane.begin();
    from = std::min(from, free_before(lane, at));
  }
  return from;
}

StatusOr<SimResult> Simulator::RunChanged(const Schedule& s, const Schedule& base,
                                          const SimResult& base_run) {
  timed_by_ = TimedBy::kNone;
  if (Status st = CheckStructure(s); !st.ok()) return st;
  const double from = FirstChange(s, base, base_run);
  return from > 0 ? Time(s, &base_run, from) : Time(s, nullptr, 0.0);
}

Simulator::PassEnd Simulator::LongestPath(const Schedule& s, const SimResult* base_run, double from,
                                          SimResult& res, double& wait_at) {
  const Problem& p = *p_;
  const int D = p.devices;
  const int lanes = D + static_cast<int>(p.host_links.size());
  const int n = space_.size();
  res.start.assign(n, kNaN);
  res.end.assign(n, kNaN);
  res.busy.assign(D, 0.0);
  res.peak_memory = p.static_memory;
  mem_ = p.static_memory;
  double* const start = res.start.data();
  double* const end = res.end.data();
  pos_.assign(lanes, 0);
  lane_free_.assign(lanes, from);
  running_.assign(lanes, -1);
  std::size_t total = 0, timed = 0;
  for (int r = 0; r < lanes; ++r) total += Lane(s, r).size();
  // Resuming (RunChanged): the ops that started before `from` keep
  // base_run's times, and memory takes them in Loop's order, lane by lane;
  // the op still running at `from` frees its memory in the replay below.
  if (base_run) {
    for (int r = 0; r < lanes; ++r) {
      const std::vector<Op>& lane = Lane(s, r);
      int k = 0;
      for (; k < static_cast<int>(lane.size()); ++k) {
        const Op op = lane[k];
        const int i = space_.Index(op);
        const double st = base_run->start[i];
        if (std::isnan(st) || st >= from) break;
        const int d = DeviceOf(p, op);
        start[i] = st;
        end[i] = base_run->end[i];
        mem_[d] += Allocates(p, op);
        if (IsCompute(op.type)) res.busy[d] += Duration(p, op);
        if (end[i] < from) {
          mem_[d] -= Frees(p, op);
        } else {
          // Only a lane's last op can still run (its ops ran one at a time):
          // anything else is a base run of other orders, left to Loop.
          if (running_[r] >= 0) return PassEnd::kNotExact;
          running_[r] = i;
        }
        ++timed;
      }
      if (running_[r] >= 0 && running_[r] != space_.Index(lane[k - 1])) return PassEnd::kNotExact;
      pos_[r] = k;
      if (k > 0) lane_free_[r] = std::max(from, end[space_.Index(lane[k - 1])]);
    }
  }
  resumed_at_ = pos_;

  // Times: every lane runs its ops in order until one has a predecessor not
  // yet timed, and waits on it (as Loop's watchers) until that is timed.
  // Each op's start is the max of the doubles Loop's start is the max of.
  first_watcher_.assign(n, -1);
  next_watcher_.assign(lanes, -1);
  stack_.clear();
  for (int r = lanes - 1; r >= 0; --r) stack_.push_back(r);
  while (!stack_.empty()) {
    const int r = stack_.back();
    stack_.pop_back();
    const std::vector<Op>& lane = Lane(s, r);
    const int size = static_cast<int>(lane.size());
    int k = pos_[r];
    double free_at = lane_free_[r];
    for (; k < size; ++k) {
      const Op op = lane[k];
      double ready = free_at;
      int missing = -1;
      ForEachPredecessor(p, offloaded_, op, [&](const Op& q, double lag) {
        const int qi = space_.Index(q);
        if (std::isnan(end[qi])) {
          missing = qi;
        } else {
          ready = std::max(ready, end[qi] + lag);
        }
      });
      if (missing >= 0) {
        next_watcher_[r] = first_watcher_[missing];
        first_watcher_[missing] = r;
        break;
      }
      const int i = space_.Index(op);
      ready = std::max(ready, s.ReleaseOf(i));
      const double dur = Duration(p, op);
      const double e = ready + dur;
      if (!(e > ready)) return PassEnd::kNotExact;  // ends as it starts: see the header
      start[i] = ready;
      end[i] = e;
      if (r < D) res.busy[r] += dur;
      for (int w = first_watcher_[i]; w >= 0; w = next_watcher_[w]) stack_.push_back(w);
      free_at = e;
      ++timed;
    }
    pos_[r] = k;
    lane_free_[r] = free_at;
  }
  if (timed < total) return PassEnd::kDeadlock;

  // Memory, device by device. Where an allocation would wait, the pass holds
  // up to the first such time over all devices, with the memory reached just
  // before it, which a second replay stops at.
  const std::vector<double> before = mem_;
  wait_at = kInf;
  for (int d = 0; d < D; ++d) wait_at = std::min(wait_at, ReplayMemory(s, d, wait_at, res));
  if (wait_at == kInf) {
    SummarizeLanes(p, s, space_, res);
    return PassEnd::kTimed;
  }
  handover_mem_ = before;
  std::swap(mem_, handover_mem_);
  handover_peak_ = p.static_memory;
  std::swap(res.peak_memory, handover_peak_);
  for (int d = 0; d < D; ++d) ReplayMemory(s, d, wait_at, res);
  std::swap(mem_, handover_mem_);
  std::swap(res.peak_memory, handover_peak_);
  return PassEnd::kWaits;
}

double Simulator::ReplayMemory(const Schedule& s, int d, double until, SimResult& res) {
  const Problem& p = *p_;
  const int D = p.devices;
  const double* const start = res.start.data();
  const double* const end = res.end.data();
  const bool limited = p.memory_limit.has_value();
  const double limit = limited ? (*p.memory_limit)[d] : 0.0;
  const double room = limit + 1e-9 * std::max(1.0, limit);  // Loop's test, to the bit
  double mem = mem_[d], peak = res.peak_memory[d];
  // One event as Loop's kOpEnds or kLaneLooks takes it: false where the
  // allocation would wait.
  const auto ends = [&](const Op& op) {
    if (const double fr = Frees(p, op); fr > 0) mem -= fr;
  };
  const auto starts = [&](const Op& op) {
    const double alloc = Allocates(p, op);
    if (alloc > 0 && limited && mem + alloc > room) return false;
    mem += alloc;
    peak = std::max(peak, mem);
    return true;
  };
  double waits = kInf;
  // A lane's events of device d: the end of the op running at `from`
  // (resuming), then each op's start and end. With every op ending after it
  // starts, a lane's events tie only where an op ends as the next starts,
  // and Loop takes ends first: each lane's events are already in Loop's order.
  const std::vector<Op>& own = s.compute[d];
  const int link = link_of_device_[d];     // -1 for a device of no host link
  if (link < 0 || s.copy[link].empty()) {  // the compute lane alone, in its order
    int k = resumed_at_[d];
    if (running_[d] >= 0 && end[space_.Index(own[k - 1])] < until) ends(own[k - 1]);
    for (const int n = static_cast<int>(own.size()); k < n; ++k) {
      const int i = space_.Index(own[k]);
      if (start[i] >= until) break;
      if (!starts(own[k])) {
        waits = start[i];
        break;
      }
      if (end[i] >= until) break;
      ends(own[k]);
    }
  } else {
    // Merged with the host link's events of device d. At one time, Loop
    // takes ends (by op index: compute ops first) before starts (by lane:
    // the device before its link).
    struct Cursor {
      const std::vector<Op>* lane;
      int k;
      bool at_end;  // the next event is lane[k]'s end, not its start
      double t;     // its time; infinity when the lane has no more
    };
    const auto load = [&](Cursor& c) {
      const int n = static_cast<int>(c.lane->size());
      // A shared link carries ops of other devices: skip them.
      while (c.k < n && !c.at_end && DeviceOf(p, (*c.lane)[c.k]) != d) ++c.k;
      if (c.k == n) {
        c.t = kInf;
        return;
      }
      const int i = space_.Index((*c.lane)[c.k]);
      c.t = c.at_end ? end[i] : start[i];
    };
    const auto first = [&](int r) {
      Cursor c{&Lane(s, r), resumed_at_[r], false, 0.0};
      if (running_[r] >= 0 && DeviceOf(p, space_.At(running_[r])) == d) {
        --c.k;
        c.at_end = true;
      }
      load(c);
      return c;
    };
    Cursor a = first(d), b = first(D + link);
    while (std::min(a.t, b.t) < until) {
      Cursor& c = a.t < b.t || (a.t == b.t && (a.at_end || !b.at_end)) ? a : b;
      const Op& op = (*c.lane)[c.k];
      if (c.at_end) {
        ends(op);
        c.at_end = false;
        ++c.k;
      } else {
        if (!starts(op)) {
          waits = c.t;
          break;
        }
        c.at_end = true;
      }
      load(c);
    }
  }
  mem_[d] = mem;
  res.peak_memory[d] = peak;
  return waits;
}

StatusOr<SimResult> Simulator::Loop(const Schedule& s, const SimResult* base_run, double from,
                                    bool memory_handed_over) {
  const Problem& p = *p_;
  const int D = p.devices;
  const int lanes = D + static_cast<int>(p.host_links.size());
  const int n = space_.size();

  start_.assign(n, kNaN);
  end_.assign(n, kNaN);
  pos_.assign(lanes, 0);
  running_.assign(lanes, -1);
  waits_for_.assign(lanes, -1);
  first_watcher_.assign(n, -1);
  next_watcher_.assign(lanes, -1);
  mem_waiters_.assign(D, {});
  mem_blocked_.assign(lanes, 0);
  blocked_at_.assign(lanes, 0.0);
  // Handed over, the memory in use and the peaks already count the ops
  // that started before `from`.
  mem_ = memory_handed_over ? handover_mem_ : p.static_memory;
  SimResult res;
  res.peak_memory = memory_handed_over ? handover_peak_ : p.static_memory;
  res.busy.assign(D, 0.0);
  // The event heap lives in heap_, which keeps its capacity from run to run.
  std::vector<Event>& events = heap_;
  events.clear();
  const auto push = [&events](Event e) {
    events.push_back(e);
    std::push_heap(events.begin(), events.end(), std::greater<>{});
  };
  std::size_t total = 0, done = 0;
  for (int r = 0; r < lanes; ++r) total += Lane(s, r).size();
  // Resuming: the ops that started before `from` keep base_run's times; the
  // one still running on a lane ends as an event, as in the full run.
  if (base_run) {
    for (int r = 0; r < lanes; ++r) {
      const std::vector<Op>& lane = Lane(s, r);
      int k = 0;
      for (; k < static_cast<int>(lane.size()); ++k) {
        const Op op = lane[k];
        const int i = space_.Index(op);
        const double st = base_run->start[i];
        if (std::isnan(st) || st >= from) break;
        const int d = DeviceOf(p, op);
        start_[i] = st;
        end_[i] = base_run->end[i];
        if (!memory_handed_over) mem_[d] += Allocates(p, op);
        if (IsCompute(op.type)) res.busy[d] += Duration(p, op);
        if (end_[i] < from) {
          if (!memory_handed_over) mem_[d] -= Frees(p, op);
          ++done;
        } else {
          running_[r] = i;
          push({end_[i], Event::kOpEnds, i});
        }
      }
      pos_[r] = k;
    }
  }
  for (int r = 0; r < lanes; ++r) push({from, Event::kLaneLooks, r});

  while (!events.empty()) {
    std::pop_heap(events.begin(), events.end(), std::greater<>{});
    const Event ev = events.back();
    events.pop_back();
    const double t = ev.t();
    if (ev.kind() == Event::kOpEnds) {  // free its lane and memory, wake whoever waited
      const int i = ev.id();
      const Op op = space_.At(i);
      const int d = DeviceOf(p, op);
      const int r = IsCompute(op.type) ? d : D + link_of_device_[d];
      running_[r] = -1;
      ++done;
      push({t, Event::kLaneLooks, r});
      for (int w = first_watcher_[i]; w >= 0; w = next_watcher_[w]) push({t, Event::kLaneLooks, w});
      first_watcher_[i] = -1;
      if (const double fr = Frees(p, op); fr > 0) {
        mem_[d] -= fr;
        for (int w : mem_waiters_[d]) {
          mem_blocked_[w] = 0;
          push({t, Event::kLaneLooks, w});
        }
        mem_waiters_[d].clear();
      }
      continue;
    }
    // A lane tries to start its next op at time t.
    const int r = ev.id();
    const std::vector<Op>& lane = Lane(s, r);
    if (running_[r] >= 0 || pos_[r] == static_cast<int>(lane.size())) continue;
    const Op h = lane[pos_[r]];
    const int hi = space_.Index(h);
    int missing = -1;
    double ready = 0.0;
    ForEachPredecessor(p, offloaded_, h, [&](const Op& q, double lag) {
      const int qi = space_.Index(q);
      if (std::isnan(end_[qi]) || end_[qi] > t) {
        if (missing < 0) missing = qi;
      } else {
        ready = std::max(ready, end_[qi] + lag);
      }
    });
    if (missing >= 0) {  // wake this lane when that predecessor ends
      if (waits_for_[r] != missing) {
        waits_for_[r] = missing;
        next_watcher_[r] = first_watcher_[missing];
        first_watcher_[missing] = r;
      }
      continue;
    }
    waits_for_[r] = -1;
    ready = std::max(ready, s.ReleaseOf(hi));
    if (ready > t) {
      push({ready, Event::kLaneLooks, r});
      continue;
    }
    const int d = DeviceOf(p, h);
    const double alloc = Allocates(p, h);
    if (alloc > 0 && p.memory_limit) {
      const double limit = (*p.memory_limit)[d];
      if (mem_[d] + alloc > limit + 1e-9 * std::max(1.0, limit)) {
        if (!mem_blocked_[r]) mem_waiters_[d].push_back(r);
        mem_blocked_[r] = 1;
        blocked_at_[r] = t;
        continue;
      }
    }
    const double dur = Duration(p, h);
    start_[hi] = t;
    end_[hi] = t + dur;
    mem_[d] += alloc;
    res.peak_memory[d] = std::max(res.peak_memory[d], mem_[d]);
    if (IsCompute(h.type)) res.busy[d] += dur;
    running_[r] = hi;
    ++pos_[r];
    push({t + dur, Event::kOpEnds, hi});
  }

  if (done < total) {
    return Infeasible(describe_ ? DescribeDeadlock(s) : kDeadlockMessage);
  }

  res.start = start_;
  res.end = end_;
  SummarizeLanes(p, s, space_, res);
  return res;
}

std::string Simulator::DescribeDeadlock(const Schedule& s) const {
  const Problem& p = *p_;
  const int D = p.devices;
  std::ostringstream os;
  std::ostringstream order;
  bool memory = false;
  int waiting = 0;
  for (int r = 0; r < D + static_cast<int>(p.host_links.size()); ++r) {
    const auto& lane = Lane(s, r);
    if (pos_[r] == static_cast<int>(lane.size())) continue;
    const Op h = lane[pos_[r]];
    const int d = DeviceOf(p, h);
    const std::string where =
        r < D ? "device " + std::to_string(r) : "host link " + std::to_string(r - D);
    if (mem_blocked_[r]) {
      const double t = blocked_at_[r];
      memory = true;
      os << "memory: " << ToString(h) << " on device " << d << " cannot allocate "
         << FormatNumber(Allocates(p, h)) << " at t=" << FormatNumber(t) << " with "
         << FormatNumber(mem_[d]) << " in use of limit " << FormatNumber((*p.memory_limit)[d])
         << ", and nothing queued before it can free memory; ";
    } else if (waits_for_[r] >= 0 && ++waiting <= 3) {
      order << where << " waits with " << ToString(h) << " for "
            << ToString(space_.At(waits_for_[r])) << ", which never runs; ";
    }
  }
  if (waiting > 3) order << "and " << waiting - 3 << " more lanes wait behind them; ";
  std::string msg = memory ? "infeasible: " + os.str() + order.str()
                           : "deadlock: the orders wait on each other: " + order.str();
  if (msg.size() >= 2) msg.resize(msg.size() - 2);
  return msg;
}

StatusOr<SimResult> Simulate(const Problem& p, const Schedule& s) { return Simulator(p).Run(s); }

StatusOr<Schedule> Replay(const Problem& p, Schedule s, const std::vector<double>& start) {
  const int n = p.op_space().size();
  s.release.assign(n, 0.0);
  std::vector<int> held;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(start[i]) || start[i] <= 0) continue;
    s.release[i] = start[i];
    held.push_back(i);
  }
  Simulator sim(p);
  sim.set_describe_deadlocks(false);
  StatusOr<SimResult> run = sim.Run(s);
  if (!run.ok()) return run.status();
  const auto no_later = [&](const SimResult& r) {
    return r.objective <= run->objective + 1e-9 * std::max(1.0, run->objective);
  };
  Schedule asap = s;
  asap.release.clear();
  if (StatusOr<SimResult> r = sim.Run(asap); r.ok() && no_later(*r)) return asap;
  std::sort(held.begin(), held.end(), [&](int a, int b) { return start[a] < start[b]; });
  Schedule next = s;
  for (int i : held) {
    next.release[i] = 0;
    StatusOr<SimResult> r = sim.RunChanged(next, s, *run);
    if (r.ok() && no_later(*r)) {
      s.release[i] = 0;
      run = std::move(r);
    } else {
      next.release[i] = s.release[i];
    }
  }
  return s;
}

TimedSchedule ToTimed(const Problem& p, const Schedule& s, const SimResult& r) {
  TimedSchedule t;
  t.problem = p.name;
  t.method = s.method;
  const OpSpace space = p.op_space();
  for (int i = 0; i < space.size(); ++i) {
    if (std::isnan(r.start[i])) continue;
    const Op op = space.At(i);
    t.ops.push_back({op, DeviceOf(p, op), r.start[i], r.end[i]});
  }
  SortByStart(t.ops);
  t.makespan = r.makespan;
  t.device_span = r.device_span;
  t.objective = r.objective;
  t.peak_memory = r.peak_memory;
  return t;
}

}  // namespace optpipe
