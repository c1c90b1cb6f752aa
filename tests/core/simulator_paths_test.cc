// The simulator's two timings (core/simulator.h): whatever Timing::kAuto
// does (the longest-path pass alone; the pass up to the first allocation
// that waits, then the event loop; a deadlock the pass finds; the event
// loop alone), its result is the event loop's bit for bit (every start and
// end, peak, busy time, span and objective) or the same error, for Run and
// for RunChanged. Checked on random problems (offload, memory limits, shared
// host links, holds, fused and split backward, two chunks) with schedules of
// several methods and chains of random changes, and on every bundled case.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/format.h"
#include "core/simulator.h"
#include "heuristics/list_scheduler.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

using TimedBy = Simulator::TimedBy;

bool SameBits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](double x, double y) { return SameBits(x, y); });
}

// Both timings of one problem side by side, with counts of how kAuto timed.
class BothTimings {
 public:
  // describe: deadlocks named (the default), or not (as searches run).
  explicit BothTimings(const Problem& p, bool describe = true)
      : p_(p), describe_(describe), fast_(p), loop_(p) {
    loop_.set_timing(Simulator::Timing::kEventLoop);
    fast_.set_describe_deadlocks(describe);
    loop_.set_describe_deadlocks(describe);
  }

  // Runs `s` on both (resumed from `base` where given) and expects one
  // result; returns kAuto's, or nullopt where the run fails.
  std::optional<SimResult> Compare(const Schedule& s, const std::string& what,
                                   const Schedule* base = nullptr,
                                   const SimResult* base_run = nullptr) {
    StatusOr<SimResult> a = base ? fast_.RunChanged(s, *base, *base_run) : fast_.Run(s);
    const TimedBy by = fast_.timed_by();
    StatusOr<SimResult> b = base ? loop_.RunChanged(s, *base, *base_run) : loop_.Run(s);
    EXPECT_EQ(loop_.timed_by() == TimedBy::kNone, by == TimedBy::kNone) << what;
    ++(by == TimedBy::kLongestPath ? fast
       : by == TimedBy::kBoth      ? handed_over
       : by == TimedBy::kEventLoop ? loop
                                   : structure);
    EXPECT_EQ(a.ok(), b.ok()) << what << "\n" << ToText(p_, s);
    if (!a.ok() || !b.ok()) {
      // The pass finds deadlocks, and names no ops.
      if (by == TimedBy::kLongestPath) {
        EXPECT_FALSE(describe_) << what;
        ++deadlocks;
      }
      EXPECT_EQ(a.status().code(), b.status().code()) << what;
      EXPECT_EQ(a.status().message(), b.status().message()) << what;
      return std::nullopt;
    }
    const SimResult& x = *a;
    const SimResult& y = *b;
    EXPECT_TRUE(SameBits(x.start, y.start)) << what << ": start\n" << ToText(p_, s);
    EXPECT_TRUE(SameBits(x.end, y.end)) << what << ": end";
    EXPECT_TRUE(SameBits(x.peak_memory, y.peak_memory)) << what << ": peak memory";
    EXPECT_TRUE(SameBits(x.busy, y.busy)) << what << ": busy";
    EXPECT_TRUE(SameBits(x.span, y.span)) << what << ": span";
    EXPECT_TRUE(SameBits(x.makespan, y.makespan)) << what << ": makespan";
    EXPECT_TRUE(SameBits(x.device_span, y.device_span)) << what << ": device span";
    EXPECT_TRUE(SameBits(x.objective, y.objective)) << what << ": objective";
    EXPECT_TRUE(SameBits(x.bubble_ratio, y.bubble_ratio)) << what << ": bubble ratio";
    return x;
  }

  // Runs kAuto timed each way (deadlocks: failures the pass found), or refused.
  int fast = 0, handed_over = 0, loop = 0, structure = 0, deadlocks = 0;

 private:
  const Problem& p_;
  bool describe_;
  Simulator fast_, loop_;
};

// Room on every device for `factor` times one micro-batch's activations of its stages.
void LimitMemory(Problem& p, double factor) {
  p.memory_limit.emplace();
  for (int d = 0; d < p.devices; ++d) {
    double one = 0;
    for (int st = 0; st < p.stages(); ++st) one += p.stage_device[st] == d ? p.activation[st] : 0;
    p.memory_limit->push_back(p.static_memory[d] + one * factor);
  }
}

