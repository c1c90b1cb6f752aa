#include "heuristics/list_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/checker.h"
#include "core/lower_bound.h"
#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

SimResult Timed(const Problem& p, const Schedule& s) {
  StatusOr<SimResult> r = Simulate(p, s);
  EXPECT_TRUE(r.ok()) << r.status().message();
  const CheckReport rep = CheckSchedule(p, ToTimed(p, s, *r));
  EXPECT_TRUE(rep.valid()) << rep.errors.front();
  return *r;
}

// On unit costs the lazy-W list schedule is ZB-H1-like: it meets the lower
// bound (D - 1) + 3M, which is therefore optimal; fused it is 1F1B's 33.
TEST(ListScheduler, MeetsTheBoundOnUnitCosts) {
  for (auto [D, M] : {std::pair{4, 8}, {8, 16}, {2, 4}}) {
    Problem split = testing::UnitProblem(D, M, true);
    StatusOr<Schedule> s = ListSchedule(split, ListOptions{});
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_DOUBLE_EQ(Timed(split, *s).makespan, (D - 1) + 3.0 * M);
    Problem fused = testing::UnitProblem(D, M, false);
    s = ListSchedule(fused, ListOptions{});
    ASSERT_TRUE(s.ok());
    EXPECT_DOUBLE_EQ(Timed(fused, *s).makespan, 3.0 * (M + D - 1));
  }
}

// Eager W with 1F1B warm-up reproduces 1F1B's order exactly.
TEST(ListScheduler, EagerWIsOneFOneB) {
  Problem p = testing::UnitProblem(4, 8, true);
  ListOptions opt;
  opt.eager_w = true;
  StatusOr<Schedule> s = ListSchedule(p, opt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->compute, BuildOneFOneB(p)->compute);
}

TEST(ListScheduler, WarmupDepthBoundsActivationsInFlight) {
  Problem p = testing::UnitProblem(4, 8, false);
  for (double scale : {0.5, 1.0, 2.0}) {
    ListOptions opt;
    opt.warmup_scale = scale;
    StatusOr<Schedule> s = ListSchedule(p, opt);
    ASSERT_TRUE(s.ok());
    const SimResult r = Timed(p, *s);
    // Stage 0's depth is round(scale * 4), its activation is 1.
    EXPECT_LE(r.peak_memory[0], std::max(1.0, std::round(scale * 4)) + 1e-9) << scale;
  }
}

// Under a limit that 1F1B cannot meet, the list scheduler offloads long-lived
// activations and fits; without offload the same limit only fits a shallower
// warm-up.
TEST(ListScheduler, OffloadsToFitTheLlamaCase) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath("llama-8dev-offload"));
  ASSERT_TRUE(p.ok());
  StatusOr<Schedule> s = BuildList(*p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const SimResult r = Timed(*p, *s);
  std::size_t copies = 0;
  for (const auto& lane : s->copy) copies += lane.size();
  EXPECT_GT(copies, 0u);
  for (int d = 0; d < p->devices; ++d) EXPECT_LE(r.peak_memory[d], 42.0 + 1e-9);
  EXPECT_LE(r.makespan, 1.05 * ComputeLowerBound(*p).value);
}

