#include "core/memory_curve.h"

#include <algorithm>
#include <limits>

namespace optpipe {

std::vector<MemoryCurve> MemoryCurves(const Problem& p, const TimedSchedule& t) {
  struct Event {
    double t;
    int order;  // 0: a free at an op's end, 1: an allocation at an op's start
    double delta;
  };
  const OpSpace space = p.op_space();
  std::vector<std::vector<Event>> events(p.devices);
  double t0 = std::numeric_limits<double>::infinity();
  for (const TimedOp& o : t.ops) {
    if (!space.Contains(o.op)) continue;
    t0 = std::min(t0, o.start);
    const int d = DeviceOf(p, o.op);
    if (const double a = Allocates(p, o.op); a != 0) events[d].push_back({o.start, 1, a});
    if (const double f = Frees(p, o.op); f != 0) events[d].push_back({o.end, 0, -f});
  }
  if (t0 == std::numeric_limits<double>::infinity()) t0 = 0;

  std::vector<MemoryCurve> curves(p.devices);
  for (int d = 0; d < p.devices; ++d) {
    std::vector<Event>& ev = events[d];
    std::stable_sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) {
      if (a.t != b.t) return a.t < b.t;
      return a.order < b.order;
    });
    MemoryCurve& c = curves[d];
    double mem = p.static_memory[d];
    c.peak = mem;
    c.steps.push_back({t0, mem});
    for (std::size_t i = 0; i < ev.size();) {
      const double at = ev[i].t;
      for (; i < ev.size() && ev[i].t == at; ++i) mem += ev[i].delta;
      c.peak = std::max(c.peak, mem);
      if (c.steps.back().t == at) {
        c.steps.back().value = mem;
      } else {
        c.steps.push_back({at, mem});
      }
    }
  }
  return curves;
}

}  // namespace optpipe
