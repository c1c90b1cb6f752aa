// What Solve (exact/solve.h) finds and proves on the problems whose claims
// the CLI test once held at --time-limit 60 and 120: each under a
// deterministic budget where the method has one, else under a time limit its
// claim does not depend on (what must be found is found early, or the search
// is stopped once it is; the rest of the time only bounds).
#include <gtest/gtest.h>

#include <atomic>
#include <regex>
#include <string>
#include <vector>

#include "core/checker.h"
#include "core/format.h"
#include "core/lower_bound.h"
#include "exact/device_search_bound.h"
#include "exact/milp.h"
#include "exact/order_search.h"
#include "exact/solve.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

constexpr double kTol = 1e-9;

Problem Bench(const std::string& name) {
  StatusOr<Problem> p =
      LoadProblem(std::string(OPTPIPE_SOURCE_DIR) + "/tests/bench/problems/" + name + ".json");
  EXPECT_TRUE(p.ok()) << name << ": " << p.status().message();
  return p.ok() ? *p : Problem{};
}

// Unit costs, 4 devices, 8 micro-batches, room for two activations, a round
// trip of 4 per 3 of compute: the optimum is 33 (milp_slow_test.cc).
Problem Tight() {
  return testing::MakeProblem(
      R"("devices": 4, "microbatches": 8, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 2})");
}

// Solve with `method`, its progress lines kept; a failure and an empty
// result where it fails or finds no schedule.
struct Logged {
  SolveResult r;
  std::vector<std::string> log;
};
Logged SolveLogged(const Problem& p, const std::string& method, SolveOptions opt) {
  Logged out;
  opt.method = method;
  opt.log = [&](const std::string& line) { out.log.push_back(line); };
  StatusOr<SolveResult> s = Solve(p, opt);
  EXPECT_TRUE(s.ok()) << method << ": " << s.status().message();
  if (s.ok()) out.r = std::move(*s);
  EXPECT_TRUE(out.r.has_schedule()) << method << ": " << out.r.message;
  return out;
}

// The first progress line that matches `re` (search), its groups in `m`.
bool FindLine(const std::vector<std::string>& log, const std::regex& re, std::smatch& m) {
  for (const std::string& line : log) {
    if (std::regex_search(line, m, re)) return true;
  }
  return false;
}

std::string Joined(const std::vector<std::string>& log) {
  std::string all;
  for (const std::string& line : log) all += line + "\n";
  return all;
}

void ExpectValid(const Problem& p, const SolveResult& r, const std::string& what) {
  const CheckReport rep = CheckSchedule(p, ToTimed(p, r));
  EXPECT_TRUE(rep.valid()) << what << ": " << (rep.valid() ? "" : rep.errors.front());
  EXPECT_NEAR(rep.objective, r.objective, 1e-6) << what;
}

// The device search lifts the tight problem's bound from the core's to within
// a grain of its optimum (32), and a schedule's reported bound, searched with
// the method's own budget, keeps that: sound, and no more than its makespan.
TEST(SolverClaims, AScheduleReportsTheDeviceSearchsBound) {
  const Problem p = Tight();
  const DeviceSearchBound search = ComputeDeviceSearchBound(p, {1'000'000, 60.0});  // nodes end it
  EXPECT_TRUE(search.finished);
  EXPECT_GT(search.value, ComputeLowerBound(p).value + 1);
  EXPECT_GE(search.value, 32 - kTol);
  EXPECT_LE(search.value, 33 + kTol);
  SolveOptions opt;
  opt.time_limit_s = 10;  // the bound's searches get a tenth: the device search ends first
  const Logged s = SolveLogged(p, "po-h", opt);
  EXPECT_GE(s.r.bound, 32 - kTol);
  EXPECT_LE(s.r.bound, s.r.objective + kTol);
  EXPECT_GT(s.r.objective, 33 + kTol);  // po-h is not optimal here
  ExpectValid(p, s.r, "po-h");
}

// auto with an evaluation budget is deterministic: on r48-6s it finds 51.64,
// and the pair of devices 0 and 1, searched again below it, proves it optimal.
TEST(SolverClaims, AutoWithAnEvaluationBudgetProvesR48_6sOptimal) {
  const Problem p = Bench("r48-6s");
  SolveOptions opt;
  opt.evaluations = 10'000;
  opt.threads = 1;
  // A cap: the pairs get a twentieth of it for their 2.5M nodes, and end once they prove it.
  opt.time_limit_s = 600;
  const Logged s = SolveLogged(p, "auto", opt);
  EXPECT_NEAR(s.r.objective, 51.64, kTol);
  EXPECT_NEAR(s.r.bound, s.r.objective, kTol);
  EXPECT_EQ(s.r.gap, 0.0);
  EXPECT_EQ(s.r.termination, Termination::kOptimal);
  ExpectValid(p, s.r, "auto");
}