// Two chunks per device, room for two or three activations, a round trip of 4
// per 3 compute. Without offload, device 0's activations of stage 0 live at
// least f + (15 stages forward and back: 45) + b = 48 each, those of stage 8
// at least 1 + 21 + 2 = 24: 16 x (48 + 24) / room is a lower bound on any
// schedule that keeps everything. Every offloading setting runs as the list
// scheduled it (reloads held to their turn, leaving room for the forwards
// their backward waits for) and the best beats that bound.
TEST(ListScheduler, OffloadsTwoChunksThroughTightMemory) {
  for (int room : {2, 3}) {
    Problem p = testing::MakeProblem(
        R"("devices": 8, "microbatches": 16, "stages_per_device": 2, "split_backward": false,
           "stage_time": {"f": 1, "b": 2}, "offload_time": 2, "memory": {"activation": 1,
           "limit": )" +
        std::to_string(room) + "}");
    const std::vector<double> chain = ForwardToBackward(p);
    int offloading = 0;
    for (const ListOptions& o : ListOptionGrid(p)) {
      if (!o.offload) continue;
      StatusOr<Schedule> s = ListSchedule(p, o);
      // Keeping activations on a device this tight may leave too little room (the list says so).
      if (o.keep_every > 0 && s.status().code() == StatusCode::kInfeasible) continue;
      ASSERT_TRUE(s.ok()) << "room " << room << ": " << s.status().message();
      std::size_t copies = 0;
      for (const auto& lane : s->copy) copies += lane.size();
      offloading += copies > 0;
      const SimResult r = Timed(p, *s);
      for (double peak : r.peak_memory) EXPECT_LE(peak, room);
      // A reload ends no earlier than its backward can start: F(s,m)'s end
      // plus the way through the later stages and back (else it only holds
      // room the forwards need; reloading micro-batch 0 as soon as it was
      // offloaded doubled these makespans).
      const OpSpace sp = p.op_space();
      for (const auto& lane : s->copy) {
        for (const Op& op : lane) {
          if (op.type != OpType::kR) continue;
          const int f = sp.Index(OpType::kF, op.stage, op.microbatch);
          EXPECT_GE(r.end[sp.Index(op)], r.end[f] + chain[op.stage] - 1e-9)
              << "room " << room << ": " << ToString(op);
        }
      }
    }
    EXPECT_GE(offloading, 8);
    StatusOr<Schedule> best = BuildList(p);
    ASSERT_TRUE(best.ok()) << best.status().message();
    EXPECT_LT(Timed(p, *best).makespan, 2 * ComputeLowerBound(p).value) << "room " << room;
  }
}

// Room for one whole activation and one half waiting for its W: kept, the
// activations of stage 0 live one after another, each F0..F3 B3..B0 = 8, so
// any schedule that keeps everything needs 8 x 8 = 64. A round trip of 1 hides
// behind that life: the forwards that go to the host as they end leave room
// for the next one, and the list schedule is less than half as long.
TEST(ListScheduler, OffloadsWhenOneWholeActivationFits) {
  Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 8, "split_backward": true, "stage_time": {"f": 1,
         "b": 1, "w": 1}, "offload_time": 0.5, "memory": {"activation": 1, "freed_by_b": 0.5,
         "limit": 1.5})");
  StatusOr<Schedule> s = BuildList(p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const SimResult r = Timed(p, *s);
  EXPECT_LT(r.makespan, 64.0 / 2);
  for (double peak : r.peak_memory) EXPECT_LE(peak, 1.5);
}

// Room for 5 activations, a round trip of 4 per 3 compute: offloading every
// activation that could go queues them on the link; keeping one micro-batch in
// a few on the device meets the lower bound (so the schedule is optimal).
TEST(ListScheduler, KeepsSomeActivationsWhenTheLinkCannotCarryAll) {
  Problem p = testing::MakeProblem(
      R"("devices": 8, "microbatches": 16, "split_backward": false, "stage_time": {"f": 1,
         "b": 2}, "offload_time": 2, "memory": {"activation": 1, "limit": 5})");
  StatusOr<Schedule> s = BuildList(p);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_NEAR(Timed(p, *s).makespan, ComputeLowerBound(p).value, 1e-9);
}

