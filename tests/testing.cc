#include "tests/testing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>

#include "core/checker.h"
#include "core/dag.h"
#include "core/simulator.h"

namespace optpipe::testing {

Problem MakeProblem(const std::string& fields) {
  StatusOr<Problem> p = ParseProblem("{\"format\": \"optpipe-problem/1\", " + fields + "}");
  if (!p.ok()) {
    ADD_FAILURE() << p.status().message();
    return Problem{};
  }
  return *p;
}

Problem UnitProblem(int devices, int microbatches, bool split) {
  std::ostringstream os;
  os << "\"name\": \"unit\", \"devices\": " << devices << ", \"microbatches\": " << microbatches
     << ", \"split_backward\": " << (split ? "true" : "false")
     << ", \"stage_time\": {\"f\": 1, \"b\": 1, \"w\": 1}, \"memory\": {\"activation\": 1, "
        "\"freed_by_b\": 0.5}";
  return MakeProblem(os.str());
}

Problem RandomProblem(std::mt19937& rng, int devices, int microbatches, int v, bool split,
                      bool offload) {
  std::uniform_real_distribution<double> time(0.5, 2.0), comm(0.0, 0.3), mem(0.5, 2.0);
  Problem p;
  p.name = "random";
  p.devices = devices;
  p.microbatches = microbatches;
  p.stages_per_device = v;
  p.stage_device = *PlaceStages("interleaved", devices, v);
  p.split_backward = split;
  const int S = p.stages();
  for (int s = 0; s < S; ++s) {
    p.f.push_back(time(rng));
    p.b.push_back(time(rng));
    p.w.push_back(time(rng));
    p.activation.push_back(mem(rng));
    p.freed_by_b.push_back(p.activation.back() * 0.4);
    p.offloadable.push_back(p.activation.back() * 0.9);
  }
  for (int s = 0; s + 1 < S; ++s) p.comm.push_back(comm(rng));
  if (offload) {
    p.offload.emplace();
    for (int s = 0; s < S; ++s) p.offload->push_back(time(rng));
  }
  p.static_memory.assign(devices, 1.0);
  for (int d = 0; d < devices; ++d) p.host_links.push_back({d});
  return p;
}

namespace {

// All orders of `ops` in which every op comes after its same-lane prerequisites.
void Interleavings(std::vector<Op> ops, const std::function<bool(const Op&, const Op&)>& before,
                   std::vector<std::vector<Op>>& out) {
  std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) {
    return std::tie(a.type, a.stage, a.microbatch) < std::tie(b.type, b.stage, b.microbatch);
  });
  do {
    bool ok = true;
    for (std::size_t i = 0; ok && i < ops.size(); ++i) {
      for (std::size_t j = i + 1; ok && j < ops.size(); ++j) ok = !before(ops[j], ops[i]);
    }
    if (ok) out.push_back(ops);
  } while (std::next_permutation(ops.begin(), ops.end(), [](const Op& a, const Op& b) {
    return std::tie(a.type, a.stage, a.microbatch) < std::tie(b.type, b.stage, b.microbatch);
  }));
}

bool SameActivationBefore(const Op& a, const Op& b) {
  // a must precede b on one lane: same (stage, mb) and earlier in F,B,W or O,R.
  return a.stage == b.stage && a.microbatch == b.microbatch && a.type < b.type;
}

void Product(const std::vector<std::vector<std::vector<Op>>>& choices, std::size_t lane,
             std::vector<std::vector<Op>>& pick, const std::function<void()>& fn) {
  if (lane == choices.size()) {
    fn();
    return;
  }
  for (const auto& order : choices[lane]) {
    pick[lane] = order;
    Product(choices, lane + 1, pick, fn);
  }
}

// The semi-active times of a schedule's orders in which every device
// allocates (its forwards and reloads start) in a given order: each op
// starts as soon as its lane, its predecessors, the allocation before it and
// memory allow. Keeps its buffers from call to call.
class SemiActive {
 public:
  explicit SemiActive(const Problem& p) : p_(p), space_(p.op_space()) {}