// Where auto meets the core bound (hetoff-5f: its pairs of devices prove
// 53.45), milp returns that schedule as optimal and runs neither the SAT
// probes nor the MILP model.
TEST(SolverClaims, MilpRunsNoProbeWhereAutoMeetsTheCoreBound) {
  const Problem p = Bench("hetoff-5f");
  const double core = BestLowerBound(p);
  SolveOptions opt;
  opt.time_limit_s = 60;
  const Logged s = SolveLogged(p, "milp", opt);
  EXPECT_EQ(s.r.termination, Termination::kOptimal);
  EXPECT_NEAR(s.r.objective, 53.45, kTol);
  EXPECT_NEAR(s.r.objective, core, kTol);  // proven by the core bound alone
  for (const std::string& line : s.log) {
    EXPECT_EQ(line.find("sat:"), std::string::npos) << line;
    EXPECT_EQ(line.find("model:"), std::string::npos) << line;
  }
  ExpectValid(p, s.r, "milp");
}

// On a fine grid (r48-1f, grain 0.01) milp also solves the problem with its
// times rounded up to a grain of 0.1 and replays every schedule it finds
// there: the best replay ends no later than the coarse schedule, and milp's
// no later than that best replay (for any time limit: replays only shorten).
TEST(SolverClaims, MilpOnAFineGridReplaysACoarsePass) {
  const Problem p = Bench("r48-1f");
  SolveOptions opt;
  opt.time_limit_s = 2;  // the coarse pass gets a quarter
  const Logged s = SolveLogged(p, "milp", opt);
  std::smatch m;
  const std::regex coarse(
      R"(coarse: times rounded up to a grain of 0\.1: ([0-9.]+) .*, ([0-9]+) replayed, the best: ([0-9.]+))");
  ASSERT_TRUE(FindLine(s.log, coarse, m)) << Joined(s.log);
  EXPECT_GT(std::stoi(m[2]), 0);
  EXPECT_LE(std::stod(m[3]), std::stod(m[1]) + kTol);
  EXPECT_LE(s.r.objective, std::stod(m[3]) + 1e-6);  // printed rounded
  ExpectValid(p, s.r, "milp");
}

// r48-1f with times and memory amounts that share no grain (as measured ones):
// no SAT probe applies to it, so milp and auto's polish work on the problem
// rounded to a grain of 0.1, and replay what they find.
Problem WithoutAGrain() {
  Problem p = Bench("r48-1f");
  for (double& f : p.f) f += 0.0003;
  for (double& a : p.activation) a += 0.0007;
  for (double& c : p.comm) c = 0.0513;
  return p;
}

TEST(SolverClaims, MilpWithoutAGrainRunsACoarsePass) {
  const Problem p = WithoutAGrain();
  ASSERT_EQ(TimeGrain(p), 0.0);
  SolveOptions opt;
  opt.time_limit_s = 1.5;
  const Logged s = SolveLogged(p, "milp", opt);
  std::smatch m;
  EXPECT_TRUE(FindLine(s.log, std::regex(R"(coarse: times rounded up to a grain of 0\.1)"), m))
      << Joined(s.log);
  ExpectValid(p, s.r, "milp");
}

// auto there: its SAT polish runs on the coarsened problem, every schedule
// it finds replayed; auto's schedule ends no later than its heuristics' best
// and the best replay.
TEST(SolverClaims, AutoWithoutAGrainPolishesOnACoarserGrid) {
  const Problem p = WithoutAGrain();
  SolveOptions opt;
  opt.time_limit_s = 2;  // half to the heuristics, half to the polish
  const Logged s = SolveLogged(p, "auto", opt);
  std::smatch polish, local;
  ASSERT_TRUE(FindLine(s.log,
                       std::regex(R"(SAT below it \(times rounded up to a grain of 0\.1\) )"
                                  R"([0-9.]+ -> [0-9.]+(, [0-9]+ replayed, the best ([0-9.]+))?)"),
                       polish))
      << Joined(s.log);
  ASSERT_TRUE(FindLine(s.log, std::regex(R"(local search [0-9.]+ -> ([0-9.]+))"), local))
      << Joined(s.log);
  EXPECT_LE(s.r.objective, std::stod(local[1]) + 1e-6);
  if (polish[1].matched) {
    EXPECT_LE(s.r.objective, std::stod(polish[2]) + 1e-6);
  }
  ExpectValid(p, s.r, "auto");
}

