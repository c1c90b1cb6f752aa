// GIS, GIS-H, PO-H and PO-F (Wan et al. 2025, "PipeOffload: Improving
// Scalability of Pipeline Parallelism with Memory Optimization").
//
// Orders. Every schedule of the family repeats one building block: the
// pattern of a single micro-batch on every device (§2, §3.2, Figures 4-6).
// We lay it out on unit slots, one op a slot, as the authors' reference
// scheduler does, then order each device's ops by slot; the simulator turns
// the orders into times for the real (heterogeneous) durations. With d
// devices, v chunks per device, chunk c of device i being stage c*d + i:
//
//   F(c)      at  3*K*G*c + 3*G*(c div q) + i
//             (+ 3*G*v*(m div G) + 3*(m mod G) for micro-batch m, all ops)
//   first B   at  F(v-1) + 3*(d-1-i) + 1, B of chunk v-1 first, then v-2, ...
//   B(c)      at  first B + (F offset of chunk v-1-c);  W(c) = B(c) + 1
//
// F on device i+1 comes one slot after device i; B on device i two slots
// after device i+1, which puts F, B and W of a device in the three residues
// mod 3: after the warm-up every device runs B W F, B W F, ... (W right
// after its B, §3.1: "we don't delay W passes").
//  * GIS / GIS-H (§3.1-3.2): blocks of G = g micro-batches (bi-level
//    repetition: outer loop over chunks, inner loop over the g micro-batches),
//    K = 1, q = v. Rank i runs g(v-1) + d - i forwards before its first B;
//    peak activations g(v-1) + d on rank 0. GIS is g = d (warm-up d(v-1) +
//    d - i instead of interleaved 1F1B's d(v-1) + 2(d-i) - 1); GIS-H shrinks
//    g to ceil(d/2), the smallest g with 6g >= 3d - 1 (see below; raised
//    for heterogeneous stages, see MinGroupSize).
//  * PipeOffload (§2, §3.2): the GIS-H block repeated uniformly, one
//    micro-batch every 3v slots (G = 1, chunk spacing K = g), shifted by
//    3*(c div q), q = v / gcd(v, g), so that chunks never collide.
// Every dependency points to a later slot once device i is shifted right by
// min(i, e) slots for a suitable e (possible whenever 6g >= 3d - 1), so the
// orders never deadlock; dropping the slots of micro-batches >= M keeps that.
// With v = 1 all of these reduce to 1F1B with W right after B (warm-up d - i).
//
// Offload (§2, §4.2, §4.4, App. D). PO-F offloads every stage; PO-H half of
// them, those with the longest lifespan: chunks 0..ceil(v/2)-1 of every device
// (the paper's choice), i.e. the first half of the pipeline. With v = 1 a
// device has one stage, so "half the stages" is read over the whole pipeline:
// stages 0..ceil(d/2)-1, whose activations live longest in 1F1B (lifespan
// about (d - s) blocks). Copies are planned per host link on the times of a
// simulation of the compute orders alone, in time order, as one stream of
// offloads and reloads (§4.2): an offload goes as soon as its forward has
// ended (when several wait, the device closest to its memory limit first,
// so devices sharing a link take turns instead of one starving the other;
// the paper staggers the two devices' streams, App. D); a reload goes as late
// as it can, earliest deadline first, as soon as holding it back would make a
// reload end after its backward's start. An offload whose round trip no
// longer fits before its backward is dropped: the activation stays (§4.4).
// So no reload ever delays a backward: with unlimited memory the compute ops
// keep exactly their compute-only times, offload is free while the links keep
// up. A copy lane cannot idle on purpose, so a reload may run earlier than
// planned (in the cool-down nothing paces them); under a memory limit the
// simulator holds it until a backward frees memory, which is where the
// savings show: PO fits limits far below its unlimited peak.
//
// Knobs. With a memory limit, GIS-H and PO try every group size g from the
// smallest to d and keep the fastest that fits (§3.2: "selecting the largest
// value of g that fits within the memory limit"); without one they use the
// smallest g, the published schedule. GIS is g = d only.
#include "heuristics/pipe_offload.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <utility>

