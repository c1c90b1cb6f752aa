// TextTimeline: a timed schedule as a few lines of plain text for terminals.
//
// One line per device, one character per equal time slice, showing the op
// running at the slice's middle: F, B, W (O, R on the copy lines) in upper
// case for even micro-batches and lower case for odd ones, so neighbouring
// ops stand apart; '.' is idle. An op shorter than a slice still shows in the
// slice holding its middle when nothing else does. Copy lines ("c0", under
// "d0") appear when the schedule offloads. A ruler with time ticks and a
// legend close the picture. ASCII only; the output depends only on the inputs.
//
//   unit-2x2 / 1f1b: makespan 8, one column = 0.5
//   d0 |FFff....BBbb|
//   ...
//
//   std::cout << TextTimeline(problem, timed, 100);
#pragma once

#include <string>

#include "core/problem.h"
#include "core/schedule.h"

namespace optpipe {

// `width`: characters per line, labels and borders included (at least 8 time
// columns are always drawn).
std::string TextTimeline(const Problem& p, const TimedSchedule& t, int width);

}  // namespace optpipe
