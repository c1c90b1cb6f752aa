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
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "heuristics/best_fitting.h"
#include "heuristics/edf_slack.h"
#include "heuristics/method.h"
#include "heuristics/scorer.h"

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
// start (EDF slack >= 0), so compute is never delayed. `keep_all` (see
// PlaceCopies) drops that invariant: every candidate that lives a round trip
// is offloaded, offloads and reloads alternate when a reload is late anyway,
// and a reload its device has no room for waits behind that device's next
// offload. O(n log n) in the link's activations.
std::vector<Op> PlanLink(const Problem& p, const std::vector<Act>& acts, bool keep_all) {
  std::vector<int> release;  // candidates by forward end
  for (int k = 0; k < static_cast<int>(acts.size()); ++k) {
    if (acts[k].candidate) release.push_back(k);
  }
  std::stable_sort(release.begin(), release.end(),
                   [&](int x, int y) { return acts[x].f_end < acts[y].f_end; });
  std::vector<double> deadline(acts.size()), dur(acts.size());
  for (std::size_t k = 0; k < acts.size(); ++k) {
    deadline[k] = acts[k].b_start;
    dur[k] = acts[k].dur;
  }
  EdfSlack edf(deadline, dur);
  std::vector<int> pending_o;
  std::set<std::tuple<double, long, int>> pending_r;  // (deadline, arrival, act): EDF, FIFO ties
  long arrivals = 0;
  std::vector<Op> plan;
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
  bool last_was_reload = false;
  while (next < release.size() || !pending_o.empty() || !pending_r.empty()) {
    while (next < release.size() && acts[release[next]].f_end <= t)
      pending_o.push_back(release[next++]);
    // A round trip that no longer fits before its backward stays on the device (§4.4).
    // keep_all: only activations that live shorter than a round trip even
    // without copies stay (the last stage's, whose B follows its F).
    std::erase_if(pending_o, [&](int k) {
      const double from = keep_all ? acts[k].f_end : t;
      return from + acts[k].dur + acts[k].dur > acts[k].b_start;
    });
    const double s = edf.Least(t);
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
    bool offload = o >= 0 && edf.LeastWith(t + acts[o].dur, o) >= 0;
    if (keep_all && o >= 0 && !offload) offload = pending_r.empty() || last_was_reload;
    if (keep_all && !offload && !pending_r.empty()) {
      // A reload its device has no room for waits behind an offload of that
      // device, which makes the room (else the link order deadlocks).
      const int r = std::get<2>(*pending_r.begin());
      if (pressure(acts[r].device, t) + acts[r].moved > 0) {
        const auto k = std::find_if(pending_o.begin(), pending_o.end(),
                                    [&](int x) { return acts[x].device == acts[r].device; });
        if (k != pending_o.end()) {
          o = *k;
          offload = true;
        }
      }
    }
    last_was_reload = !offload && !pending_r.empty() && (s <= 1e-9 * std::max(1.0, t) || o >= 0);
    if (offload) {
      plan.push_back({OpType::kO, acts[o].stage, acts[o].mb});
      t += acts[o].dur;
      on_host[acts[o].device] += acts[o].moved;
      std::erase(pending_o, o);
      pending_r.insert({acts[o].b_start, arrivals++, o});
      edf.Insert(o);
    } else if (!pending_r.empty() && (s <= 1e-9 * std::max(1.0, t) || o >= 0)) {
      // Due now, or due before the waiting offload could finish: reload first.
      const int r = std::get<2>(*pending_r.begin());
      pending_r.erase(pending_r.begin());
      edf.Erase(r);
      plan.push_back({OpType::kR, acts[r].stage, acts[r].mb});
      t += acts[r].dur;
      on_host[acts[r].device] -= acts[r].moved;
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

// The activations of every host link with their times in a simulation of s's
// compute orders alone (no memory limit, no copies); candidates: the chosen
// stages' activations that have something to offload.
StatusOr<std::vector<std::vector<Act>>> LinkActs(const Problem& p, const Schedule& s,
                                                 const std::vector<char>& stages) {
  Problem unlimited = p;
  unlimited.memory_limit.reset();
  Schedule bare = s;
  for (auto& lane : bare.copy) lane.clear();
  StatusOr<SimResult> ref = Simulate(unlimited, bare);
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
  return acts;
}

// Plans O and R of the chosen stages on the host links (see the header) and
// writes them into s.copy, replacing what was there.
Status PlaceCopies(const Problem& p, Schedule& s, const std::vector<char>& stages, bool keep_all) {
  for (auto& lane : s.copy) lane.clear();
  if (!p.offload_allowed()) return OkStatus();
  StatusOr<std::vector<std::vector<Act>>> acts = LinkActs(p, s, stages);
  if (!acts.ok()) return acts.status();
  for (std::size_t l = 0; l < acts->size(); ++l) s.copy[l] = PlanLink(p, (*acts)[l], keep_all);
  return OkStatus();
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

// Every group size with the free-lunch copy plan first, then every group size
// with every offload kept (PipeOffload run where the link cannot keep up).
// `every_offload_kept`, when given, says which copy plan won.
StatusOr<Schedule> BuildPO(const Problem& p, bool all, const SearchOptions& opt,
                           bool* every_offload_kept = nullptr) {
  using namespace pipe_offload;
  const std::vector<int> gs = GroupSizes(p, /*search=*/p.memory_limited());
  const int n = static_cast<int>(gs.size());
  const std::vector<char> stages = OffloadedStages(p, all);
  int chosen = 0;
  StatusOr<Schedule> s = BestFitting(
      p, "setting", p.memory_limited() ? 2 * n : n,
      [&](int i) -> std::optional<Schedule> {
        Schedule s = BlockOrders(p, gs[i % n], /*per_microbatch=*/true);
        if (!PlaceCopies(p, s, stages, /*keep_all=*/i >= n).ok()) return std::nullopt;
        return s;
      },
      [&](int i) {
        return "g = " + std::to_string(gs[i % n]) + (i >= n ? ", every offload kept" : "");
      },
      opt, &chosen);
  if (every_offload_kept) *every_offload_kept = chosen >= n;
  return s;
}

}  // namespace

Status GisApplies(const Problem& p) { return NeedsInterleaved(p); }

Status PoKeepApplies(const Problem& p) {
  if (Status st = PipeOffloadApplies(p); !st.ok()) return st;
  if (!p.memory_limited()) {
    return NotApplicable(
        "needs memory.limit: without one every activation can stay, which po-f's copies "
        "never delay");
  }
  return OkStatus();
}

Status PipeOffloadApplies(const Problem& p) {
  if (!p.offload_allowed()) {
    return NotApplicable(
        "needs offload_time (the problem allows no offload); gis-h is the same "
        "family without offload");
  }
  return NeedsInterleaved(p);
}

StatusOr<Schedule> BuildGIS(const Problem& p) {
  return BestFitting(
      p, "group size", 1,
      [&](int) { return std::optional(pipe_offload::BlockOrders(p, p.devices, false)); },
      [&](int) { return "g = d"; });
}

StatusOr<Schedule> BuildGISH(const Problem& p, const SearchOptions& opt) {
  const std::vector<int> gs = pipe_offload::GroupSizes(p, /*search=*/p.memory_limited());
  return BestFitting(
      p, "group size", static_cast<int>(gs.size()),
      [&](int i) { return std::optional(pipe_offload::BlockOrders(p, gs[i], false)); },
      [&](int i) { return "g = " + std::to_string(gs[i]); }, opt);
}

StatusOr<Schedule> BuildPOH(const Problem& p, const SearchOptions& opt) {
  return BuildPO(p, /*all=*/false, opt);
}
StatusOr<Schedule> BuildPOF(const Problem& p, const SearchOptions& opt) {
  return BuildPO(p, /*all=*/true, opt);
}
// PO-Keep: PO-F's best setting, then a hill climb over which activations stay
// on the device (see method.h), from the best of "one micro-batch in k kept".
// Moves flip one activation between kept and offloaded, or swap the sides of
// two neighbouring micro-batches of a stage, and re-plan its link's copies;
// they are scored in chunks of 64 (in parallel, Scorer, simulated from the
// first change on) and the best that improves is taken; a whole pass over the
// moves without one ends the search, as does opt's clock or budget. A move
// costs one link's plan, O(n log n) in its activations, and one simulation.
StatusOr<Schedule> BuildPOKeep(const Problem& p, const SearchOptions& opt) {
  using namespace pipe_offload;
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  SearchOptions first = opt;
  first.time_limit_s = opt.time_limit_s / 4;
  bool keep_all = false;
  StatusOr<Schedule> start = BuildPO(p, /*all=*/true, first, &keep_all);
  if (start.status().code() == StatusCode::kInfeasible)  // "does not fit the memory limit: ..."
    return Infeasible("starts from po-f, which " + start.status().message());
  if (!start.ok()) return start.status();
  StatusOr<std::vector<std::vector<Act>>> acts = LinkActs(p, *start, OffloadedStages(p, true));
  if (!acts.ok()) return acts.status();
  // Moves (link, activation, other): flip one activation between kept and
  // offloaded (other = -1), or swap the sides of two neighbouring micro-batches
  // of one stage where they differ (the same number kept, one place over).
  struct Flip {
    int link, k, other;
  };
  std::vector<Flip> flips;
  for (std::size_t l = 0; l < acts->size(); ++l) {
    const std::vector<Act>& a = (*acts)[l];
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (!a[k].candidate) continue;
      flips.push_back({static_cast<int>(l), static_cast<int>(k), -1});
      if (k + 1 < a.size() && a[k + 1].candidate && a[k + 1].stage == a[k].stage)
        flips.push_back({static_cast<int>(l), static_cast<int>(k), static_cast<int>(k + 1)});
    }
  }
  // Applies f to a (false: a swap of two on the same side, which changes nothing).
  const auto apply = [](const Flip& f, std::vector<Act>& a) {
    if (f.other >= 0 && a[f.k].candidate == a[f.other].candidate) return false;
    a[f.k].candidate = !a[f.k].candidate;
    if (f.other >= 0) a[f.other].candidate = !a[f.other].candidate;
    return true;
  };
  Schedule best = std::move(*start);
  StatusOr<SimResult> sim = Simulate(p, best);
  if (!sim.ok()) return sim.status();
  SimResult best_sim = std::move(*sim);
  Scorer scorer(p, opt.threads);
  std::vector<std::optional<Schedule>> cand;
  std::vector<std::optional<SimResult>> score;
  std::int64_t evaluations = 0;
  // Counts the first `count` candidates scored; the best that beats best_sim (-1: none).
  const auto pick_better = [&](int count) {
    int pick = -1;
    for (int i = 0; i < count; ++i) {
      if (cand[i]) ++evaluations;
      if (score[i] && Better(*score[i], pick < 0 ? best_sim : *score[pick])) pick = i;
    }
    return pick;
  };
  // Where the link cannot carry every activation, micro-batches k-1, 2k-1, ...
  // stay: the climb starts from the best such pattern (k = 2..kEvery) where it
  // beats offloading all, instead of finding the kept ones one pass at a time.
  constexpr int kEvery = 8;
  const auto kept_every = [&](int k) {
    std::vector<std::vector<Act>> a = *acts;
    for (std::vector<Act>& link : a) {
      for (Act& act : link) act.candidate = act.candidate && act.mb % k != k - 1;
    }
    return a;
  };
  scorer.Score(
      kEvery - 1,
      [&](int i) -> std::optional<Schedule> {
        const std::vector<std::vector<Act>> a = kept_every(i + 2);
        Schedule s = best;
        for (std::size_t l = 0; l < a.size(); ++l) s.copy[l] = PlanLink(p, a[l], keep_all);
        return s;
      },
      cand, score);
  if (const int every = pick_better(kEvery - 1); every >= 0) {
    *acts = kept_every(every + 2);
    best = std::move(*cand[every]);
    best_sim = std::move(*score[every]);
  }
  const auto go_on = [&] {
    if (opt.stop && opt.stop->load()) return false;
    return opt.max_evaluations ? evaluations < *opt.max_evaluations : elapsed() < opt.time_limit_s;
  };
  const int n = static_cast<int>(flips.size());
  int next = 0, tried = 0;  // tried: flips scored since the last improvement
  while (tried < n && go_on()) {
    const int count = std::min(64, n);
    scorer.Score(
        count,
        [&](int i) -> std::optional<Schedule> {
          // On the clock, a chunk cut short still counts (budgets finish it).
          if (!opt.max_evaluations && elapsed() >= opt.time_limit_s) return std::nullopt;
          const Flip& f = flips[(next + i) % n];
          std::vector<Act> a = (*acts)[f.link];
          if (!apply(f, a)) return std::nullopt;
          Schedule s = best;
          s.copy[f.link] = PlanLink(p, a, keep_all);
          return s;
        },
        cand, score, &best, &best_sim);
    if (const int pick = pick_better(count); pick >= 0) {
      const Flip& f = flips[(next + pick) % n];
      apply(f, (*acts)[f.link]);
      best = std::move(*cand[pick]);
      best_sim = std::move(*score[pick]);
      tried = 0;
    } else {
      tried += count;
    }
    next = (next + count) % n;
  }
  return best;
}

}  // namespace optpipe