int Pick(std::mt19937& rng, int n) {
  return n <= 1 ? 0 : std::uniform_int_distribution<int>(0, n - 1)(rng);
}

// A random change of the kinds local search makes: neighbours swapped on a
// device or a link, an op moved a few places, a hold set or dropped, an
// activation offloaded or kept. May deadlock or make an allocation wait.
Schedule Perturb(const Problem& p, const Schedule& s, const SimResult& run, std::mt19937& rng) {
  Schedule next = s;
  const OpSpace sp = p.op_space();
  switch (Pick(rng, 5)) {
    case 0: {
      auto& lane = next.compute[Pick(rng, p.devices)];
      if (lane.size() < 2) break;
      const int k = Pick(rng, static_cast<int>(lane.size()) - 1);
      std::swap(lane[k], lane[k + 1]);
      break;
    }
    case 1: {
      auto& lane = next.compute[Pick(rng, p.devices)];
      if (lane.size() < 2) break;
      const int n = static_cast<int>(lane.size());
      const int from = Pick(rng, n), to = std::clamp(from + Pick(rng, 9) - 4, 0, n - 1);
      const Op op = lane[from];
      lane.erase(lane.begin() + from);
      lane.insert(lane.begin() + to, op);
      break;
    }
    case 2: {
      if (next.copy.empty()) break;
      auto& lane = next.copy[Pick(rng, static_cast<int>(next.copy.size()))];
      if (lane.size() < 2) break;
      const int k = Pick(rng, static_cast<int>(lane.size()) - 1);
      std::swap(lane[k], lane[k + 1]);
      break;
    }
    case 3: {
      next.release.resize(sp.size(), 0.0);
      next.release[Pick(rng, sp.size())] = Pick(rng, 2) ? 0.0 : run.makespan * Pick(rng, 100) / 100;
      break;
    }
    default: {
      if (!p.offload_allowed() || p.stages() < 2) break;
      const std::vector<int> link = LinkOfDevice(p);
      const int st = Pick(rng, p.stages() - 1), m = Pick(rng, p.microbatches);
      auto& lane = next.copy[link[p.stage_device[st]]];
      const Op o{OpType::kO, st, m}, r{OpType::kR, st, m};
      if (const auto it = std::find(lane.begin(), lane.end(), o); it != lane.end()) {
        lane.erase(it);
        lane.erase(std::find(lane.begin(), lane.end(), r));
      } else {
        const int a = Pick(rng, static_cast<int>(lane.size()) + 1);
        lane.insert(lane.begin() + a, o);
        lane.insert(lane.begin() + a + 1 + Pick(rng, static_cast<int>(lane.size()) - a), r);
      }
    }
  }
  return next;
}

// A start schedule and a chain of random changes from it, each run in full
// and resumed from the one before (as local search does), on both timings.
void CompareChain(const Problem& p, const Schedule& start, int steps, std::mt19937& rng,
                  const std::string& what, BothTimings& both) {
  std::optional<SimResult> base_run = both.Compare(start, what);
  if (!base_run) return;
  Schedule base = start;
  for (int step = 0; step < steps; ++step) {
    const Schedule next = Perturb(p, base, *base_run, rng);
    const std::string at = what + ", step " + std::to_string(step);
    const std::optional<SimResult> full = both.Compare(next, at);
    both.Compare(next, at + " resumed", &base, &*base_run);
    if (full) {
      base = next;
      base_run = full;
    }
  }
}

Problem RandomCase(std::mt19937& rng, int trial) {
  const int D = 1 + trial % 5, M = 1 + Pick(rng, 8), v = 1 + trial % 2;
  Problem p = testing::RandomProblem(rng, D, M, v, trial % 3 != 0, trial % 4 != 0);
  if (trial % 5 == 1 && D >= 2) {  // pairs of devices share a host link
    p.host_links.clear();
    for (int d = 0; d < D; d += 2) {
      p.host_links.push_back(d + 1 < D ? std::vector<int>{d, d + 1} : std::vector<int>{d});
    }
  }
  if (trial % 3 != 2) LimitMemory(p, 1.2 + 0.4 * Pick(rng, 5));
  return p;
}