#include "heuristics/method.h"

namespace optpipe {
namespace pipe_offload {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One activation on a device of a host link, with its compute-only times.
struct Act {
  int stage = 0, mb = 0, device = 0;
  double f_start = 0, f_end = 0, b_start = 0, gone = 0;  // gone: freed for good
  double size = 0, moved = 0, dur = 0;                   // activation, offloadable, O or R time
  bool candidate = false;                                // a stage the method offloads
};

// Activation memory in use on one device over time, compute-only times.
class Usage {
 public:
  void Add(double from, double to, double size) {
    steps_.push_back({from, size});
    steps_.push_back({to, -size});
  }
  void Finish() {
    std::sort(steps_.begin(), steps_.end());
    for (std::size_t k = 1; k < steps_.size(); ++k) steps_[k].second += steps_[k - 1].second;
  }
  double At(double t) const {
    const auto it = std::upper_bound(steps_.begin(), steps_.end(), std::pair{t, kInf});
    return it == steps_.begin() ? 0.0 : std::prev(it)->second;
  }

 private:
  std::vector<std::pair<double, double>> steps_;  // (time, running sum once finished)
};

// Plans the copies of one host link in time order; returns them in that
// order. Invariant: every planned reload ends by its backward's compute-only
// start (EDF slack >= 0), so compute is never delayed.
std::vector<Op> PlanLink(const Problem& p, std::vector<Act>& acts) {
  std::vector<int> release;  // candidates by forward end
  for (int k = 0; k < static_cast<int>(acts.size()); ++k) {
    if (acts[k].candidate) release.push_back(k);
  }
  std::stable_sort(release.begin(), release.end(),
                   [&](int x, int y) { return acts[x].f_end < acts[y].f_end; });
  std::vector<int> pending_o, pending_r;
  std::vector<Op> plan;
  // Least slack of the pending reloads, run earliest deadline first from `t`.
  const auto slack = [&](double t, int extra) {
    std::vector<int> rs = pending_r;
    if (extra >= 0) rs.push_back(extra);
    std::sort(rs.begin(), rs.end(),
              [&](int x, int y) { return acts[x].b_start < acts[y].b_start; });
    double least = kInf;
    for (int k : rs) {
      t += acts[k].dur;
      least = std::min(least, acts[k].b_start - t);
    }
    return least;
  };
  // Memory in use on a device at t: compute-only usage minus what the plan
  // holds on the host so far, relative to the limit.
  std::vector<Usage> usage(p.devices);
  std::vector<double> on_host(p.devices, 0.0);
  std::vector<char> seen(p.devices);
  for (const Act& a : acts) usage[a.device].Add(a.f_start, a.gone, a.size);
  for (Usage& u : usage) u.Finish();
  const auto pressure = [&](int device, double t) {
    const double used = p.static_memory[device] + usage[device].At(t) - on_host[device];
    return p.memory_limit ? used - (*p.memory_limit)[device] : used;
  };
  std::size_t next = 0;
  double t = 0;
  while (next < release.size() || !pending_o.empty() || !pending_r.empty()) {
    while (next < release.size() && acts[release[next]].f_end <= t)
      pending_o.push_back(release[next++]);
    // A round trip that no longer fits before its backward stays on the device (§4.4).
    std::erase_if(pending_o,
                  [&](int k) { return t + acts[k].dur + acts[k].dur > acts[k].b_start; });
    const double s = slack(t, -1);
    int o = -1;
    double most = -kInf;
    std::fill(seen.begin(), seen.end(), 0);
    for (int k : pending_o) {  // the device closest to its limit first, then the oldest
      if (seen[acts[k].device]++) continue;
      const double pr = pressure(acts[k].device, t);
      if (pr > most) {
        most = pr;
        o = k;
      }
    }
    if (o >= 0 && slack(t + acts[o].dur, o) >= 0) {
      plan.push_back({OpType::kO, acts[o].stage, acts[o].mb});
      t += acts[o].dur;
      on_host[acts[o].device] += acts[o].moved;
      std::erase(pending_o, o);
      pending_r.push_back(o);
    } else if (!pending_r.empty() && (s <= 1e-9 * std::max(1.0, t) || o >= 0)) {
      // Due now, or due before the waiting offload could finish: reload first.
      const auto r = std::min_element(pending_r.begin(), pending_r.end(), [&](int x, int y) {
        return acts[x].b_start < acts[y].b_start;
      });
      plan.push_back({OpType::kR, acts[*r].stage, acts[*r].mb});
      t += acts[*r].dur;
      on_host[acts[*r].device] -= acts[*r].moved;
      pending_r.erase(r);
    } else {
      // Idle until the next forward ends or a reload falls due: reloads go
      // as late as they can (right to left, §4.2), offloads as early.
      const double at = next < release.size() ? acts[release[next]].f_end : kInf;
      t = std::max(t, std::min(at, t + s));
    }
  }
  return plan;
}

}  // namespace

// The smallest group size: ceil(d/2), raised while a chunk's forward or
// backward chain across the d devices outlasts g building-block units of the
// slowest stage (as the reference scheduler does for heterogeneous stages):
// device 0 would otherwise wait for chunk c+1's input every block.
int MinGroupSize(const Problem& p) {
  const int D = p.devices, v = p.stages_per_device;
  int g = (D + 1) / 2;
  if (v == 1) return g;
  double unit = 0, chain = 0;
  for (int s = 0; s < p.stages(); ++s) unit = std::max(unit, p.f[s] + p.b[s] + p.w[s]);
  for (int c = 0; c < v; ++c) {
    double f = 0, b = 0;
    for (int s = c * D; s < (c + 1) * D; ++s) {
      f += p.f[s] + (s + 1 < p.stages() ? CommTime(p, s) : 0.0);
      b += p.b[s] + (s > 0 ? CommTime(p, s - 1) : 0.0);
    }
    chain = std::max({chain, f, b});
  }
  while (g < D && g * unit < chain) ++g;
  return g;
}

// Group sizes worth simulating: all from the smallest to d when `search`,
// else the published (smallest) one. With v = 1 g changes nothing.
std::vector<int> GroupSizes(const Problem& p, bool search) {
  const int lo = MinGroupSize(p);
  const int hi = search && p.stages_per_device > 1 ? p.devices : lo;
  std::vector<int> gs;
  for (int g = lo; g <= hi; ++g) gs.push_back(g);
  return gs;
}

// Compute orders of the building block (see the header): blocks of g
// micro-batches for GIS, one micro-batch per block with chunk spacing g for
// PipeOffload. Copy lanes stay empty.
Schedule BlockOrders(const Problem& p, int g, bool per_microbatch) {
  const int D = p.devices, v = p.stages_per_device, M = p.microbatches, S = p.stages();
  const long G = per_microbatch ? 1 : g, K = per_microbatch ? g : 1;
  const long q = v / std::gcd(static_cast<long>(v), K);
  const long period = 3 * G * v;
  const auto chunk_offset = [&](long c) { return 3 * K * G * c + 3 * G * (c / q); };
  std::vector<std::vector<std::pair<long, Op>>> lanes(D);
  for (int st = 0; st < S; ++st) {
    const int c = st / D, i = st % D;
    const long first_b = chunk_offset(v - 1) + i + 3L * (D - 1 - i) + 1;
    for (int m = 0; m < M; ++m) {
      const long base = period * (m / G) + 3 * (m % G);
      const long b = base + first_b + chunk_offset(v - 1 - c);
      auto& lane = lanes[p.stage_device[st]];
      lane.push_back({base + chunk_offset(c) + i, {OpType::kF, st, m}});
      lane.push_back({b, {OpType::kB, st, m}});
      if (p.split_backward) lane.push_back({b + 1, {OpType::kW, st, m}});
    }
  }
  Schedule s = Schedule::Empty(p, "");
  for (int d = 0; d < D; ++d) {
    auto& lane = lanes[d];
    std::sort(lane.begin(), lane.end(), [](const auto& a, const auto& b) {
      return std::tie(a.first, a.second.type, a.second.stage, a.second.microbatch) <
             std::tie(b.first, b.second.type, b.second.stage, b.second.microbatch);
    });
    for (const auto& [slot, op] : lane) s.compute[d].push_back(op);
  }
  return s;
}

// Stages whose activations PO offloads (see the header): all, or the half
// with the longest lifespan.
std::vector<char> OffloadedStages(const Problem& p, bool all) {
  const int D = p.devices, v = p.stages_per_device;
  const int cut = all ? p.stages() : v > 1 ? (v + 1) / 2 * D : (D + 1) / 2;
  std::vector<char> on(p.stages(), 0);
  for (int s = 0; s < cut; ++s) on[s] = 1;
  return on;
}

// Plans O and R of the chosen stages on the host links (see the header) and
// writes them into s.copy, replacing what was there.
Status PlaceCopies(const Problem& p, Schedule& s, const std::vector<char>& stages) {
  for (auto& lane : s.copy) lane.clear();
  if (!p.offload_allowed()) return OkStatus();
  Problem unlimited = p;
  unlimited.memory_limit.reset();
  StatusOr<SimResult> ref = Simulate(unlimited, s);
  if (!ref.ok()) return ref.status();
  const OpSpace sp = p.op_space();
  const std::vector<int> link = LinkOfDevice(p);
  std::vector<std::vector<Act>> acts(p.host_links.size());
  for (int st = 0; st < p.stages(); ++st) {
    const int d = p.stage_device[st];
    for (int m = 0; m < p.microbatches; ++m) {
      acts[link[d]].push_back(Act{
          .stage = st,
          .mb = m,
          .device = d,
          .f_start = ref->start[sp.Index(OpType::kF, st, m)],
          .f_end = ref->end[sp.Index(OpType::kF, st, m)],
          .b_start = ref->start[sp.Index(OpType::kB, st, m)],
          .gone = ref->end[sp.Index(p.split_backward ? OpType::kW : OpType::kB, st, m)],
          .size = p.activation[st],
          .moved = p.offloadable[st],
          .dur = (*p.offload)[st],
          .candidate = stages[st] && p.offloadable[st] > 0,
      });
    }
  }
  for (std::size_t l = 0; l < acts.size(); ++l) s.copy[l] = PlanLink(p, acts[l]);
  return OkStatus();
}

// Simulates every candidate under the memory limit and keeps the best
// objective (ties: the lower peak memory). If none fits, says what the
// leanest candidate would need.
StatusOr<Schedule> BestFitting(const Problem& p,
                               std::vector<std::pair<std::string, Schedule>> candidates) {
  Simulator sim(p);
  int best = -1;
  std::pair<double, double> best_key{kInf, kInf};
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    StatusOr<SimResult> r = sim.Run(candidates[k].second);
    if (!r.ok()) continue;
    const std::pair key{r->objective,
                        *std::max_element(r->peak_memory.begin(), r->peak_memory.end())};
    if (key < best_key) {
      best_key = key;
      best = static_cast<int>(k);
    }
  }
  if (best >= 0) return std::move(candidates[best].second);
  // None fits: find the candidate that overshoots least without a limit, then
  // the smallest uniform raise of the limit under which it fits (copies and
  // reloads wait for memory under a limit, so this is often well below the
  // unlimited peak).
  Problem unlimited = p;
  unlimited.memory_limit.reset();
  Simulator free_sim(unlimited);
  const std::vector<double> limit = p.memory_limit.value_or(std::vector<double>(p.devices, kInf));
  int lean = -1;
  double least = kInf;
  std::vector<double> free_peak;
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    StatusOr<SimResult> r = free_sim.Run(candidates[k].second);
    if (!r.ok()) continue;
    double over = -kInf;
    for (int d = 0; d < p.devices; ++d) over = std::max(over, r->peak_memory[d] - limit[d]);
    if (over < least) {
      least = over;
      lean = static_cast<int>(k);
      free_peak = r->peak_memory;
    }
  }
  if (lean < 0 || !p.memory_limit) {
    return Internal("every setting deadlocks even without a memory limit");
  }
  Problem raised = p;
  double lo = 0, hi = least;
  for (int it = 0; it < 30 && hi - lo > 1e-3 * std::max(1.0, hi); ++it) {
    const double mid = (lo + hi) / 2;
    for (int d = 0; d < p.devices; ++d) (*raised.memory_limit)[d] = limit[d] + mid;
    if (Simulate(raised, candidates[lean].second).ok()) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  std::vector<double> need(p.devices);
  for (int d = 0; d < p.devices; ++d) need[d] = std::min(free_peak[d], limit[d] + hi);
  const std::string which =
      candidates.size() == 1 ? "it"
                             : "none of its " + std::to_string(candidates.size()) +
                                   " settings fits; the leanest (" + candidates[lean].first + ")";
  return Infeasible("does not fit the memory limit: " + which + " needs peak memory [" +
                    FormatValues(need) + "] against memory.limit [" + FormatValues(limit) + "]");
}

}  // namespace pipe_offload

