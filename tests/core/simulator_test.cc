#include "core/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/checker.h"
#include "heuristics/list_scheduler.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

using testing::MakeProblem;
using testing::UnitProblem;

Schedule FromText(const Problem& p, const std::string& text) {
  StatusOr<Schedule> s = ParseScheduleText(p, text);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : Schedule{};
}

// Room on every device for `factor` times one micro-batch's activations of
// its stages.
void LimitMemory(Problem& p, double factor) {
  p.memory_limit.emplace();
  for (int d = 0; d < p.devices; ++d) {
    double one = 0;
    for (int st = 0; st < p.stages(); ++st) one += p.stage_device[st] == d ? p.activation[st] : 0;
    p.memory_limit->push_back(p.static_memory[d] + one * factor);
  }
}

// 1F1B on unit costs: the classic (M + S - 1)(f + b) with the backward fused,
// and the published peak of S - d activations on device d.
TEST(Simulator, OneFOneBUnitCosts) {
  for (auto [D, M] : {std::pair{4, 8}, {8, 16}, {2, 5}}) {
    Problem fused = UnitProblem(D, M, false);
    StatusOr<SimResult> r = Simulate(fused, *BuildOneFOneB(fused));
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_DOUBLE_EQ(r->makespan, (M + D - 1) * 3.0);
    for (int d = 0; d < D; ++d) EXPECT_DOUBLE_EQ(r->peak_memory[d], D - d);
  }
  Problem split = UnitProblem(4, 8, true);
  StatusOr<SimResult> r = Simulate(split, *BuildOneFOneB(split));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->makespan, 30.0);  // W right after its B
  EXPECT_EQ(r->peak_memory, (std::vector<double>{4, 3, 2, 1}));
  EXPECT_DOUBLE_EQ(r->bubble_ratio, 1.0 - 4 * 24.0 / (4 * 30.0));
}

// A hold delays its op and what depends on it, never less than the orders do.
TEST(Simulator, HoldsDelayOpsToTheirReleaseTime) {
  Problem p = MakeProblem(R"("devices": 2, "microbatches": 1, "split_backward": false,
      "stage_time": {"f": 1, "b": 1}, "comm_time": 0.5)");
  const OpSpace sp = p.op_space();
  StatusOr<SimResult> r = Simulate(p, FromText(p, "d0: 0F0 0B0\nd1: 1F0@3 1B0\n"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kF, 1, 0)], 3.0);
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kB, 0, 0)], 5.5);  // 1B0 ends at 5, + comm
  EXPECT_DOUBLE_EQ(r->makespan, 6.5);
  // A hold earlier than the dependencies changes nothing (F(1,0) is ready at 1.5).
  r = Simulate(p, FromText(p, "d0: 0F0 0B0\nd1: 1F0@1 1B0\n"));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->makespan, 5.0);
  Schedule bad = FromText(p, "d0: 0F0 0B0\nd1: 1F0 1B0\n");
  bad.release.assign(3, 1.0);
  EXPECT_EQ(Simulate(p, bad).status().code(), StatusCode::kInvalidArgument);
}

// Device 0 holds stages 0 and 2 and room for one activation. Replayed as soon
// as possible, the reload of stage 0 takes that room the moment its offload
// ends and starves F(2,0), which every backward waits for; held until B(2,0)
// has freed the room, it runs.
TEST(Simulator, AHeldReloadLeavesRoomForTheForward) {
  Problem p = MakeProblem(R"("devices": 2, "microbatches": 1, "stages_per_device": 2,
      "split_backward": false, "stage_time": {"f": 1, "b": 1}, "comm_time": 0.5,
      "offload_time": 1, "memory": {"activation": 1, "limit": [1, 2]})");
  const std::string compute = "d0: 0F0 2F0 2B0 0B0\nd1: 1F0 3F0 3B0 1B0\n";
  EXPECT_EQ(Simulate(p, FromText(p, compute + "l0: 0O0 0R0\nl1:\n")).status().code(),
            StatusCode::kInfeasible);
  StatusOr<SimResult> r = Simulate(p, FromText(p, compute + "l0: 0O0 0R0@8\nl1:\n"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const OpSpace sp = p.op_space();
  // F0 [0,1], O0 [1,2], F1 [1.5,2.5], F2 [3,4], F3 [4.5,5.5], B3 [5.5,6.5],
  // B2 [7,8], R0 [8,9], B1 [8.5,9.5], B0 [10,11].
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kF, 2, 0)], 3.0);
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kR, 0, 0)], 8.0);
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kB, 0, 0)], 10.0);
  EXPECT_DOUBLE_EQ(r->makespan, 11.0);
  EXPECT_DOUBLE_EQ(r->peak_memory[0], 1.0);
}

