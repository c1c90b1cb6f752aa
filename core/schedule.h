// Schedule: what a method decides. TimedSchedule: what a file or a run records.
//
// A Schedule is the order of compute ops on every device and of copy ops on
// every host link; offloading (s, m) means placing O and R of it on the link.
// Times are not part of it: Simulate (core/simulator.h) derives them. A
// TimedSchedule is the optpipe-schedule/1 file: every op with its start/end.
//
// An op may also carry a hold: a release time before which it does not start
// even when it could. A list scheduler holds an op it kept back on purpose (a
// reload due just in time, a forward waiting for room), which the orders alone
// cannot say: replayed as soon as possible, a held-back reload would take the
// memory a forward needs. The holds make the simulator replay a method's
// decisions exactly; OrdersOf holds every op of a file at its start time.
//
// Text form, one lane a line (PyTorch pipelining op names, @ a hold):
//   d0: 0F0 0F1 0B0 0W0 0B1 0W1
//   l0: 0O1 0R1@6.5
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/problem.h"
#include "core/status.h"

namespace optpipe {

struct Schedule {
  std::string method;
  std::vector<std::vector<Op>> compute;  // [D] F/B/W in execution order
  std::vector<std::vector<Op>> copy;     // [host link] O/R in execution order
  // [OpSpace index] earliest start of each op (0: none); empty: no holds.
  std::vector<double> release;

  // The op's hold, 0 when it has none.
  double ReleaseOf(int op_index) const {
    return release.empty() ? 0.0 : release[static_cast<std::size_t>(op_index)];
  }

  // An empty schedule with one lane per device and host link.
  static Schedule Empty(const Problem& p, std::string method);
};

// offloaded[s * M + m] for every (stage, micro-batch) whose O is on a link.
std::vector<char> OffloadedSet(const Problem& p, const Schedule& s);

std::string ToText(const Problem& p, const Schedule& s);
StatusOr<Schedule> ParseScheduleText(const Problem& p, const std::string& text);

struct TimedOp {
  Op op;
  int device = 0;
  double start = 0;
  double end = 0;
};

// Extra fields any method may attach (solver termination, bound, gap, time).
struct SolveInfo {
  std::optional<std::string> termination;
  std::optional<double> bound;
  std::optional<double> gap;
  std::optional<double> solve_seconds;
};

struct TimedSchedule {
  std::string problem;  // the problem's name
  std::string method;
  std::vector<TimedOp> ops;
  // Values as reported by whoever wrote the file; the checker compares them.
  std::optional<double> makespan, device_span, objective;
  std::optional<std::vector<double>> peak_memory;
  SolveInfo info;
};

// Sorts ops by start time, ties by device, otherwise keeping their order: how
// the simulator and the runtime list the ops of a schedule file.
void SortByStart(std::vector<TimedOp>& ops);

// Per-lane orders of a timed schedule: ops sorted by start time (ties keep file
// order), each held at its start, so that simulating them gives the file's
// times. Fails if an op has a stage out of range; other inconsistencies are the
// checker's job.
StatusOr<Schedule> OrdersOf(const Problem& p, const TimedSchedule& t);

}  // namespace optpipe