  // False where the orders deadlock; else start() holds the times (NaN for
  // ops s does not run) and makespan() the last end. Without `alloc`, the
  // times without memory: no schedule of these orders ends earlier.
  bool Run(const Schedule& s, const std::vector<std::vector<Op>>* alloc) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    offloaded_ = OffloadedSet(p_, s);
    lanes_.clear();
    for (const std::vector<Op>& lane : s.compute) lanes_.push_back(&lane);
    for (const std::vector<Op>& lane : s.copy) lanes_.push_back(&lane);
    start_.assign(space_.size(), nan);
    end_.assign(space_.size(), nan);
    mem_ = p_.static_memory;
    pos_.assign(lanes_.size(), 0);
    next_.assign(p_.devices, 0);
    running_.assign(lanes_.size(), -1);
    std::size_t total = 0, ended = 0;
    for (const auto* lane : lanes_) total += lane->size();
    for (double t = 0; ended < total;) {
      for (bool progress = true; progress;) {
        progress = false;
        for (std::size_t r = 0; r < lanes_.size(); ++r) {  // frees count before allocations
          if (running_[r] >= 0 && end_[running_[r]] <= t) {
            const Op op = space_.At(running_[r]);
            mem_[DeviceOf(p_, op)] -= Frees(p_, op);
            running_[r] = -1;
            ++ended;
            progress = true;
          }
        }
        for (std::size_t r = 0; r < lanes_.size(); ++r) {
          if (running_[r] < 0 && pos_[r] < lanes_[r]->size() && TryStart(r, t, alloc)) {
            progress = true;
          }
        }
      }
      double later = std::numeric_limits<double>::infinity();
      for (std::size_t r = 0; r < lanes_.size(); ++r) {
        if (running_[r] >= 0) later = std::min(later, end_[running_[r]]);
        if (running_[r] < 0 && pos_[r] < lanes_[r]->size()) {
          const double at = ReadyAt((*lanes_[r])[pos_[r]]);
          if (at > t) later = std::min(later, at);
        }
      }
      if (ended < total && later == std::numeric_limits<double>::infinity()) return false;
      t = later;
    }
    makespan_ = 0;
    for (double e : end_) {
      if (!std::isnan(e)) makespan_ = std::max(makespan_, e);
    }
    return true;
  }
  const std::vector<double>& start() const { return start_; }
  double makespan() const { return makespan_; }

 private:
  // When every predecessor has ended and its lag passed; NaN while one runs.
  double ReadyAt(const Op& h) const {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    double at = 0;
    ForEachPredecessor(p_, offloaded_, h, [&](const Op& q, double lag) {
      const double e = end_[space_.Index(q)];
      at = std::isnan(e) || std::isnan(at) ? nan : std::max(at, e + lag);
    });
    return at;
  }
  bool TryStart(std::size_t r, double t, const std::vector<std::vector<Op>>* alloc) {
    const Op h = (*lanes_[r])[pos_[r]];
    if (!(ReadyAt(h) <= t)) return false;
    const int d = DeviceOf(p_, h);
    if (alloc && (h.type == OpType::kF || h.type == OpType::kR)) {
      if (next_[d] == (*alloc)[d].size() || !((*alloc)[d][next_[d]] == h)) return false;
      const double limit = p_.memory_limit ? (*p_.memory_limit)[d] : 0;
      if (p_.memory_limit && mem_[d] + Allocates(p_, h) > limit + 1e-9 * std::max(1.0, limit)) {
        return false;
      }
      ++next_[d];
      mem_[d] += Allocates(p_, h);
    }
    const int i = space_.Index(h);
    start_[i] = t;
    end_[i] = t + Duration(p_, h);
    running_[r] = i;
    ++pos_[r];
    return true;
  }

  const Problem& p_;
  const OpSpace space_;
  std::vector<char> offloaded_;
  std::vector<const std::vector<Op>*> lanes_;
  std::vector<double> start_, end_, mem_;
  std::vector<std::size_t> pos_, next_;
  std::vector<int> running_;
  double makespan_ = 0;
};

// Calls fn(merged) for every merge of two sequences that keeps each one's
// order and puts every reload after its own activation's forward.
void Merges(const std::vector<Op>& forwards, const std::vector<Op>& reloads, std::size_t f,
            std::size_t r, std::vector<Op>& merged, const std::function<void()>& fn) {
  if (f == forwards.size() && r == reloads.size()) {
    fn();
    return;
  }
  if (f < forwards.size()) {
    merged.push_back(forwards[f]);
    Merges(forwards, reloads, f + 1, r, merged, fn);
    merged.pop_back();
  }
  if (r < reloads.size() &&
      std::any_of(forwards.begin(), forwards.begin() + static_cast<std::ptrdiff_t>(f),
                  [&](const Op& op) {
                    return op.stage == reloads[r].stage && op.microbatch == reloads[r].microbatch;
                  })) {
    merged.push_back(reloads[r]);
    Merges(forwards, reloads, f, r + 1, merged, fn);
    merged.pop_back();
  }
}