// Schedules of several methods on random problems, and chains of random
// changes from the list scheduler's: one result on both timings, deadlocks
// named or not. kAuto takes the pass on most of them, hands over to the
// event loop at the first allocation that waits on many, and leaves some
// (deadlocks it must name) to the event loop.
TEST(SimulatorPaths, RandomProblemsGiveTheEventLoopsResultBitForBit) {
  std::mt19937 rng(45);
  int fast = 0, handed_over = 0, loop = 0, deadlocks = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const Problem p = RandomCase(rng, trial);
    ASSERT_TRUE(Validate(p).ok()) << Validate(p).message();
    BothTimings both(p, /*describe=*/trial % 2 == 0);
    const std::string what = "trial " + std::to_string(trial);
    for (const auto& build : {BuildGPipe, BuildOneFOneB}) {
      if (StatusOr<Schedule> s = build(p); s.ok()) both.Compare(*s, what);
    }
    if (StatusOr<Schedule> s = BuildList(p); s.ok()) CompareChain(p, *s, 30, rng, what, both);
    fast += both.fast;
    handed_over += both.handed_over;
    loop += both.loop;
    deadlocks += both.deadlocks;
  }
  EXPECT_GE(fast, 3000);
  EXPECT_GE(handed_over, 1000);
  EXPECT_GE(loop, 500);
  EXPECT_GE(deadlocks, 500);
}

// Ops that take no time end at the instant they start; the event loop may
// interleave that instant's frees and allocations in ways the pass does not
// follow, so kAuto leaves such runs to the event loop.
TEST(SimulatorPaths, ZeroLengthOpsTakeTheEventLoop) {
  std::mt19937 rng(3);
  Problem p = testing::RandomProblem(rng, 3, 4, 1, true, true);
  for (double& w : p.w) w = 0;
  LimitMemory(p, 2.5);
  BothTimings both(p);
  both.Compare(*BuildOneFOneB(p), "1f1b, W of no time");
  EXPECT_EQ(both.loop, 1);
  EXPECT_EQ(both.fast, 0);
}

// Where nothing waits for memory, kAuto takes the pass: 1F1B with its own
// memory and no limit, and under a limit it fits.
TEST(SimulatorPaths, FittingSchedulesTakeThePass) {
  std::mt19937 rng(5);
  Problem p = testing::RandomProblem(rng, 4, 8, 1, true, false);
  BothTimings both(p);
  const Schedule s = *BuildOneFOneB(p);
  const SimResult r = *both.Compare(s, "1f1b");
  p.memory_limit = r.peak_memory;  // exactly its peaks: fits, nothing waits
  BothTimings limited(p);
  limited.Compare(s, "1f1b at its own peaks");
  EXPECT_EQ(both.fast + limited.fast, 2);
}

// Every bundled problem (tests/cases, tests/bench/problems) with the
// schedule of every method that builds it quickly, and a short chain of
// changes from the list scheduler's.
TEST(SimulatorPaths, BundledCasesGiveTheEventLoopsResultBitForBit) {
  std::vector<std::string> files;
  for (const char* dir : {"/tests/cases", "/tests/bench/problems"}) {
    for (const auto& e : std::filesystem::directory_iterator(std::string(OPTPIPE_SOURCE_DIR) + dir))
      if (e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 40u);
  std::mt19937 rng(11);
  int fast = 0, schedules = 0;
  for (const std::string& f : files) {
    StatusOr<Problem> p = LoadProblem(f);
    ASSERT_TRUE(p.ok()) << f << ": " << p.status().message();
    BothTimings both(*p);
    for (const MethodInfo& m : Methods()) {
      // auto searches; po-keep and adaoffload simulate hundreds of settings.
      if (m.name == "auto" || m.name == "po-keep" || m.name == "adaoffload") continue;
      if (!m.applicable(*p).ok()) continue;
      StatusOr<Schedule> s = m.search ? m.search(*p, SearchOptions{}) : m.build(*p);
      if (s.ok()) {
        both.Compare(*s, f + " " + m.name);
        ++schedules;
      }
    }
    if (StatusOr<Schedule> s = BuildList(*p); s.ok())
      CompareChain(*p, *s, 10, rng, f + " list", both);
    fast += both.fast;
  }
  EXPECT_GE(schedules, 150);
  EXPECT_GE(fast, 300);
}

}  // namespace
}  // namespace optpipe
