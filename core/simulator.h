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
// Cost: O(N log L) for N ops and L lanes (event heap of at most one pending
// event per lane plus running ops), no allocation per call after the first.
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
  explicit Simulator(const Problem& p);  // keeps a pointer: keep `p` alive
  // Structural errors (missing/duplicate/misplaced op): kInvalidArgument.
  // Deadlock or memory that never fits: kInfeasible.
  StatusOr<SimResult> Run(const Schedule& s);
  // Run(s) for a schedule that differs little from `base`, whose run gave
  // `base_run`: the ops that started before the first time a difference can
  // matter (the end of the op before the first changed place on any lane, a
  // changed hold, an activation offloaded or kept instead) keep their times,
  // and the event loop resumes from there. Times, spans, objective and busy
  // are Run(s)'s; peak_memory counts only what starts from that time on
  // (searches rank by the rest, and simulate what they keep in full).
  StatusOr<SimResult> RunChanged(const Schedule& s, const Schedule& base,
                                 const SimResult& base_run);
  // Off: a deadlock is reported without naming its ops (searches that try
  // many orders only need to know it failed; naming costs more than the run).
  void set_describe_deadlocks(bool on) { describe_ = on; }

 private:
  Status CheckStructure(const Schedule& s);
  // The first time at which s can run differently from base (see RunChanged).
  double FirstChange(const Schedule& s, const Schedule& base, const SimResult& base_run);
  StatusOr<SimResult> Loop(const Schedule& s, const SimResult* base_run, double from);
  std::string DescribeDeadlock(const Schedule& s) const;
  const std::vector<Op>& Lane(const Schedule& s, int r) const;

  const Problem* p_;
  bool describe_ = true;
  OpSpace space_;
  std::vector<int> link_of_device_;
  std::vector<char> offloaded_, base_offloaded_;
  // Scratch, sized once.
  std::vector<double> start_, end_;
  std::vector<int> pos_, running_, first_watcher_, next_watcher_, waits_for_;
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