// Calls fn(held, makespan) for s held to the semi-active times of every
// allocation order of its devices where it reloads under a memory limit (the
// makespan is the semi-active one's, before the simulator replays it), none
// where these orders cannot end before `cutoff` even without memory. The
// simulator replays orders as soon as possible, which misses schedules whose
// reloads wait for the forwards before them; every schedule is at least as
// late as the semi-active one of its own orders and allocation order, since
// earlier ends only free memory earlier.
void ForEachAllocationOrder(const Problem& p, const Schedule& s, SemiActive& semi, double cutoff,
                            const std::function<void(const Schedule&, double)>& fn) {
  std::vector<std::vector<Op>> forwards(p.devices), reloads(p.devices);
  for (int d = 0; d < p.devices; ++d) {
    for (const Op& op : s.compute[d]) {
      if (op.type == OpType::kF) forwards[d].push_back(op);
    }
  }
  bool any = false;
  for (const std::vector<Op>& lane : s.copy) {
    for (const Op& op : lane) {
      if (op.type == OpType::kR) reloads[DeviceOf(p, op)].push_back(op), any = true;
    }
  }
  if (!any || !p.memory_limit) return;
  // None ends before these orders do without memory: none below `cutoff`.
  if (!semi.Run(s, nullptr) || semi.makespan() >= cutoff) return;
  std::vector<std::vector<Op>> alloc(p.devices);
  Schedule held = s;
  const std::function<void(int)> device = [&](int d) {
    if (d == p.devices) {
      if (!semi.Run(s, &alloc)) return;
      held.release.assign(semi.start().size(), 0.0);
      for (std::size_t i = 0; i < held.release.size(); ++i) {
        if (!std::isnan(semi.start()[i])) held.release[i] = semi.start()[i];
      }
      fn(held, semi.makespan());
      return;
    }
    alloc[d].clear();
    Merges(forwards[d], reloads[d], 0, 0, alloc[d], [&] { device(d + 1); });
  };
  device(0);
}

// Whether an op of r, s's replay, starts later than its lane and its
// predecessors allow: it waited for memory. Where none did, no schedule of
// these orders starts any op sooner.
bool WaitsForMemory(const Problem& p, const Schedule& s, const SimResult& r) {
  const OpSpace space = p.op_space();
  const std::vector<char> offloaded = OffloadedSet(p, s);
  const auto waits = [&](const std::vector<Op>& lane) {
    for (std::size_t k = 0; k < lane.size(); ++k) {
      double ready = k > 0 ? r.end[space.Index(lane[k - 1])] : 0.0;
      ForEachPredecessor(p, offloaded, lane[k], [&](const Op& q, double lag) {
        ready = std::max(ready, r.end[space.Index(q)] + lag);
      });
      if (r.start[space.Index(lane[k])] > ready + 1e-9) return true;
    }
    return false;
  };
  return std::any_of(s.compute.begin(), s.compute.end(), waits) ||
         std::any_of(s.copy.begin(), s.copy.end(), waits);
}

}  // namespace

double BruteForceOptimum(const Problem& p, bool offload, long* count) {
  double best = std::numeric_limits<double>::infinity();
  Simulator sim(p);
  sim.set_describe_deadlocks(false);  // many orders deadlock; only the optimum matters
  SemiActive semi(p);
  long n = 0;
  ForEachSchedule(p, offload, [&](const Schedule& orders) {
    StatusOr<SimResult> asap = sim.Run(orders);
    ++n;
    if (asap.ok()) best = std::min(best, asap->objective);
    if (asap.ok() && !WaitsForMemory(p, orders, *asap)) return;
    const double cutoff =
        p.objective == Objective::kMakespan ? best : std::numeric_limits<double>::infinity();
    ForEachAllocationOrder(p, orders, semi, cutoff, [&](const Schedule& held, double makespan) {
      // A makespan no better than the best is no better replayed.
      if (p.objective == Objective::kMakespan && makespan >= best) return;
      StatusOr<SimResult> r = sim.Run(held);
      ++n;
      if (r.ok()) best = std::min(best, r->objective);
    });
  });
  if (count) *count = n;
  return best;
}

Problem OffloadTwoByTwo() {
  return MakeProblem(
      R"("devices": 2, "microbatches": 2, "stage_time": {"f": [1.73, 1.31], "b": [0.58, 1.31],
         "w": [0.5, 1.27]}, "offload_time": [1.61, 1.17], "memory": {"activation": [0.77, 0.86],
         "freed_by_b": [0.31, 0.35], "offloadable": [0.69, 0.78], "static": 1,
         "limit": [2.34, 2.51]})");
}