// The activations a schedule sends to the host, as stage * M + micro-batch.
std::vector<int> Offloaded(const Problem& p, const Schedule& s) {
  std::vector<int> out;
  for (const std::vector<Op>& link : s.copy) {
    for (const Op& op : link) {
      if (op.type == OpType::kO) out.push_back(op.stage * p.microbatches + op.microbatch);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Explicit choices are keep_every's rule spelled out: the same schedule; an
// activation marked kKeep never goes to the host, one marked kSend does.
TEST(ListScheduler, KeepsTheActivationsItIsTold) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 8, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 3})");
  ListOptions every;
  every.offload_warmup = true;
  every.keep_every = 3;
  ListOptions mask = every;
  mask.keep_every = 0;
  mask.choice = Choices(p, every);
  ASSERT_EQ(mask.choice.size(), 4u * 8u);
  EXPECT_EQ(std::count(mask.choice.begin(), mask.choice.end(), ListOptions::kKeep),
            4 * 2);  // micro-batches 2 and 5
  const StatusOr<Schedule> a = ListSchedule(p, every), b = ListSchedule(p, mask);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ToText(p, *a), ToText(p, *b));

  ListOptions all = every;
  all.keep_every = 0;
  const StatusOr<Schedule> base = ListSchedule(p, all);
  ASSERT_TRUE(base.ok()) << base.status().message();
  const std::vector<int> sent = Offloaded(p, *base);
  ASSERT_GE(sent.size(), 2u);
  all.choice.assign(4 * 8, ListOptions::kByRule);
  all.choice[sent.front()] = all.choice[sent.back()] = ListOptions::kKeep;
  const StatusOr<Schedule> kept = ListSchedule(p, all);
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  Timed(p, *kept);
  const std::vector<int> now = Offloaded(p, *kept);
  EXPECT_EQ(std::count(now.begin(), now.end(), sent.front()), 0);
  EXPECT_EQ(std::count(now.begin(), now.end(), sent.back()), 0);
  EXPECT_FALSE(now.empty());

  // Under the other offload rule (backwards ahead must hide the round trip)
  // the warm-up keeps stage 0's first activation; sent, it goes to the host.
  ListOptions rule;
  rule.choice.assign(4 * 8, ListOptions::kByRule);
  const StatusOr<Schedule> ahead = ListSchedule(p, rule);
  ASSERT_TRUE(ahead.ok()) << ahead.status().message();
  const std::vector<int> before = Offloaded(p, *ahead);
  ASSERT_EQ(std::count(before.begin(), before.end(), 0), 0);
  rule.choice[0] = ListOptions::kSend;
  const StatusOr<Schedule> send = ListSchedule(p, rule);
  ASSERT_TRUE(send.ok()) << send.status().message();
  Timed(p, *send);
  const std::vector<int> after = Offloaded(p, *send);
  EXPECT_EQ(std::count(after.begin(), after.end(), 0), 1);
}

// Whether some reload on a link starts while an offload of that link is ready
// (its forward ended) and waits: what offload_first rules out.
bool ReloadPassesAReadyOffload(const Problem& p, const Schedule& s, const SimResult& r) {
  const OpSpace sp(p.stages(), p.microbatches);
  for (const std::vector<Op>& link : s.copy) {
    for (const Op& x : link) {
      if (x.type != OpType::kR) continue;
      const double t = r.start[sp.Index(x)];
      for (const Op& y : link) {
        if (y.type != OpType::kO) continue;
        const double ready = r.end[sp.Index(OpType::kF, y.stage, y.microbatch)];
        if (ready < t && r.start[sp.Index(y)] > t) return true;
      }
    }
  }
  return false;
}

// Room for 3 activations, a round trip of 4 per 3 compute: the link is
// contended. By default a due reload goes before a ready offload (a backward
// waits for it), which happens here; offload_first turns that around. Both
// are valid schedules.
TEST(ListScheduler, OffloadFirstLetsReadyOffloadsPassDueReloads) {
  const Problem p = testing::MakeProblem(
      R"("devices": 8, "microbatches": 16, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 3})");
  ListOptions o;
  o.offload_warmup = true;
  for (bool first : {false, true}) {
    o.offload_first = first;
    const StatusOr<Schedule> s = ListSchedule(p, o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_GE(Offloaded(p, *s).size(), 16u);
    EXPECT_EQ(ReloadPassesAReadyOffload(p, *s, Timed(p, *s)), !first);
  }
}

// Room for two activations, a round trip (2 + 2) longer than a micro-batch's
// forward and backward on a stage (1 + 2): breadth first, device 0 runs its
// forwards stage by stage, then its backwards later stage first, each one's
// reload started while the backward before it runs (a look-ahead of one
// backward of the device), so only the first backward can wait for its copy.
TEST(ListScheduler, BreadthFirstRunsForwardsThenBackwardsWithReloadsAhead) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 4, "stages_per_device": 2, "split_backward": false,
         "stage_time": {"f": 1, "b": 2}, "offload_time": 2, "memory": {"activation": 1,
         "limit": 2})");
  ListOptions o;
  o.breadth_first = true;
  o.offload_warmup = true;
  o.warmup_depth.assign(p.stages(), p.microbatches);
  EXPECT_EQ(Describe(p, o), "breadth first, offload, look-ahead 1, in warm-up");
  const StatusOr<Schedule> s = ListSchedule(p, o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const SimResult r = Timed(p, *s);
  for (double peak : r.peak_memory) EXPECT_LE(peak, 2);
  std::vector<Op> expected;
  for (int stage : {0, 4}) {
    for (int m = 0; m < 4; ++m) expected.push_back({OpType::kF, stage, m});
  }
  for (int stage : {4, 0}) {
    for (int m = 0; m < 4; ++m) expected.push_back({OpType::kB, stage, m});
  }
  EXPECT_EQ(s->compute[0], expected);
  const OpSpace sp = p.op_space();
  for (std::size_t k = 9; k < expected.size(); ++k) {
    const Op b = expected[k];
    const int reload = sp.Index(OpType::kR, b.stage, b.microbatch);
    ASSERT_FALSE(std::isnan(r.start[reload])) << ToString(b) << " was not offloaded";
    EXPECT_LE(r.start[reload], r.start[sp.Index(expected[k - 1])] + 1e-9) << ToString(b);
  }
  // The default (1F1B-like warm-up, backwards first) interleaves them.
  EXPECT_EQ(Describe(p, ListOptions{}), "1F1B-like, warm-up x1, offload, look-ahead 1");
  const StatusOr<Schedule> one = ListSchedule(p, ListOptions{});
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_NE(one->compute[0], expected);
}

