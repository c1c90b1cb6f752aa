// Simulate: the single source of truth for times, makespan and memory.
//
// Given per-lane orders (a Schedule), every op starts as early as its lane,
// its dependencies (plus comm time), its hold (Schedule::release) and its
// device's memory allow. Memory behaves as a runtime would: an op whose
// allocation does not fit waits until an op already running or queued (a B/W,
// an offload) frees enough; if nothing can, or the orders wait on each other,
// the schedule is infeasible and the status names the op, device, time,
// memory in use and limit.
//
// Two ways to time a run, one result (Simulator::Timing):
// - The event loop (Loop) defines it: a lane looks for work when an op ends,
//   an allocation that does not fit waits until something on its device
//   frees enough. O(N log L) for N ops and L lanes (an event heap).
// - The longest-path pass is what the event loop computes while no
//   allocation waits: each op, visited once in dependency order, starts at
//   the latest of its lane's previous end, each predecessor's end plus comm,
//   and its hold; then each device's allocations and frees are replayed in
//   the order the event loop takes them (by time; at one instant frees
//   before allocations, the compute lane before the host link), for the
//   peaks and the limit. O(N), a few ns an op; holds, offloads, shared host
//   links and RunChanged's resumed runs included. Its result is the event
//   loop's bit for bit (every start and end, peak, busy time, span and
//   objective: the same doubles, added in the same order), provided every op
//   ends after it starts: a zero-length op (or one lost to rounding at a
//   large time) lets one instant's frees and allocations interleave on the
//   event heap in ways the replay does not follow.
// Timing::kAuto (the default) runs the pass, and then:
// - no allocation waits: the pass's result (TimedBy::kLongestPath);
// - the orders deadlock: the event loop would too; its status, unless
//   deadlocks are to be described (set_describe_deadlocks), which the event
//   loop does from the start (kEventLoop);
// - an allocation would wait: up to that time (the earliest over devices)
//   the event loop's run is the pass's, so the event loop goes on from there
//   with the pass's times and memory (kBoth);
// - a zero-length op: the event loop from the start (kEventLoop).
// Timing::kEventLoop runs the event loop alone: the reference that
// tests/core/simulator_paths_test.cc compares kAuto with, bit for bit, on
// random problems and every bundled case.
//
//   Simulator sim(problem);
//   StatusOr<SimResult> r = sim.Run(schedule);
//   if (r.ok()) std::cout << r->makespan;
#pragma once

#include <queue>
#include <vector>

#include "core/event.h"
#include "core/problem.h"
#include "core/schedule.h"
#include "core/status.h"

namespace optpipe {

struct SimResult {
  // Indexed by OpSpace index; NaN for op slots the schedule does not use.
  std::vector<double> start, end;
  double makespan = 0;              // last end - first start over all ops
  double device_span = 0;           // max over devices of (last end - first start) on it
  double objective = 0;             // makespan or device_span, per the problem
  std::vector<double> span;         // [D]
  std::vector<double> busy;         // [D] compute time
  std::vector<double> peak_memory;  // [D], static memory included
  // Idle share of the compute lanes: 1 - sum(busy) / (D * makespan).
  double bubble_ratio = 0;
};

// Fills r's makespan, device_span, objective, span and bubble_ratio from its
// start, end and busy, as Simulator::Run reports them (for an event loop that
// times ops the simulator's way, such as the list scheduler).
void Summarize(const Problem& p, SimResult& r);

class Simulator {
 public:
  // Which way Run and RunChanged time a schedule (see the top of this file).
  enum class Timing {
    kAuto,       // the longest-path pass where it is exact, else the event loop
    kEventLoop,  // the event loop only: the reference the tests compare kAuto with
  };
  // Which way the last Run or RunChanged was timed (kNone before the first,
  // and after one that stopped on the schedule's structure); kBoth: the pass
  // up to the first allocation that waits, the event loop from there on.
  enum class TimedBy { kNone, kLongestPath, kEventLoop, kBoth };

