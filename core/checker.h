// CheckSchedule: an independent validator of a fully timed schedule.
//
// It shares no code with the simulator beyond the problem's per-op quantities:
// it re-derives every rule of docs/FORMAT.md (every op once, right device and
// stream, durations, dependencies with comm, one op per lane at a time, the
// memory sweep, the reported metrics) and lists every violation with the op,
// device and time involved. Tests use it as the oracle for every method.
//
//   CheckReport rep = CheckSchedule(problem, timed);
//   for (const std::string& e : rep.errors) std::cerr << e << "\n";
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"

namespace optpipe {

// One broken rule as a record, for programs (`validate --json`, Python).
struct Violation {
  // missing, duplicate, out_of_range, not_in_problem, not_finite, wrong_device,
  // duration, dependency, overlap, unmatched_copy, memory, reported_value
  std::string kind;
  std::optional<Op> op;        // the op involved, where one is
  int device = -1;             // its device (or the memory's), -1: none
  std::optional<double> time;  // when it happens, where it has a time
  std::string detail;          // the whole message, as in `errors`
};

struct CheckReport {
  std::vector<std::string> errors;  // one line per violation, in the same order
  std::vector<Violation> violations;
  double makespan = 0;
  double device_span = 0;
  double objective = 0;
  std::vector<double> peak_memory;  // [D]
  bool valid() const { return errors.empty(); }
};

// `tolerance` is absolute, in the problem's time and memory units.
CheckReport CheckSchedule(const Problem& p, const TimedSchedule& t,
                          double tolerance = kTimeTolerance);

}  // namespace optpipe