// The same problem with every time a tenth shorter: RoundedUp to a grain of
// 0.5 gives the problem above back (f = b = 1, comm 0.5, offload 1), and its
// schedule replays: as soon as possible the reload starves F(2,0) again, so
// Replay keeps its hold (and the others it cannot drop) and ends no later
// than there.
TEST(Simulator, ReplayKeepsTheHoldsItNeeds) {
  Problem p = MakeProblem(R"("devices": 2, "microbatches": 1, "stages_per_device": 2,
      "split_backward": false, "stage_time": {"f": 0.9, "b": 0.9}, "comm_time": 0.45,
      "offload_time": 0.9, "memory": {"activation": 1, "limit": [1, 2]})");
  const Problem q = RoundedUp(p, 0.5);
  EXPECT_EQ(q.f, std::vector<double>(4, 1.0));
  EXPECT_EQ(q.b, std::vector<double>(4, 1.0));
  EXPECT_EQ(q.comm, std::vector<double>(3, 0.5));
  EXPECT_EQ(*q.offload, std::vector<double>(4, 1.0));
  EXPECT_EQ(q.activation, p.activation);
  EXPECT_EQ(q.memory_limit, p.memory_limit);
  const std::string compute = "d0: 0F0 2F0 2B0 0B0\nd1: 1F0 3F0 3B0 1B0\n";
  EXPECT_EQ(Simulate(p, FromText(p, compute + "l0: 0O0 0R0\nl1:\n")).status().code(),
            StatusCode::kInfeasible);
  const Schedule s = FromText(q, compute + "l0: 0O0 0R0@8\nl1:\n");
  StatusOr<SimResult> there = Simulate(q, s);
  ASSERT_TRUE(there.ok()) << there.status().message();
  ASSERT_DOUBLE_EQ(there->makespan, 11.0);
  StatusOr<Schedule> replayed = Replay(p, s, there->start);
  ASSERT_TRUE(replayed.ok()) << replayed.status().message();
  EXPECT_GT(replayed->ReleaseOf(p.op_space().Index(OpType::kR, 0, 0)), 0.0);
  StatusOr<SimResult> here = Simulate(p, *replayed);
  ASSERT_TRUE(here.ok()) << here.status().message();
  EXPECT_TRUE(CheckSchedule(p, ToTimed(p, *replayed, *here)).valid());
  EXPECT_LE(here->makespan, 11.0);
}

// Memory rounded to a grain only ever adds to the memory in use.
TEST(Simulator, RoundedUpMemoryOnlyAddsToTheMemoryInUse) {
  Problem p = MakeProblem(R"("devices": 1, "microbatches": 1, "stage_time": {"f": 1, "b": 1,
      "w": 1}, "offload_time": 1, "memory": {"activation": 1.3, "freed_by_b": 0.6,
      "offloadable": 1.1, "static": 0.2, "limit": 2.9})");
  const Problem q = RoundedUp(p, 1, 0.25);
  EXPECT_EQ(q.activation, std::vector<double>{1.5});
  EXPECT_EQ(q.freed_by_b, std::vector<double>{0.5});
  EXPECT_EQ(q.offloadable, std::vector<double>{1.0});
  EXPECT_EQ(q.static_memory, std::vector<double>{0.25});
  EXPECT_EQ(*q.memory_limit, std::vector<double>{2.75});
  EXPECT_EQ(RoundedUp(p, 1).activation, p.activation);  // no memory grain: as it was
}

// Without memory to wait for, Replay drops every hold: two devices, one
// micro-batch, f = 0.95 and a fused backward of 1.9 (RoundedUp to 1 and 2,
// makespan 6) end at 2 * 0.95 + 2 * 1.9 = 5.7.
TEST(Simulator, ReplayRunsAsSoonAsPossibleWhereItCan) {
  Problem p = MakeProblem(R"("devices": 2, "microbatches": 1, "split_backward": false,
      "stage_time": {"f": 0.95, "b": 1.2, "w": 0.7})");
  const Problem q = RoundedUp(p, 1);
  EXPECT_EQ(q.b, std::vector<double>(2, 2.0));  // B and W together, then W = 0
  EXPECT_EQ(q.w, std::vector<double>(2, 0.0));
  const Schedule s = FromText(q, "d0: 0F0 0B0\nd1: 1F0 1B0\n");
  StatusOr<SimResult> there = Simulate(q, s);
  ASSERT_TRUE(there.ok());
  EXPECT_DOUBLE_EQ(there->makespan, 6.0);
  StatusOr<Schedule> replayed = Replay(p, s, there->start);
  ASSERT_TRUE(replayed.ok());
  EXPECT_TRUE(replayed->release.empty());
  EXPECT_NEAR(Simulate(p, *replayed)->makespan, 5.7, 1e-9);
}

