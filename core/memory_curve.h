// MemoryCurves: the memory of every device over time, read off a timed schedule.
//
// The views (Gantt SVG, Chrome trace) draw what the checker and the simulator
// enforce: static memory, plus F's activation and R's reload from their start,
// minus what B, W and O free at their end. At one instant frees count before
// allocations, so the value after all events at an instant is that instant's
// memory, and the largest value is the device's peak memory.
//
//   std::vector<MemoryCurve> curves = MemoryCurves(problem, timed);
//   for (const MemoryStep& s : curves[0].steps) std::cout << s.t << " " << s.value << "\n";
//   double peak0 = curves[0].peak;  // == SimResult::peak_memory[0]
#pragma once

#include <vector>

#include "core/problem.h"
#include "core/schedule.h"

namespace optpipe {

// From time t on (until the next step), the device holds `value`.
struct MemoryStep {
  double t = 0;
  double value = 0;
};

struct MemoryCurve {
  // Starts at the schedule's first start with the static memory; one step per
  // instant at which the memory changes. Sorted by t, no two steps share a t.
  std::vector<MemoryStep> steps;
  double peak = 0;  // static memory included
};

// [D] curves. Ops whose stage or micro-batch is outside the problem are ignored.
std::vector<MemoryCurve> MemoryCurves(const Problem& p, const TimedSchedule& t);

}  // namespace optpipe
