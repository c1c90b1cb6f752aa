// The schedule reader and everything that takes a timed schedule as it is
// recorded: the checker, the orders behind it (simulated), and the views.
#include "core/checker.h"
#include "core/chrome_trace.h"
#include "core/gantt_svg.h"
#include "core/simulator.h"
#include "core/timeline_text.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optpipe;
  StatusOr<TimedSchedule> t = ParseTimedSchedule(fuzz::Text(data, size));
  if (!t.ok()) return 0;
  const Problem& p = fuzz::FixedProblem();
  CheckSchedule(p, *t);
  TextTimeline(p, *t, 60);
  GanttSvg(p, *t);
  ChromeTrace(p, *t);
  if (StatusOr<Schedule> s = OrdersOf(p, *t); s.ok()) Simulate(p, *s);
  ParseTimedSchedule(ToJson(*t));
  return 0;
}