namespace {

Status NeedsInterleaved(const Problem& p) {
  for (int s = 0; s < p.stages(); ++s) {
    if (p.stage_device[s] != s % p.devices) {
      return NotApplicable("needs the interleaved placement (stage s on device s mod D); stage " +
                           std::to_string(s) + " is on device " +
                           std::to_string(p.stage_device[s]));
    }
  }
  return OkStatus();
}

StatusOr<Schedule> BuildPO(const Problem& p, bool all) {
  using namespace pipe_offload;
  std::vector<std::pair<std::string, Schedule>> candidates;
  for (int g : GroupSizes(p, /*search=*/p.memory_limited())) {
    Schedule s = BlockOrders(p, g, /*per_microbatch=*/true);
    if (Status st = PlaceCopies(p, s, OffloadedStages(p, all)); !st.ok()) return st;
    candidates.push_back({"g=" + std::to_string(g), std::move(s)});
  }
  return BestFitting(p, std::move(candidates));
}

}  // namespace

Status GisApplies(const Problem& p) { return NeedsInterleaved(p); }

Status PipeOffloadApplies(const Problem& p) {
  if (!p.offload_allowed()) {
    return NotApplicable(
        "needs offload_time (the problem allows no offload); gis-h is the same "
        "family without offload");
  }
  return NeedsInterleaved(p);
}

StatusOr<Schedule> BuildGIS(const Problem& p) {
  std::vector<std::pair<std::string, Schedule>> one;
  one.push_back({"g=d", pipe_offload::BlockOrders(p, p.devices, /*per_microbatch=*/false)});
  return pipe_offload::BestFitting(p, std::move(one));
}

StatusOr<Schedule> BuildGISH(const Problem& p) {
  std::vector<std::pair<std::string, Schedule>> candidates;
  for (int g : pipe_offload::GroupSizes(p, /*search=*/p.memory_limited())) {
    candidates.push_back(
        {"g=" + std::to_string(g), pipe_offload::BlockOrders(p, g, /*per_microbatch=*/false)});
  }
  return pipe_offload::BestFitting(p, std::move(candidates));
}

StatusOr<Schedule> BuildPOH(const Problem& p) { return BuildPO(p, /*all=*/false); }
StatusOr<Schedule> BuildPOF(const Problem& p) { return BuildPO(p, /*all=*/true); }

}  // namespace optpipe
