// GanttSvg: a timed schedule drawn as a self-contained SVG picture for people.
//
// One row per device: its compute lane (F, B, W), its copy lane (O, R; shown
// when the problem allows offload or the schedule offloads) and its memory over
// time with the limit as a dashed red line. Ops are coloured by type and
// labelled with their micro-batch ("stage:micro-batch" when v > 1) where the
// label fits inside the op; idle time is the grey lane background. A time axis
// with ticks runs above and below; the title gives method, makespan, bubble
// ratio and peak memory. Each op also carries a <title> tooltip with its full
// name and times. The output depends only on the inputs (no clock, no locale).
//
// The root element carries the horizontal scale, for tools and tests:
//   data-t0 (schedule start), data-plot-x (its x), data-px-per-unit;
// op rects sit in <g class="op" data-op="2F0" data-device="2"> groups and the
// lanes are <rect class="lane compute|copy" data-device="d">.
//
//   std::string svg = GanttSvg(problem, ToTimed(problem, sched, sim), GanttOptions{});
//   WriteFile("schedule.svg", svg);
#pragma once

#include <string>

#include "core/problem.h"
#include "core/schedule.h"

namespace optpipe {

struct GanttOptions {
  // Total picture width in pixels; 0 chooses it from the schedule so that the
  // typical op is wide enough for its label (between ~800 and ~6000 px).
  int width_px = 0;
  bool memory = true;  // draw each device's memory curve under its lanes
  std::string title;   // replaces the "problem · method" heading when not empty
};

std::string GanttSvg(const Problem& p, const TimedSchedule& t, const GanttOptions& opt = {});

// Width in pixels that the SVG assumes for `chars` characters of its monospace
// labels at `font_px`: labels are only drawn where this fits inside the op.
double LabelWidthPx(int chars, double font_px);

}  // namespace optpipe