// With room for exactly one activation on the last device, which the
// coarse grid's rounding (activations up, rooms down) makes too small for any
// schedule: the polish has nothing to start from, auto says so and keeps its
// heuristics' schedule.
TEST(SolverClaims, AutoWithoutAGrainSaysWhyThereIsNoPolish) {
  Problem p = WithoutAGrain();
  ASSERT_EQ(p.stages(), p.devices);  // one stage a device
  ASSERT_TRUE(p.memory_limit.has_value());
  const int last = p.devices - 1;
  (*p.memory_limit)[last] = p.static_memory[last] + p.activation[last];
  SolveOptions opt;
  opt.time_limit_s = 2;
  const Logged t = SolveLogged(p, "auto", opt);
  EXPECT_NE(
      Joined(t.log).find("auto: no SAT polish: neither its schedule nor the list scheduler's fits"),
      std::string::npos)
      << Joined(t.log);
  ExpectValid(p, t.r, "auto");
}

// Without offload the order search applies: on a memory-limited 8x16 problem
// it lifts the bound more than a unit above the device search's to a
// schedule's makespan (so optimal), never above what auto finds; milp proves
// that schedule optimal through it.
TEST(SolverClaims, TheOrderSearchProvesAMemoryLimitedScheduleOptimal) {
  const Problem p = Bench("hetmem8x16-1f");
  ASSERT_TRUE(OrderSearchApplies(p));
  const DeviceSearchBound devices = ComputeDeviceSearchBound(p);
  StatusOr<Solution> list = RunMethod(p, "list");
  ASSERT_TRUE(list.ok()) << list.status().message();
  OrderSearchOptions os;
  os.time_limit_s = 60;  // the node budget ends it
  const OrderSearchResult order =
      SearchOrders(p, BestLowerBound(p, devices), list->sim.objective, os);
  EXPECT_TRUE(order.optimal);
  EXPECT_GT(order.bound, devices.value + 1);
  SolveOptions aopt;
  aopt.evaluations = 20'000;
  aopt.threads = 1;
  const Logged a = SolveLogged(p, "auto", aopt);
  EXPECT_LE(order.bound, a.r.objective + kTol);

  SolveOptions mopt;
  mopt.time_limit_s = 30;
  const Logged m = SolveLogged(p, "milp", mopt);
  EXPECT_EQ(m.r.termination, Termination::kOptimal);
  EXPECT_NEAR(m.r.objective, order.bound, 1e-6);
  ExpectValid(p, m.r, "milp");
}

// Unit costs, 8 devices, 16 micro-batches, a round trip of 4 per 3 of
// compute, room for 3 activations: a large problem for the SAT probes
// (SatSearchIsLarge). From po-keep's 62 (auto's best seed) milp's probes find
// 61; it is stopped once it reports one. Its bound is at least the core's and
// at most the makespan.
TEST(SolverClaims, MilpFindsTheSlowLinks61) {
  const Problem p = testing::MakeProblem(
      R"("devices": 8, "microbatches": 16, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 3})");
  StatusOr<Solution> keep = RunMethod(p, "po-keep");
  ASSERT_TRUE(keep.ok()) << keep.status().message();
  ASSERT_NEAR(keep->sim.objective, 62, kTol);
  std::atomic<bool> stop{false};
  MilpOptions opt;
  opt.time_limit_s = 30;  // a cap; the probe just below the best gets an eighth
  opt.stop = &stop;
  opt.device_search_nodes = 0;
  opt.known_bound = ComputeLowerBound(p).value;
  opt.on_improvement = [&](const Schedule&, const SimResult& run) {
    if (run.objective <= 61 + kTol) stop = true;
  };
  StatusOr<MilpResult> m = SolveMilp(p, opt, &keep->schedule);
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_TRUE(m->schedule && m->sim);
  EXPECT_LE(m->objective, 61 + kTol);
  EXPECT_GE(m->bound, ComputeLowerBound(p).value - kTol);
  EXPECT_LE(m->bound, m->objective + kTol);
  const CheckReport rep = CheckSchedule(p, ToTimed(p, *m->schedule, *m->sim));
  EXPECT_TRUE(rep.valid()) << (rep.valid() ? "" : rep.errors.front());
  EXPECT_NEAR(rep.objective, m->objective, 1e-6);
}

}  // namespace
}  // namespace optpipe
