// ChromeTrace: a timed schedule as a Chrome trace (JSON Trace Event Format),
// for Perfetto (ui.perfetto.dev, "Open trace file") or chrome://tracing.
//
// Every device is a process named "device d" (pid d+1, sorted by d) with two
// threads, "compute" (F, B, W) and "copy" (O, R). Every op is one complete
// event ("ph": "X") named like `2F0`, with args {stage, microbatch, type,
// start, end} in problem units; its category is the op type. Each device's
// memory is a counter track ("ph": "C", name "memory") with the value in use
// after every change and, when the problem has one, the limit.
//
// Time scale: trace timestamps are microseconds, and one problem time unit is
// written as one millisecond (ts = 1000 * t, dur = 1000 * (end - start),
// rounded to 1 ns), so a problem measured in ms reads true in the viewer and
// any other unit reads as "ms".
//
//   std::string json = ChromeTrace(problem, ToTimed(problem, sched, sim));
//   WriteFile("schedule.trace.json", json);
#pragma once

#include <string>

#include "core/problem.h"
#include "core/schedule.h"

namespace optpipe {

// Microseconds per problem time unit in the trace.
inline constexpr double kTraceMicrosPerUnit = 1000.0;

std::string ChromeTrace(const Problem& p, const TimedSchedule& t);

}  // namespace optpipe