// On random problems under memory limits, with offload: the list scheduler's
// schedule of RoundedUp(p, 0.5), in every other trial with its memory on a
// grain of 0.25, replays on p valid and no later.
TEST(Simulator, ReplayOfARoundedUpScheduleIsValidAndNoLater) {
  std::mt19937 rng(5);
  int replayed = 0;
  for (int trial = 0; trial < 30; ++trial) {
    Problem p = testing::RandomProblem(rng, 2 + trial % 3, 3 + trial % 5, 1 + trial % 2,
                                       trial % 3 != 0, true);
    LimitMemory(p, 1.5 + 0.5 * (trial % 3));
    const Problem q = RoundedUp(p, 0.5, trial % 2 ? 0.25 : 0.0);
    StatusOr<Schedule> s = BuildList(q);
    if (!s.ok()) continue;
    StatusOr<SimResult> there = Simulate(q, *s);
    ASSERT_TRUE(there.ok()) << there.status().message();
    StatusOr<Schedule> r = Replay(p, *s, there->start);
    ASSERT_TRUE(r.ok()) << r.status().message();
    StatusOr<SimResult> here = Simulate(p, *r);
    ASSERT_TRUE(here.ok()) << here.status().message();
    const CheckReport rep = CheckSchedule(p, ToTimed(p, *r, *here));
    EXPECT_TRUE(rep.valid()) << rep.errors.front();
    EXPECT_LE(here->objective, there->objective + 1e-9);
    ++replayed;
  }
  EXPECT_GE(replayed, 20);
}

TEST(Simulator, GPipeHoldsEveryActivation) {
  Problem p = UnitProblem(4, 8, true);
  StatusOr<SimResult> r = Simulate(p, *BuildGPipe(p));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->peak_memory, std::vector<double>(4, 8.0));
  // Forward wave (M + D - 1) then backward wave of B+W pairs (M + D - 1 more, 2 each).
  EXPECT_DOUBLE_EQ(r->makespan, 11 + 2 * 8 + 3);
}

TEST(Simulator, CommTimeDelaysCrossDeviceDependencies) {
  Problem p = MakeProblem(R"("devices": 2, "microbatches": 1, "split_backward": false,
      "stage_time": {"f": 1, "b": 1}, "comm_time": 0.5)");
  StatusOr<SimResult> r = Simulate(p, FromText(p, "d0: 0F0 0B0\nd1: 1F0 1B0\n"));
  ASSERT_TRUE(r.ok());
  const OpSpace sp = p.op_space();
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kF, 1, 0)], 1.5);
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kB, 0, 0)], 4.0);
  EXPECT_DOUBLE_EQ(r->makespan, 5.0);
  EXPECT_EQ(r->span, (std::vector<double>{5.0, 2.0}));
  EXPECT_DOUBLE_EQ(r->device_span, 5.0);
}

TEST(Simulator, NoCommBetweenStagesOfOneDevice) {
  Problem p = MakeProblem(R"("devices": 1, "microbatches": 1, "stages_per_device": 2,
      "split_backward": false, "stage_time": {"f": 1, "b": 1}, "comm_time": 7)");
  StatusOr<SimResult> r = Simulate(p, FromText(p, "d0: 0F0 1F0 1B0 0B0\n"));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->makespan, 4.0);
}

// An F that does not fit waits for the offload already running to free memory;
// the reload waits for the B that frees the other activation.
TEST(Simulator, AllocationWaitsForFreesInFlight) {
  Problem p = MakeProblem(R"("devices": 1, "microbatches": 2, "split_backward": false,
      "stage_time": {"f": 1, "b": 1}, "offload_time": 0.5,
      "memory": {"activation": 1, "limit": 1})");
  StatusOr<SimResult> r = Simulate(p, FromText(p, "d0: 0F0 0F1 0B1 0B0\nl0: 0O0 0R0\n"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const OpSpace sp = p.op_space();
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kO, 0, 0)], 1.0);
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kF, 0, 1)], 1.5);  // after O frees at 1.5
  EXPECT_DOUBLE_EQ(r->start[sp.Index(OpType::kR, 0, 0)], 3.5);  // after B1 frees at 3.5
  EXPECT_DOUBLE_EQ(r->makespan, 5.0);
  EXPECT_EQ(r->peak_memory, std::vector<double>{1.0});
}

