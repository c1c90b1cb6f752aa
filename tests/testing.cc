#include "tests/testing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/checker.h"
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

}  // namespace

double BruteForceOptimum(const Problem& p, bool offload, long* count) {
  double best = std::numeric_limits<double>::infinity();
  Simulator sim(p);
  sim.set_describe_deadlocks(false);  // many orders deadlock; only the optimum matters
  long n = 0;
  ForEachSchedule(p, offload, [&](const Schedule& s) {
    StatusOr<SimResult> r = sim.Run(s);
    ++n;
    if (r.ok()) best = std::min(best, r->objective);
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
