// GIS, GIS-H, PO-H and PO-F against the published values (Wan et al. 2025,
// Table 1 and §3) on unit costs, the Llama case, shared host links, and
// random heterogeneous problems checked by the independent checker.
#include "heuristics/pipe_offload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <tuple>

#include "core/checker.h"
#include "core/format.h"
#include "core/lower_bound.h"
#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

// F = B = W = 1, activation 1 (half freed by B, half by W), comm 0; offload
// time `offload` (0: offload not allowed), memory limit `limit` per device
// (0: none).
Problem Unit(int d, int m, int v, double offload = 0, double limit = 0,
             const std::string& extra = "") {
  std::ostringstream os;
  os << "\"name\": \"unit\", \"devices\": " << d << ", \"microbatches\": " << m
     << ", \"stages_per_device\": " << v
     << ", \"stage_time\": {\"f\": 1, \"b\": 1, \"w\": 1}, \"memory\": {\"activation\": 1, "
        "\"freed_by_b\": 0.5"
     << (limit > 0 ? ", \"limit\": " + std::to_string(limit) : "") << "}";
  if (offload > 0) os << ", \"offload_time\": " << offload;
  return testing::MakeProblem(os.str() + extra);
}

using testing::Solve;  // run through the registry, then check independently

bool Fits(const Problem& p, const std::string& method) { return RunMethod(p, method).ok(); }

int Copies(const Schedule& s) {
  int n = 0;
  for (const auto& lane : s.copy) n += static_cast<int>(lane.size());
  return n;
}

// GIS on unit costs, Table 1: bubble (d-1)(T_F + T_B) = 2(d-1) on top of the
// 3Mv of work per device, and rank i holds d(v-1) + d - i activations (its
// warm-up forwards; after it every device runs B W F, freeing one activation
// per new one). By hand for v = 2, d = 4: rank 0's 8 warm-up F end at t = 8;
// the first B it may run is stage 4's of micro-batch 0, whose F chain ended on
// rank 3 at t = 8, so its B chain reaches rank 0 at 8 + 3 = 11: d - 1 idle
// slots; the last micro-batch's B chain costs rank 0 the other d - 1 (W fill
// half of each gap), 3*8*2 + 6 = 54.
TEST(Gis, UnitCostsMatchTable1) {
  for (auto [d, m, v] : {std::tuple{4, 8, 2}, {4, 16, 2}, {8, 32, 2}, {8, 32, 4}, {4, 8, 1}}) {
    const Solution sol = Solve(Unit(d, m, v), "gis");
    EXPECT_DOUBLE_EQ(sol.sim.makespan, 3.0 * m * v + 2 * (d - 1)) << d << "x" << m << "x" << v;
    for (int i = 0; i < d; ++i) EXPECT_DOUBLE_EQ(sol.sim.peak_memory[i], d * v - i) << i;
  }
}

// GIS-H (g = d/2), Table 1: bubble (d-1)(T_F + T_B) + (v-1)d/2 (T_F + T_B - T_W)
// = 2(d-1) + (v-1)d/2, peak g(v-1) + d - i on rank i (§3.2). With v = 1 the
// group does not matter: it is 1F1B with W right after B, 3M + 2(d-1) (the
// last micro-batch's B leaves rank d-1 at 3M + d - 2, walks back d-1 ranks,
// then rank 0 runs its W) and d - i activations.
TEST(Gis, GisHUnitCostsMatchTable1) {
  for (auto [d, m, v] : {std::tuple{4, 16, 2}, {8, 32, 2}, {8, 32, 4}, {8, 16, 3}, {6, 12, 1}}) {
    const int g = d / 2;
    const Solution sol = Solve(Unit(d, m, v), "gis-h");
    EXPECT_DOUBLE_EQ(sol.sim.makespan, 3.0 * m * v + 2 * (d - 1) + (v - 1) * d / 2.0)
        << d << "x" << m << "x" << v;
    for (int i = 0; i < d; ++i) EXPECT_DOUBLE_EQ(sol.sim.peak_memory[i], g * (v - 1) + d - i) << i;
  }
}

