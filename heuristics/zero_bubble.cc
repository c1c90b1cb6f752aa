// Zero Bubble schedules: ZB-H1 and ZB-H2 (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, §2), one stage per device, and ZB-V (Qi et al.,
// "Pipeline Parallelism with Controllable Memory", NeurIPS 2024), two chunks
// per device in a V. (V-Half and V-Min, built from repeated building blocks
// instead, are in v_schedules.cc.)
//
// Splitting the backward into B (activation gradient, on the critical path)
// and W (weight gradient, free to move after its B) lets W fill the bubbles
// 1F1B leaves. All three schedules follow one rule, which the list
// scheduler (heuristics/list_scheduler.h) runs with real per-stage times and
// comm: an idle device starts a ready B, else a ready F while its memory cap
// allows, else a pending W. The schedules differ in that cap:
//  * ZB-H1: 1F1B's warm-up depth (S - s forwards in flight) and p activations
//    of memory on every device, the peak 1F1B reaches on its first device.
//    Later stages use their spare memory to delay W into the drain, so the
//    backward chain runs without waiting for W: bubble (p-1)(F+B-W), a third
//    of 1F1B's (p-1)(F+B+W) on unit costs (p = 4, m = 8: makespan 27 against
//    33, or 30 for 1F1B with each W right after its B).
//  * ZB-H2: 2p-1 activations and a deeper warm-up: the extra forwards fill the
//    warm-up bubble, and every device runs from its first op to its last
//    without a bubble (a parallelogram: device_span = m(F+B+W)).
//  * ZB-V: p activations (1F1B's memory; one activation = both chunks of the
//    device) on the V placement, warm-up 2x 1F1B's or limited by memory
//    alone. The V puts a micro-batch's first and last stage on device 0, so
//    every device meets work from both directions; on unit costs with m >= 2p
//    each device runs without a bubble (device_span = m(F+B+W)).
// The knob is the cap. ZB-H2 tries 2p-1 down to p activations (the last is
// ZB-H1), with warm-up depth 2x 1F1B's or unbounded, and keeps the best
// simulated objective that fits memory.limit. Where memory.limit is below a
// cap it becomes the cap, as in ZB's own scheduler, which takes the memory
// limit as input; a limit too small for any cap is reported with the memory
// the schedule would need.
// With a fused backward there is no W to move: ZB-H1 is then exactly 1F1B,
// ZB-H2 at best a 1F1B with a deeper warm-up and ZB-V a V-shaped 1F1B.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "core/simulator.h"
#include "heuristics/best_fitting.h"
#include "heuristics/list_scheduler.h"
#include "heuristics/method.h"

namespace optpipe {
namespace {

// One setting of the knob: memory for `cap` activations of the device's own
// stages (static memory on top) and a warm-up depth relative to 1F1B's.
struct Cap {
  int cap;
  double warmup_scale;
};

// The lazy-W list schedule under the cap, tightened to the problem's
// memory.limit where that is lower.
StatusOr<Schedule> CappedSchedule(const Problem& p, const Cap& c) {
  Problem capped = p;
  std::vector<double> limit = p.static_memory;
  for (int s = 0; s < p.stages(); ++s) limit[p.stage_device[s]] += c.cap * p.activation[s];
  if (p.memory_limit) {
    for (int d = 0; d < p.devices; ++d) limit[d] = std::min(limit[d], (*p.memory_limit)[d]);
  }
  capped.memory_limit = limit;
  ListOptions opt;
  opt.warmup_scale = c.warmup_scale;
  opt.eager_w = false;
  opt.offload = false;
  return ListSchedule(capped, opt);
}

// A warm-up depth scale that lets memory alone limit the warm-up.
double Unbounded(const Problem& p) { return p.microbatches; }

// The best simulated objective over the caps; ties keep the earlier cap (the
// published one goes first). opt's clock and stop token end the scan after
// any cap but the first (not with opt.max_evaluations, the deterministic
// mode). If none fits, names the cap (of those scanned in time) that
// overshoots memory.limit least and its peaks.
StatusOr<Schedule> BestCap(const Problem& p, const std::vector<Cap>& caps,
                           const SearchOptions& opt = {}) {
  const ScanClock clock(opt);
  Simulator sim(p);
  std::optional<Schedule> best;
  double best_obj = 0;
  Status last = Infeasible("no memory cap gives a schedule");
  for (const Cap& c : caps) {
    if (&c != &caps.front() && !clock.more()) break;
    StatusOr<Schedule> s = CappedSchedule(p, c);
    StatusOr<SimResult> r = s.ok() ? sim.Run(*s) : StatusOr<SimResult>(s.status());
    if (!r.ok()) {  // stalls or overflows under memory.limit
      if (r.status().code() != StatusCode::kInfeasible) return r.status();
      last = r.status();
      continue;
    }
    if (!best || r->objective < best_obj - 1e-9 * std::max(1.0, std::abs(best_obj))) {
      best = std::move(*s);
      best_obj = r->objective;
    }
  }
  if (best) return *best;
  if (!p.memory_limit) return last;
  Problem unlimited = p;
  unlimited.memory_limit.reset();
  std::optional<Cap> closest;
  std::vector<double> need;
  double over = 0;
  for (const Cap& c : caps) {  // on the same clock
    if (&c != &caps.front() && !clock.more()) break;
    StatusOr<Schedule> s = CappedSchedule(unlimited, c);
    StatusOr<SimResult> r = s.ok() ? Simulate(unlimited, *s) : StatusOr<SimResult>(s.status());
    if (!r.ok()) continue;
    double worst = -std::numeric_limits<double>::infinity();
    for (int d = 0; d < p.devices; ++d) {
      worst = std::max(worst, r->peak_memory[d] - (*p.memory_limit)[d]);
    }
    if (!closest || worst < over) {
      closest = c;
      need = r->peak_memory;
      over = worst;
    }
  }
  if (!closest) return last;
  return Infeasible("no memory cap fits memory.limit: the closest, " +
                    std::to_string(closest->cap) + " activations per device, needs peak memory [" +
                    FormatValues(need) + "] against memory.limit [" +
                    FormatValues(*p.memory_limit) + "]");
}

}  // namespace

Status ZeroBubbleApplies(const Problem& p) {
  if (p.stages_per_device == 1) return OkStatus();
  return NotApplicable("ZB-H1/H2 need stages_per_device = 1 (got " +
                       std::to_string(p.stages_per_device) +
                       "); with 2 chunks in a V placement use zb-v");
}

StatusOr<Schedule> BuildZBH1(const Problem& p) { return BestCap(p, {{p.devices, 1.0}}); }

StatusOr<Schedule> BuildZBH2(const Problem& p, const SearchOptions& opt) {
  std::vector<Cap> caps;
  const double unbounded = Unbounded(p);
  for (int cap = 2 * p.devices - 1; cap > p.devices; --cap) {
    caps.push_back({cap, 2.0});
    caps.push_back({cap, unbounded});
  }
  caps.push_back({p.devices, 1.0});  // ZB-H1
  return BestCap(p, caps, opt);
}

// Registered with the V schedules (VShapeApplies checks the V placement).
StatusOr<Schedule> BuildZBV(const Problem& p) {
  return BestCap(p, {{p.devices, 2.0}, {p.devices, Unbounded(p)}});
}

}  // namespace optpipe