Problem HeldReloadsProblem() {
  return MakeProblem(
      R"("devices": 2, "microbatches": 1, "stages_per_device": 2, "split_backward": false,
         "stage_time": {"f": [1, 1, 2, 2], "b": [2, 1, 1, 1], "w": [1, 1, 1, 2]},
         "offload_time": [1, 1, 1, 3],
         "memory": {"activation": [1.5, 0.75, 1.25, 1.75], "static": 1, "limit": [2.75, 3.25]})");
}

std::vector<NamedProblem> TinyProblems(std::mt19937& rng) {
  std::vector<NamedProblem> out;
  for (auto [d, m] : {std::pair{2, 2}, {2, 3}, {3, 2}}) {
    for (bool split : {true, false}) {
      if (split && d == 2 && m == 3) continue;  // 2.8M orders: too slow to enumerate
      const std::string tag =
          std::to_string(d) + "x" + std::to_string(m) + (split ? "-split" : "-fused");
      out.push_back({"unit-" + tag, UnitProblem(d, m, split)});
      out.push_back({"random-" + tag, RandomProblem(rng, d, m, 1, split)});
      Problem lim = RandomProblem(rng, d, m, 1, split);
      lim.memory_limit = std::vector<double>(d);
      for (int k = 0; k < d; ++k) {
        (*lim.memory_limit)[k] =
            lim.static_memory[k] + lim.activation[k] * std::max(1.0, d - k - 0.5);
      }
      out.push_back({"limited-" + tag, lim});
    }
  }
  out.push_back({"interleaved-2x1x2", RandomProblem(rng, 2, 1, 2, true)});
  return out;
}

void ForEachSchedule(const Problem& p, bool offload,
                     const std::function<void(const Schedule&)>& fn) {
  const int S = p.stages(), M = p.microbatches;
  std::vector<std::vector<std::vector<Op>>> compute(p.devices);
  for (int d = 0; d < p.devices; ++d) {
    std::vector<Op> ops;
    for (int s = 0; s < S; ++s) {
      if (p.stage_device[s] != d) continue;
      for (int m = 0; m < M; ++m) {
        ops.push_back({OpType::kF, s, m});
        ops.push_back({OpType::kB, s, m});
        if (p.split_backward) ops.push_back({OpType::kW, s, m});
      }
    }
    Interleavings(ops, SameActivationBefore, compute[d]);
  }
  const int subsets = offload ? 1 << (S * M) : 1;
  const std::vector<int> link = LinkOfDevice(p);
  for (int mask = 0; mask < subsets; ++mask) {
    // Offloading nothing frees nothing and only delays its B: never needed.
    bool moves_nothing = false;
    for (int a = 0; a < S * M; ++a) moves_nothing |= (mask >> a & 1) && p.offloadable[a / M] <= 0;
    if (moves_nothing) continue;
    std::vector<std::vector<std::vector<Op>>> copy(p.host_links.size());
    std::vector<std::vector<Op>> ops(p.host_links.size());
    for (int s = 0; s < S; ++s) {
      for (int m = 0; m < M; ++m) {
        if (!(mask >> (s * M + m) & 1)) continue;
        ops[link[p.stage_device[s]]].push_back({OpType::kO, s, m});
        ops[link[p.stage_device[s]]].push_back({OpType::kR, s, m});
      }
    }
    for (std::size_t l = 0; l < ops.size(); ++l)
      Interleavings(ops[l], SameActivationBefore, copy[l]);
    Schedule sched = Schedule::Empty(p, "brute-force");
    Product(compute, 0, sched.compute, [&] { Product(copy, 0, sched.copy, [&] { fn(sched); }); });
  }
}

Solution Solve(const Problem& p, const std::string& method) {
  StatusOr<Solution> s = RunMethod(p, method);
  EXPECT_TRUE(s.ok()) << method << ": " << s.status().message();
  if (!s.ok()) return {};
  const CheckReport rep = CheckSchedule(p, ToTimed(p, s->schedule, s->sim));
  EXPECT_TRUE(rep.valid()) << method << ": " << rep.errors.front();
  EXPECT_NEAR(rep.objective, s->sim.objective, 1e-9) << method;
  return *s;
}

std::string CasePath(const std::string& name) {
  return std::string(OPTPIPE_SOURCE_DIR) + "/tests/cases/" + name + ".json";
}

}  // namespace optpipe::testing