// Under a limit GIS-H takes the largest group that fits (§3.2): peak
// g(v-1) + d <= 14 gives g = 6 for d = 8, v = 2, at an extra bubble of
// (d - g)(v - 1) = 2 over GIS (M = 24 is a multiple of every group tried, as
// the formula assumes; a last, partial group adds its own bubble). Below
// g = 4's 12 nothing fits, and the error says what the leanest setting needs.
TEST(Gis, GisHTakesTheLargestGroupThatFits) {
  const Solution sol = Solve(Unit(8, 24, 2, 0, 14), "gis-h");
  EXPECT_DOUBLE_EQ(sol.sim.peak_memory[0], 14);
  EXPECT_DOUBLE_EQ(sol.sim.makespan, 3.0 * 24 * 2 + 2 * 7 + 2);
  StatusOr<Solution> none = RunMethod(Unit(8, 24, 2, 0, 11.5), "gis-h");
  ASSERT_EQ(none.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(none.status().message().find("the leanest, g = 4, needs peak memory [12, 11"),
            std::string::npos)
      << none.status().message();
  EXPECT_EQ(RunMethod(Unit(8, 32, 2, 0, 15.5), "gis").status().code(), StatusCode::kInfeasible);
}

TEST(Gis, PreconditionsSayWhatTheyNeed) {
  StatusOr<Problem> vshape = LoadProblem(testing::CasePath("unit-4x8-vshape"));
  ASSERT_TRUE(vshape.ok());
  for (const char* m : {"gis", "gis-h", "po-h", "po-f"}) {
    StatusOr<Solution> sol = RunMethod(*vshape, m);
    EXPECT_EQ(sol.status().code(), StatusCode::kNotApplicable) << m;
  }
  EXPECT_NE(RunMethod(*vshape, "gis").status().message().find("interleaved"), std::string::npos);
  StatusOr<Solution> po = RunMethod(Unit(4, 8, 2), "po-h");
  EXPECT_EQ(po.status().code(), StatusCode::kNotApplicable);
  EXPECT_NE(po.status().message().find("offload_time"), std::string::npos);
  EXPECT_TRUE(RunMethod(Unit(4, 8, 2), "gis-h").ok());  // GIS needs no offload
}

// When the link is slower than the compute (k > 1: a round trip of 4 units per
// 3 of compute) and the limit of 3 activations leaves no room for the
// activations PipeOffload would keep, PO-F falls back to offloading every
// activation that lives at least a round trip and letting backwards wait for
// reloads, as PipeOffload runs at k > 1: valid, within the limit, stages 0 and 1
// (lifespans 6 and 4 in 1F1B) entirely through the link, the last stage (its
// B follows its F) not at all, and bounded below by the link's work on device
// 0 (8 round trips of 4, plus the first forward and the last B and W).
TEST(PipeOffload, SlowLinkKeepsEveryOffload) {
  const Problem p = Unit(4, 8, 1, 2.0, 3);
  const Solution sol = Solve(p, "po-f");
  std::vector<int> per_stage(4, 0);
  for (const auto& lane : sol.schedule.copy) {
    for (const Op& op : lane) ++per_stage[op.stage];
  }
  EXPECT_EQ(per_stage[0], 2 * 8);
  EXPECT_EQ(per_stage[1], 2 * 8);
  EXPECT_EQ(per_stage[3], 0);
  EXPECT_LE(*std::max_element(sol.sim.peak_memory.begin(), sol.sim.peak_memory.end()), 3);
  EXPECT_GE(sol.sim.makespan, 8 * 2 * 2.0 + 1 + 2);
  // Without the fallback nothing fits: the free-lunch plan keeps activations.
  Schedule bare = sol.schedule;
  ASSERT_TRUE(pipe_offload::PlaceCopies(p, bare, pipe_offload::OffloadedStages(p, true)).ok());
  EXPECT_EQ(Simulate(p, bare).status().code(), StatusCode::kInfeasible);
  // The memory-aware methods do better here (OptPipe, Table 1).
  EXPECT_LT(Solve(p, "auto").sim.makespan, 0.9 * sol.sim.makespan);
}

// Offload is a free lunch when the link keeps up (§1: k <= 1; here O + R = 1
// per 3 units of compute): PO's compute ops start exactly when they would
// without any copy, so the compute idle time is the same, while nearly every
// activation goes to the host. Table 1 bounds PO's bubble by v(d-1)(F+B+W).
TEST(PipeOffload, CopiesOverlapCompute) {
  for (auto [d, m, v] : {std::tuple{4, 16, 2}, {8, 32, 2}, {8, 32, 4}, {4, 8, 1}}) {
    const Problem p = Unit(d, m, v, 0.5);
    for (const char* method : {"po-h", "po-f"}) {
      const Solution sol = Solve(p, method);
      Schedule bare = sol.schedule;
      for (auto& lane : bare.copy) lane.clear();
      StatusOr<SimResult> ref = Simulate(p, bare);
      ASSERT_TRUE(ref.ok());
      const OpSpace sp = p.op_space();
      for (int i = 0; i < sp.size(); ++i) {
        if (IsCompute(sp.At(i).type) && !std::isnan(ref->start[i])) {
          ASSERT_DOUBLE_EQ(sol.sim.start[i], ref->start[i]) << method << " " << ToString(sp.At(i));
        }
      }
      const double idle =
          d * sol.sim.makespan - std::accumulate(sol.sim.busy.begin(), sol.sim.busy.end(), 0.0);
      const double ref_idle =
          d * ref->makespan - std::accumulate(ref->busy.begin(), ref->busy.end(), 0.0);
      EXPECT_DOUBLE_EQ(idle, ref_idle) << method;
      EXPECT_LT(sol.sim.makespan, 3.0 * m * v + v * (d - 1) * 3.0) << method;
      // PO-F offloads all but the last stage's short-lived activations.
      if (std::string(method) == "po-f") {
        EXPECT_GE(Copies(sol.schedule), 2 * (d - 1) * v * m - 2 * d * v);
      }
    }
  }
  // With v = 1 PipeOffload keeps 1F1B's order: 3M + 2(d-1) as for gis-h.
  EXPECT_DOUBLE_EQ(Solve(Unit(4, 8, 1, 0.5), "po-h").sim.makespan, 30);
}

// Table 1 memory, in activations of one stage (M = the whole model's = d*v of
// them): GIS-H holds g(v-1) + d = d(v+1)/2, PO-H about d(v+2)/8 (only the
// short-lived second half of the chunks stays), PO-F O(1), independent of d
// and v. On top of the formula an offloading device holds the activations in
// transit (the one being offloaded, the one just reloaded): PO-H fits a limit
// of d(v+2)/8 + 2 but not d(v+2)/8 - 1, PO-F fits 2 everywhere, GIS-H fits none
// of these. Under the limit reloads wait for memory, so the limit is the peak.
TEST(PipeOffload, PeakMemoryMatchesTable1) {
  for (auto [d, m, v] : {std::tuple{4, 16, 2}, {8, 32, 2}, {8, 32, 4}}) {
    const double po_h = d * (v + 2) / 8.0;
    SCOPED_TRACE(std::to_string(d) + "x" + std::to_string(m) + "x" + std::to_string(v));
    EXPECT_TRUE(Fits(Unit(d, m, v, 0.5, po_h + 2), "po-h"));
    EXPECT_FALSE(Fits(Unit(d, m, v, 0.5, po_h - 1), "po-h"));
    const Solution full = Solve(Unit(d, m, v, 0.5, 2), "po-f");
    EXPECT_LE(*std::max_element(full.sim.peak_memory.begin(), full.sim.peak_memory.end()), 2);
    EXPECT_FALSE(Fits(Unit(d, m, v, 0.5, po_h + 2), "gis-h"));
    EXPECT_TRUE(Fits(Unit(d, m, v, 0.5, d / 2 * (v - 1) + d), "gis-h"));
  }
}

// The Llama case: 1F1B needs 51.3 on device 0 (8 activations of 2.6 over 30.5
// static) against 42; PO-H offloads the first half of the pipeline (devices
// 0-3, v = 1) and fits, at 1F1B's own makespan. PO-F also offloads devices
// 4-6 (device 7's activations live too short), so it needs less memory: it
// fits 2 activations of headroom on every device, where PO-H needs device 4's
// four non-offloaded activations.
TEST(PipeOffload, LlamaFitsWhere1F1BDoesNot) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath("llama-8dev-offload"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(RunMethod(*p, "1f1b").status().code(), StatusCode::kInfeasible);
  EXPECT_EQ(RunMethod(*p, "gis-h").status().code(), StatusCode::kInfeasible);
  const Solution h = Solve(*p, "po-h");
  for (int d = 0; d < 8; ++d) EXPECT_LE(h.sim.peak_memory[d], 42 + 1e-9);
  const Solution f = Solve(*p, "po-f");
  Problem unlimited = *p;
  unlimited.memory_limit.reset();
  EXPECT_DOUBLE_EQ(h.sim.makespan, Solve(unlimited, "1f1b").sim.makespan);
  const auto sum = [](const std::vector<double>& v) {
    return std::accumulate(v.begin(), v.end(), 0.0);
  };
  EXPECT_LT(sum(f.sim.peak_memory), sum(h.sim.peak_memory));
  for (int d = 0; d < 8; ++d) EXPECT_LE(f.sim.peak_memory[d], h.sim.peak_memory[d] + 1e-9) << d;
  Problem tight = *p;
  for (int d = 0; d < 8; ++d) (*tight.memory_limit)[d] = p->static_memory[d] + 2 * 2.6;
  (*tight.memory_limit)[7] = p->static_memory[7] + 2 * 3.4;
  EXPECT_TRUE(Fits(tight, "po-f"));
  StatusOr<Solution> half = RunMethod(tight, "po-h");
  ASSERT_EQ(half.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(half.status().message().find("needs peak memory"), std::string::npos);
}

// Devices 0 and 1 (and 2 and 3) share a host link: their copies run on one
// lane, one at a time (the checker checks it), interleaved rather than one
// device's after the other's, and still never delay compute.
TEST(PipeOffload, SharedHostLinkSerialisesBothDevices) {
  const Problem p = Unit(4, 16, 2, 0.5, 0, R"(, "host_links": [[0, 1], [2, 3]])");
  const Solution sol = Solve(p, "po-f");
  ASSERT_EQ(sol.schedule.copy.size(), 2u);
  for (int l = 0; l < 2; ++l) {
    const auto& lane = sol.schedule.copy[l];
    int switches = 0;
    for (std::size_t k = 1; k < lane.size(); ++k) {
      switches += p.stage_device[lane[k].stage] != p.stage_device[lane[k - 1].stage];
    }
    EXPECT_GT(switches, 8) << "link " << l;
    // One at a time: sorted by start, each copy starts after the previous ends.
    std::vector<std::pair<double, double>> spans;
    for (const Op& op : lane) {
      const int i = p.op_space().Index(op);
      spans.push_back({sol.sim.start[i], sol.sim.end[i]});
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k)
      EXPECT_GE(spans[k].first, spans[k - 1].second - 1e-9);
  }
  const Solution separate = Solve(Unit(4, 16, 2, 0.5), "po-f");
  EXPECT_DOUBLE_EQ(sol.sim.makespan, separate.sim.makespan);
  // A slow shared link cannot carry both devices' copies: fewer activations
  // move, the rest stay on the device, and compute is still not delayed.
  const Problem slow = Unit(4, 16, 2, 1.5, 0, R"(, "host_links": [[0, 1], [2, 3]])");
  const Solution shared_slow = Solve(slow, "po-f");
  EXPECT_LT(Copies(shared_slow.schedule), Copies(Solve(Unit(4, 16, 2, 1.5), "po-f").schedule));
  EXPECT_DOUBLE_EQ(shared_slow.sim.makespan, separate.sim.makespan);
}

// Random heterogeneous problems with offload and a memory limit from loose to
// very tight: every method gives a checker-valid schedule that respects the
// limit, or says it does not apply / does not fit.
TEST(PipeOffload, RandomProblemsValidOrSayWhyNot) {
  std::mt19937 rng(2025);
  int solved = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::uniform_int_distribution<int> dev(1, 8), mb(1, 32), chunks(1, 3);
    const int D = dev(rng), v = chunks(rng);
    Problem p = testing::RandomProblem(rng, D, mb(rng), v, trial % 2 == 0, /*offload=*/true);
    if (trial % 5 == 1) {  // every device on one host link
      p.host_links.assign(1, std::vector<int>(D));
      std::iota(p.host_links[0].begin(), p.host_links[0].end(), 0);
    }
    if (trial % 3 == 0) p.objective = Objective::kDeviceSpan;
    const double factor = std::array{0.0, 2.0, 1.0, 0.5, 0.25}[trial % 5];
    if (factor > 0) {
      p.memory_limit.emplace();
      for (int d = 0; d < D; ++d) {
        double act = 0;
        for (int s = d; s < p.stages(); s += D) act += p.activation[s];
        p.memory_limit->push_back(p.static_memory[d] + factor * D * act);
      }
    }
    for (const char* m : {"gis", "gis-h", "po-h", "po-f"}) {
      StatusOr<Solution> sol = RunMethod(p, m);
      if (!sol.ok()) {
        EXPECT_EQ(sol.status().code(), StatusCode::kInfeasible)
            << m << ": " << sol.status().message();
        EXPECT_NE(sol.status().message().find("needs peak memory"), std::string::npos)
            << sol.status().message();
        continue;
      }
      ++solved;
      const CheckReport rep = CheckSchedule(p, ToTimed(p, sol->schedule, sol->sim));
      EXPECT_TRUE(rep.valid()) << m << ": " << rep.errors.front();
      EXPECT_NEAR(rep.objective, sol->sim.objective, 1e-9);
    }
  }
  EXPECT_GT(solved, 80);
}

// Copies on the host link of device 0.
int RoundTrips(const Problem& p, const Schedule& s) {
  const int l = LinkOfDevice(p)[0];
  return static_cast<int>(std::count_if(s.copy[l].begin(), s.copy[l].end(),
                                        [](const Op& op) { return op.type == OpType::kO; }));
}

// A host link slower than the compute (a round trip of 4 against 3 units of
// work per micro-batch) and room for 3 activations: PO-F sends nearly every
// activation of the first devices through the link and waits for it (device
// 0's link alone then needs 4 per micro-batch); keeping some on the device is
// faster. po-keep starts from PO-F's copy plan and only takes changes that
// pay, so it can only be better; here it keeps activations of device 0 and
// beats PO-F by more than 10%.
TEST(PoKeep, SlowLinkKeepsSomeActivations) {
  for (auto [d, m] : {std::pair{4, 8}, {8, 16}}) {
    const Problem p = Unit(d, m, 1, /*offload=*/2, /*limit=*/3);
    const Solution f = Solve(p, "po-f");
    const Solution k = Solve(p, "po-keep");
    EXPECT_LT(k.sim.makespan, 0.9 * f.sim.makespan) << d << "x" << m;
    EXPECT_LT(RoundTrips(p, k.schedule), RoundTrips(p, f.schedule)) << d << "x" << m;
    EXPECT_GE(k.sim.makespan, ComputeLowerBound(p).value - 1e-9);
  }
}

// Before it climbs, po-keep tries keeping micro-batches k-1, 2k-1, ... on
// every device (k = 2..8) and starts from the best pattern that beats
// offloading every activation: with a budget of just those 7 simulations, the
// schedule offloads no activation of such a micro-batch, still offloads most
// others on device 0, and is faster than PO-F.
TEST(PoKeep, StartsFromTheBestOneInKKept) {
  const Problem p = Unit(8, 16, 1, /*offload=*/2, /*limit=*/3);
  const Solution f = Solve(p, "po-f");
  SearchOptions patterns_only;
  patterns_only.max_evaluations = 7;
  StatusOr<Solution> k = RunMethod(p, "po-keep", patterns_only);
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_LT(k->sim.makespan, f.sim.makespan);
  std::vector<char> sent(p.microbatches, 0);
  for (const std::vector<Op>& link : k->schedule.copy) {
    for (const Op& op : link) sent[op.microbatch] |= op.type == OpType::kO;
  }
  int every = 0;
  for (int n = 2; n <= 8 && every == 0; ++n) {
    bool fits = true;
    for (int m = n - 1; m < p.microbatches; m += n) fits = fits && !sent[m];
    if (fits) every = n;
  }
  ASSERT_GT(every, 0) << "no micro-batch pattern kept";
  EXPECT_GE(RoundTrips(p, k->schedule), p.microbatches - p.microbatches / every - 2);
}

// Never worse than PO-F (its start), valid, and under an evaluation budget
// the same schedule on one thread and on two.
TEST(PoKeep, NeverWorseThanPoFAndReproducible) {
  std::mt19937 rng(17);
  int compared = 0, better = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::uniform_int_distribution<int> dev(2, 6), mb(2, 16), chunks(1, 2);
    const int D = dev(rng);
    Problem p = testing::RandomProblem(rng, D, mb(rng), chunks(rng), trial % 2 == 0,
                                       /*offload=*/true);
    p.memory_limit.emplace();
    for (int dv = 0; dv < D; ++dv) {
      double act = 0;
      for (int s = dv; s < p.stages(); s += D) act += p.activation[s];
      p.memory_limit->push_back(p.static_memory[dv] + (trial % 3 + 1) * act);
    }
    StatusOr<Solution> f = RunMethod(p, "po-f");
    if (!f.ok()) {
      StatusOr<Solution> k = RunMethod(p, "po-keep");
      ASSERT_FALSE(k.ok());
      EXPECT_EQ(k.status().code(), f.status().code());
      if (f.status().code() == StatusCode::kInfeasible) {
        EXPECT_NE(k.status().message().find("starts from po-f, which does not fit"),
                  std::string::npos)
            << k.status().message();
      }
      continue;
    }
    ++compared;
    const Solution k = Solve(p, "po-keep");
    EXPECT_LE(k.sim.objective, f->sim.objective + 1e-9);
    better += k.sim.objective < f->sim.objective - 1e-9;
    SearchOptions one, two;
    one.max_evaluations = two.max_evaluations = 300;
    one.threads = 1;
    two.threads = 2;
    StatusOr<Solution> a = RunMethod(p, "po-keep", one), b = RunMethod(p, "po-keep", two);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(ToText(p, a->schedule), ToText(p, b->schedule));
  }
  EXPECT_GT(compared, 15);
  EXPECT_GT(better, 0) << compared;  // random links are mostly fast enough for PO-F
}

}  // namespace
}  // namespace optpipe