// An express micro-batch runs its chain F(0)..F(S-1), B(S-1)..B(0) without a
// wait: on unit costs B(0) ends 2S after F(0) starts. Without express lanes
// 1F1B's steady state makes the later micro-batches wait for backwards.
TEST(ListScheduler, ExpressMicrobatchesRunTheirChainWithoutWaiting) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 8, "stage_time": {"f": 1, "b": 1, "w": 1},
         "memory": {"activation": 1}, "offload_time": 2)");
  const OpSpace sp = p.op_space();
  const auto trip = [&](const SimResult& r, int m) {
    return r.end[sp.Index(OpType::kB, 0, m)] - r.start[sp.Index(OpType::kF, 0, m)];
  };
  ListOptions o;
  o.eager_w = true;
  o.keep_every = 2;
  const StatusOr<Schedule> plain = ListSchedule(p, o);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  const SimResult slow = Timed(p, *plain);
  EXPECT_GT(trip(slow, 5), 8);
  o.express = true;
  EXPECT_EQ(Describe(p, o), "1F1B-like, warm-up x1, eager W, express 1 in 2");
  SimResult mine;
  const StatusOr<Schedule> s = ListSchedule(p, o, &mine);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const SimResult r = Timed(p, *s);
  for (int m = 1; m < 8; m += 2) EXPECT_EQ(trip(r, m), 8) << "micro-batch " << m;
  for (std::size_t i = 0; i < r.start.size(); ++i) {
    if (std::isnan(r.start[i])) continue;
    EXPECT_EQ(mine.start[i], r.start[i]) << ToString(sp.At(i));
  }
}

TEST(ListScheduler, RandomProblemsWithLimitsAreValidOrInfeasible) {
  std::mt19937 rng(5);
  int valid = 0;
  for (int trial = 0; trial < 60; ++trial) {
    std::uniform_int_distribution<int> dev(1, 8), mb(1, 32), v(1, 3);
    Problem p =
        testing::RandomProblem(rng, dev(rng), mb(rng), v(rng), trial % 2 == 0, trial % 3 != 0);
    if (trial % 4 == 0)
      p.placement = "vshape",
      p.stage_device = *PlaceStages("vshape", p.devices, p.stages_per_device);
    if (trial % 5 != 0) {  // a limit between one activation per stage and 1F1B's need
      p.memory_limit.emplace();
      for (int d = 0; d < p.devices; ++d) {
        double one = 0;
        for (int s = 0; s < p.stages(); ++s) {
          if (p.stage_device[s] == d) one += p.activation[s];
        }
        p.memory_limit->push_back(p.static_memory[d] + one * (1.5 + trial % 4));
      }
    }
    StatusOr<Schedule> s = BuildList(p);
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), StatusCode::kInfeasible) << s.status().message();
      continue;
    }
    const SimResult r = Timed(p, *s);
    EXPECT_GE(r.objective, ComputeLowerBound(p).value - 1e-9);
    ++valid;
  }
  EXPECT_GE(valid, 50);
}