TEST(Simulator, MemoryThatNeverFitsIsInfeasibleAndSaysWhere) {
  Problem p = MakeProblem(R"("devices": 1, "microbatches": 2, "split_backward": false,
      "stage_time": {"f": 1, "b": 1}, "memory": {"activation": 1, "static": 2, "limit": 3})");
  StatusOr<SimResult> r = Simulate(p, FromText(p, "d0: 0F0 0F1 0B0 0B1\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInfeasible);
  const std::string& m = r.status().message();
  for (const char* part : {"0F1", "device 0", "t=1", "3 in use", "limit 3"}) {
    EXPECT_NE(m.find(part), std::string::npos) << m;
  }
  // The same order fits one more unit.
  p.memory_limit = std::vector<double>{4.0};
  EXPECT_TRUE(Simulate(p, FromText(p, "d0: 0F0 0F1 0B0 0B1\n")).ok());
}

TEST(Simulator, OrdersThatWaitOnEachOtherDeadlock) {
  Problem p = UnitProblem(2, 1, false);
  StatusOr<SimResult> r = Simulate(p, FromText(p, "d0: 0B0 0F0\nd1: 1F0 1B0\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInfeasible);
  EXPECT_NE(r.status().message().find("deadlock"), std::string::npos);
  EXPECT_NE(r.status().message().find("0B0"), std::string::npos);
}

// Two devices on one host link: their copies run one at a time.
TEST(Simulator, SharedHostLinkSerialisesCopies) {
  const std::string body = R"("devices": 2, "microbatches": 1, "split_backward": false,
      "stage_time": {"f": 1, "b": 1}, "offload_time": 2, "memory": {"activation": 1})";
  Problem shared = MakeProblem(body + R"(, "host_links": [[0, 1]])");
  StatusOr<SimResult> r =
      Simulate(shared, FromText(shared, "d0: 0F0 0B0\nd1: 1F0 1B0\nl0: 0O0 1O0 1R0 0R0\n"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->makespan, 10.0);
  Problem separate = MakeProblem(body);
  r = Simulate(separate,
               FromText(separate, "d0: 0F0 0B0\nd1: 1F0 1B0\nl0: 0O0 0R0\nl1: 1O0 1R0\n"));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->makespan, 8.0);
}

TEST(Simulator, RejectsMalformedSchedules) {
  Problem p = UnitProblem(2, 1, true);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"d0: 0F0 0B0\nd1: 1F0 1B0 1W0\n", "0W0 is missing"},
      {"d0: 0F0 0B0 0W0 0W0\nd1: 1F0 1B0 1W0\n", "appears twice"},
      {"d0: 0F0 0B0 0W0 1F0\nd1: 1B0 1W0\n", "belongs to device 1"},
  };
  for (const auto& [text, want] : cases) {
    StatusOr<SimResult> r = Simulate(p, FromText(p, text));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  // An op of no stage or micro-batch of the problem (the text reader refuses it).
  Schedule outside = FromText(p, "d0: 0F0 0B0 0W0\nd1: 1F0 1B0 1W0\n");
  outside.compute[0].push_back({OpType::kF, 0, 3});
  StatusOr<SimResult> r = Simulate(p, outside);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside"), std::string::npos) << r.status().message();
  Schedule offload = FromText(p, "d0: 0F0 0B0 0W0\nd1: 1F0 1B0 1W0\n");
  offload.copy[0].push_back({OpType::kO, 0, 0});
  EXPECT_NE(Simulate(p, offload).status().message().find("allows no offload"), std::string::npos);
}

// The simulator and the independent checker agree on random problems and orders.
TEST(Simulator, AgreesWithCheckerOnRandomProblems) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int D = 1 + trial % 5, M = 1 + trial % 7, v = 1 + trial % 2;
    Problem p = testing::RandomProblem(rng, D, M, v, trial % 3 != 0, true);
    Schedule s = *BuildGPipe(p);
    // Offload every other activation, copies in forward order on each link.
    const std::vector<int> link = LinkOfDevice(p);
    for (int st = 0; st < p.stages(); ++st) {
      for (int m = 0; m < M; m += 2)
        s.copy[link[p.stage_device[st]]].push_back({OpType::kO, st, m});
    }
    for (int st = p.stages() - 1; st >= 0; --st) {
      for (int m = 0; m < M; m += 2)
        s.copy[link[p.stage_device[st]]].push_back({OpType::kR, st, m});
    }
    StatusOr<SimResult> r = Simulate(p, s);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const CheckReport rep = CheckSchedule(p, ToTimed(p, s, *r));
    EXPECT_TRUE(rep.valid()) << rep.errors.front();
    EXPECT_NEAR(rep.makespan, r->makespan, 1e-9);
    EXPECT_NEAR(rep.device_span, r->device_span, 1e-9);
    for (int d = 0; d < D; ++d) EXPECT_NEAR(rep.peak_memory[d], r->peak_memory[d], 1e-9);
  }
}