  explicit Simulator(const Problem& p);  // keeps a pointer: keep `p` alive
  // Structural errors (missing/duplicate/misplaced op): kInvalidArgument.
  // Deadlock or memory that never fits: kInfeasible.
  StatusOr<SimResult> Run(const Schedule& s);
  // Run(s) for a schedule that differs little from `base`, whose run gave
  // `base_run`: the ops that started before the first time a difference can
  // matter (the end of the op before the first changed place on any lane, a
  // changed hold, an activation offloaded or kept instead) keep their times,
  // and the timing resumes from there. Times, spans, objective and busy
  // are Run(s)'s; peak_memory counts only what starts from that time on
  // (searches rank by the rest, and simulate what they keep in full).
  StatusOr<SimResult> RunChanged(const Schedule& s, const Schedule& base,
                                 const SimResult& base_run);
  // Off: a deadlock is reported without naming its ops (searches that try
  // many orders only need to know it failed; naming costs more than the run).
  void set_describe_deadlocks(bool on) { describe_ = on; }
  void set_timing(Timing t) { timing_ = t; }
  TimedBy timed_by() const { return timed_by_; }

 private:
  Status CheckStructure(const Schedule& s);
  // The first time at which s can run differently from base (see RunChanged).
  double FirstChange(const Schedule& s, const Schedule& base, const SimResult& base_run);
  // How the longest-path pass ended: with Loop's result; at a deadlock of the
  // orders (Loop fails too); at an allocation that would wait (Loop's run up
  // to that time is the pass's: `wait_at`, with the times in `res` and the
  // memory in handover_mem_ and handover_peak_); or where it may differ from
  // Loop before any of those (a zero-length op).
  enum class PassEnd { kTimed, kDeadlock, kWaits, kNotExact };
  PassEnd LongestPath(const Schedule& s, const SimResult* base_run, double from, SimResult& res,
                      double& wait_at);
  // Replays device d's allocations and frees before `until` in Loop's order
  // (LongestPath's second half), from mem_[d] and res.peak_memory[d], which
  // it leaves as they are after the last; stops at the first allocation
  // that would wait and returns its time (infinity if none does).
  double ReplayMemory(const Schedule& s, int d, double until, SimResult& res);
  StatusOr<SimResult> Time(const Schedule& s, const SimResult* base_run, double from);
  // The event loop, from `from` on (resuming from base_run: see RunChanged).
  // memory_handed_over: the memory in use and the peaks at `from` are
  // handover_mem_ and handover_peak_ (the pass's, in Loop's own order).
  StatusOr<SimResult> Loop(const Schedule& s, const SimResult* base_run, double from,
                           bool memory_handed_over = false);
  std::string DescribeDeadlock(const Schedule& s) const;
  const std::vector<Op>& Lane(const Schedule& s, int r) const;

  const Problem* p_;
  bool describe_ = true;
  Timing timing_ = Timing::kAuto;
  TimedBy timed_by_ = TimedBy::kNone;
  OpSpace space_;
  std::vector<int> link_of_device_;
  std::vector<char> offloaded_, base_offloaded_;
  // Scratch, sized once.
  std::vector<double> start_, end_;
  std::vector<int> pos_, running_, first_watcher_, next_watcher_, waits_for_, stack_;
  std::vector<int> resumed_at_;  // [lane] the first op LongestPath times
  std::vector<double> handover_mem_, handover_peak_;
  std::vector<double> lane_free_;
  std::vector<std::vector<int>> mem_waiters_;
  std::vector<char> mem_blocked_, seen_;
  std::vector<double> mem_, blocked_at_;
  std::vector<Event> heap_;
};

// One-shot form of Simulator::Run.
StatusOr<SimResult> Simulate(const Problem& p, const Schedule& s);

// A schedule of a problem with p's ops, each lasting at least as long as in p
// (RoundedUp(p, g)), with the times `start` it ran at there, as a schedule of
// p: its orders, every op held at its start there (valid on p, where no op
// ends later, so nothing waits longer and memory is freed no sooner than
// planned), then the holds dropped, all at once where the run stays valid and
// ends no later, else one by one, earliest first, where it does. Up to one
// simulation an op (each resumed from the change, Simulator::RunChanged).
StatusOr<Schedule> Replay(const Problem& p, Schedule s, const std::vector<double>& start);

// The optpipe-schedule/1 content of a simulated schedule.
TimedSchedule ToTimed(const Problem& p, const Schedule& s, const SimResult& r);

}  // namespace optpipe