// The times the scheduler reports are the simulator's replay of its schedule,
// op for op (with the holds it sets), and so are the summary and the peak
// memory: random problems with and without limits, one and more chunks, V
// placement, every setting of the grid (offloading ones also with offloads
// first on the link).
TEST(ListScheduler, ReportsTheTimesTheSimulatorReplays) {
  std::mt19937 rng(13);
  int compared = 0;
  for (int trial = 0; trial < 24; ++trial) {
    Problem p = testing::RandomProblem(rng, 2 + trial % 5, 4 + trial % 9, 1 + trial % 2,
                                       trial % 3 != 0, trial % 2 == 0);
    if (trial % 4 == 1)
      p.placement = "vshape",
      p.stage_device = *PlaceStages("vshape", p.devices, p.stages_per_device);
    if (trial % 6 != 5) {  // room for 1.5 to 3 activations per stage
      p.memory_limit.emplace();
      for (int d = 0; d < p.devices; ++d) {
        double one = 0;
        for (int s = 0; s < p.stages(); ++s) one += p.stage_device[s] == d ? p.activation[s] : 0;
        p.memory_limit->push_back(p.static_memory[d] + one * (1.5 + 0.5 * (trial % 4)));
      }
    }
    std::vector<ListOptions> settings = ListOptionGrid(p);
    for (ListOptions o : ListOptionGrid(p)) {  // and with the link's other priority
      o.offload_first = true;
      if (o.offload) settings.push_back(o);
    }
    for (const ListOptions& o : settings) {
      SimResult mine;
      StatusOr<Schedule> s = ListSchedule(p, o, &mine);
      if (!s.ok()) continue;
      const SimResult sim = Timed(p, *s);
      ASSERT_EQ(mine.start.size(), sim.start.size());
      for (std::size_t i = 0; i < sim.start.size(); ++i) {
        if (std::isnan(sim.start[i])) {
          EXPECT_TRUE(std::isnan(mine.start[i]));
          continue;
        }
        EXPECT_NEAR(mine.start[i], sim.start[i], 1e-9) << ToJson(p);
        EXPECT_NEAR(mine.end[i], sim.end[i], 1e-9);
      }
      EXPECT_NEAR(mine.objective, sim.objective, 1e-9);
      EXPECT_NEAR(mine.makespan, sim.makespan, 1e-9);
      EXPECT_EQ(mine.span.size(), sim.span.size());
      for (std::size_t d = 0; d < sim.span.size(); ++d) {
        EXPECT_NEAR(mine.span[d], sim.span[d], 1e-9);
        EXPECT_NEAR(mine.peak_memory[d], sim.peak_memory[d], 1e-9);
        EXPECT_NEAR(mine.busy[d], sim.busy[d], 1e-9);
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 200);
}

// Two devices with two chunks each, one micro-batch: device 1 has room for
// 2 and its activations weigh 1 and 1.5, so the first goes to the host
// before the second's forward, although its round trip (6) is longer than
// the rest of its micro-batch's way to its backward (the offload rule's test
// of a trip worth taking). The settings that send every activation fit;
// the others stall. Brute force: 17.5.
TEST(ListScheduler, OffloadsWhereOnlyAnOffloadFits) {
  const Problem p = testing::MakeProblem(
      R"("devices": 2, "microbatches": 1, "stages_per_device": 2,
         "stage_time": {"f": [2, 1.75, 0.5, 0.75], "b": [1.75, 2, 0.5, 1.75],
                        "w": [1.5, 2, 0.5, 1.5]},
         "offload_time": [3.5, 3, 1.25, 1.5],
         "memory": {"activation": [2, 1, 2.25, 1.5], "freed_by_b": [1, 0.5, 1.125, 0.75],
                    "static": 1, "limit": [5.25, 3]})");
  ASSERT_NEAR(testing::BruteForceOptimum(p, true), 17.5, 1e-9);
  StatusOr<Solution> s = RunMethod(p, "list");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_NEAR(s->sim.objective, 17.5, 1e-9);
  EXPECT_FALSE(s->schedule.copy[1].empty());
}

TEST(ListScheduler, IsDeterministic) {
  std::mt19937 rng(9);
  Problem p = testing::RandomProblem(rng, 6, 20, 2, true, true);
  EXPECT_EQ(ToText(p, *BuildList(p)), ToText(p, *BuildList(p)));
}

}  // namespace
}  // namespace optpipe