// RunChanged resumes from the first place a schedule differs from the one
// simulated before: on chains of random changes (neighbouring ops swapped on
// a device or a link, holds set or dropped, activations offloaded or kept) it
// gives Run's times, spans and objective, and fails where Run fails.
TEST(Simulator, RunChangedGivesRunsTimes) {
  std::mt19937 rng(21);
  int compared = 0, failed = 0;
  for (int trial = 0; trial < 30; ++trial) {
    Problem p = testing::RandomProblem(rng, 2 + trial % 4, 3 + trial % 6, 1 + trial % 2,
                                       trial % 3 != 0, true);
    LimitMemory(p, 1.5 + 0.5 * (trial % 3));
    StatusOr<Schedule> start = BuildList(p);
    if (!start.ok()) continue;
    Schedule base = *start;
    Simulator sim(p);
    StatusOr<SimResult> base_run = sim.Run(base);
    ASSERT_TRUE(base_run.ok()) << base_run.status().message();
    const std::vector<int> link = LinkOfDevice(p);
    const OpSpace sp = p.op_space();
    const auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
    for (int step = 0; step < 40; ++step) {
      Schedule next = base;
      switch (pick(4)) {
        case 0: {  // neighbours on a device
          auto& lane = next.compute[pick(p.devices)];
          const int k = pick(static_cast<int>(lane.size()) - 1);
          std::swap(lane[k], lane[k + 1]);
          break;
        }
        case 1: {  // neighbours on a link
          auto& lane = next.copy[pick(static_cast<int>(next.copy.size()))];
          if (lane.size() < 2) continue;
          const int k = pick(static_cast<int>(lane.size()) - 1);
          std::swap(lane[k], lane[k + 1]);
          break;
        }
        case 2: {  // a hold set or dropped
          next.release.resize(sp.size(), 0.0);
          const int i = pick(sp.size());
          next.release[i] = pick(2) ? 0.0 : base_run->makespan * pick(100) / 100.0;
          break;
        }
        default: {  // an activation offloaded or kept
          const int st = pick(p.stages() - 1), m = pick(p.microbatches);
          auto& lane = next.copy[link[p.stage_device[st]]];
          const Op o{OpType::kO, st, m}, r{OpType::kR, st, m};
          if (const auto it = std::find(lane.begin(), lane.end(), o); it != lane.end()) {
            lane.erase(it);
            lane.erase(std::find(lane.begin(), lane.end(), r));
          } else {
            const int a = pick(static_cast<int>(lane.size()) + 1);
            lane.insert(lane.begin() + a, o);
            lane.insert(lane.begin() + a + 1 + pick(static_cast<int>(lane.size()) - a), r);
          }
        }
      }
      const StatusOr<SimResult> full = sim.Run(next);
      const StatusOr<SimResult> resumed = sim.RunChanged(next, base, *base_run);
      ASSERT_EQ(full.ok(), resumed.ok()) << ToText(p, next);
      if (!full.ok()) {
        EXPECT_EQ(full.status().code(), resumed.status().code());
        ++failed;
        continue;
      }
      for (int i = 0; i < sp.size(); ++i) {
        if (std::isnan(full->start[i])) {
          EXPECT_TRUE(std::isnan(resumed->start[i]));
          continue;
        }
        ASSERT_EQ(full->start[i], resumed->start[i]) << ToString(sp.At(i)) << "\n"
                                                     << ToText(p, next);
        ASSERT_EQ(full->end[i], resumed->end[i]);
      }
      EXPECT_EQ(full->objective, resumed->objective);
      EXPECT_EQ(full->span, resumed->span);
      for (int d = 0; d < p.devices; ++d) EXPECT_NEAR(full->busy[d], resumed->busy[d], 1e-9);
      ++compared;
      base = std::move(next);
      base_run = full;
    }
  }
  EXPECT_GE(compared, 400);
  EXPECT_GE(failed, 20);
}

}  // namespace
}  // namespace optpipe
