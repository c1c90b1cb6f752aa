// What a run measured, in the project's own formats: the measured schedule as
// optpipe-schedule/1 (every op with its measured start and end), and a profile:
// the problem with its op times replaced by the medians the run measured
// (Figure 1 of the OptPipe paper: profile -> schedule -> train).
//
//   StatusOr<RunResult> r = executor.Run(schedule);
//   TimedSchedule measured = MeasuredSchedule(problem, schedule, r->iterations.back());
//   Problem profiled = ProfileFromRun(problem, *r);     // re-schedule with these times
#pragma once

#include <string>

#include "core/problem.h"
#include "core/schedule.h"
#include "runtime/executor.h"

namespace optpipe::runtime {

// The iteration as optpipe-schedule/1: times in problem units from its first
// start, makespan/device_span/objective/peak_memory as measured. The method
// is the schedule's, with " (measured)" appended.
TimedSchedule MeasuredSchedule(const Problem& p, const Schedule& s, const IterationResult& it);

// `p` with f, b, w and offload_time replaced by the medians, per stage and op
// kind, of the durations measured over every iteration and micro-batch. A
// fused B (b + w) is split in the problem's b:w proportion; a stage whose
// activations were never offloaded keeps its offload time. Everything else
// (memory, comm, placement) is kept.
Problem ProfileFromRun(const Problem& p, const RunResult& r);

// The iteration with the median makespan (the lower middle one for an even count).
const IterationResult& MedianIteration(const RunResult& r);

}  // namespace optpipe::runtime
