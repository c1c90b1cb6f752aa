#include "exact/device_search_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include "core/lower_bound.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

// The makespan of a schedule in text form; NaN (after a test failure) when it
// does not parse or simulate.
double Makespan(const Problem& p, const std::string& text) {
  StatusOr<Schedule> s = ParseScheduleText(p, text);
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return std::numeric_limits<double>::quiet_NaN();
  StatusOr<SimResult> r = Simulate(p, *s);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->makespan : std::numeric_limits<double>::quiet_NaN();
}

// Under random tight limits, with and without offload, split and fused, one
// link per device and one shared: the search bound never exceeds the
// brute-force optimum, and it is above the core bound on a good share of them.
// (A shared link with a split backward twice only: its brute force takes
// seconds.)
TEST(DeviceSearchBound, NeverAboveTheBruteForceOptimum) {
  std::mt19937 rng(23);
  int above_core = 0, tight = 0, tried = 0;
  for (int trial = 0; trial < 48; ++trial) {
    const bool offload = trial % 2 == 1;
    const bool split = trial % 3 != 0;
    const int devices = trial % 8 == 6 ? 3 : 2;
    const int m = offload || devices == 3 || split ? 2 : 3;
    Problem p = testing::RandomProblem(rng, devices, m, 1, split, offload);
    if (trial % 4 == 3 && devices == 2 && (!split || trial % 16 == 7)) p.host_links = {{0, 1}};
    p.memory_limit = p.static_memory;
    for (int d = 0; d < devices; ++d)  // rooms for 1 to 1.75 activations
      (*p.memory_limit)[d] += p.activation[d] * (1.0 + 0.25 * ((trial / 2) % 4));
    const double opt = testing::BruteForceOptimum(p, offload);
    if (opt == std::numeric_limits<double>::infinity()) continue;
    ++tried;
    const DeviceSearchBound sb = ComputeDeviceSearchBound(p);
    EXPECT_LE(sb.value, opt + 1e-9) << ToJson(p);
    above_core += sb.value > ComputeLowerBound(p).value + 1e-6;
    tight += sb.value >= opt - 1e-6;
  }
  EXPECT_GE(tried, 40);
  EXPECT_GE(above_core, 8);
  EXPECT_GE(tight, 16);
}

// Devices holding two stages (interleaved and V placement) under limits with
// room for 3/4 to 5/4 of one micro-batch's activations of the device, small
// enough for brute force: two devices and one micro-batch, with and without
// offload, or one device and two micro-batches, fused, without. The search bound never exceeds the
// optimum, and it is above the core bound on some.
TEST(DeviceSearchBound, TwoStagesADeviceNeverAboveTheBruteForceOptimum) {
  std::mt19937 rng(31);
  int above_core = 0, tried = 0;
  for (int trial = 0; trial < 48; ++trial) {
    const bool wide = trial % 4 != 3;
    const bool offload = wide && trial % 2 == 1;
    const bool split = wide && trial % 8 < 4;
    const int devices = wide ? 2 : 1;
    Problem p = testing::RandomProblem(rng, devices, wide ? 1 : 2, 2, split, offload);
    if (trial % 3 == 0) p.stage_device = *PlaceStages("vshape", devices, 2);
    p.memory_limit = p.static_memory;
    for (int s = 0; s < p.stages(); ++s)
      (*p.memory_limit)[p.stage_device[s]] += p.activation[s] * (0.75 + 0.25 * (trial % 3));
    const double opt = testing::BruteForceOptimum(p, offload);
    if (opt == std::numeric_limits<double>::infinity()) continue;
    ++tried;
    const DeviceSearchBound sb = ComputeDeviceSearchBound(p);
    EXPECT_LE(sb.value, opt + 1e-9) << ToJson(p);
    EXPECT_GT(sb.device_value[0], 0) << ToJson(p);
    above_core += sb.value > ComputeLowerBound(p).value + 1e-6;
  }
  EXPECT_GE(tried, 30);
  EXPECT_GE(above_core, 6);
}

// By hand: two devices, unit costs, split, the activation (1, half of it
// freed by B) on stage 0 only, room for one. Without offload, F(0,1) waits
// for W(0,0) (0.5 + 1 does not fit): F00 B10... B00 at 3, W00 ends 5, and
// micro-batch 1 the same from 5: 10. The memory-time bound weighs the whole
// life 4 and half the W, 2 x 4.5 = 9. With offload 0.5 both activations go to
// the host (F00 O00 F01 O01, then R00 B00 W00 R01 B01 W01 from 3): 8.
TEST(DeviceSearchBound, RoomForOneActivationByHand) {
  const auto make = [](bool offload) {
    std::string json =
        R"("devices": 2, "microbatches": 2, "split_backward": true,
           "stage_time": {"f": 1, "b": 1, "w": 1}, "memory": {"activation": [1, 0],
           "freed_by_b": [0.5, 0], "static": 0, "limit": [1, 1]})";
    if (offload) json += R"(, "offload_time": 0.5)";
    return testing::MakeProblem(json);
  };
  const Problem kept = make(false), off = make(true);
  EXPECT_NEAR(ComputeLowerBound(kept).value, 9, 1e-6);
  EXPECT_NEAR(ComputeDeviceSearchBound(kept).value, 10, 1e-9);
  EXPECT_NEAR(testing::BruteForceOptimum(kept, false), 10, 1e-9);
  EXPECT_LT(ComputeLowerBound(off).value, 8 - 0.1);
  EXPECT_NEAR(ComputeDeviceSearchBound(off).value, 8, 1e-9);
  EXPECT_NEAR(testing::BruteForceOptimum(off, true), 8, 1e-9);
  const DeviceSearchBound sb = ComputeDeviceSearchBound(off);
  ASSERT_EQ(sb.device_value.size(), 2u);
  EXPECT_NEAR(sb.device_value[1], 1 + 6, 1e-9);  // device 1 alone: its head and its work
}

// By hand: two devices, F 1 and fused B 2, room for one activation on
// device 0 only, three micro-batches, offloads of 1. Kept, an activation
// lives from F(0,m)'s start through F(1,m) and B(1,m) to B(0,m)'s end, at
// least 6; offloaded, it is resident only from F's start to O's end and from
// R's start to B's end, at least 5. One at a time: at least 15, the optimum
// (F O for each micro-batch in turn, then R B for each). The root of the
// search bounds it so already (a budget of one node, no pairs), where its
// release times, work and chains alone let the forwards run 2 apart. With
// room for one and a half activations two still never fit at once, which
// the memory-time of the room alone (1.5 activations at a time) misses; in
// whole activations, at most one at a time, the root proves 15 again.
TEST(DeviceSearchBound, MemoryTimeBoundsEveryNode) {
  for (const char* limit : {"1", "1.5"}) {
    const Problem p = testing::MakeProblem(
        std::string(R"("devices": 2, "microbatches": 3, "split_backward": false,
           "stage_time": {"f": 1, "b": 2, "w": 0}, "offload_time": 1,
           "memory": {"activation": [1, 0], "limit": [)") +
        limit + ", 10]}");
    DeviceSearchOptions one_node;
    one_node.max_nodes_per_device = 1;
    one_node.max_nodes_per_pair = 0;
    const DeviceSearchBound root = ComputeDeviceSearchBound(p, one_node);
    EXPECT_FALSE(root.finished) << limit;
    EXPECT_NEAR(root.value, 15, 1e-9) << limit;
    EXPECT_NEAR(testing::BruteForceOptimum(p, true), 15, 1e-9) << limit;
  }
}

// Two devices searched together see what neither sees alone: when device 1's
// forwards can run, given device 0's room and link. On the 2x2 offload
// problem each device alone (and ComputeLowerBound) stays below the
// brute-force optimum, 10.55; the pair proves it.
TEST(DeviceSearchBound, TwoDevicesTogetherProveTheOffloadOptimum) {
  const Problem p = testing::OffloadTwoByTwo();
  EXPECT_NEAR(testing::BruteForceOptimum(p, true), 10.55, 1e-9);
  DeviceSearchOptions alone;
  alone.max_nodes_per_pair = 0;
  const DeviceSearchBound single = ComputeDeviceSearchBound(p, alone);
  EXPECT_TRUE(single.finished);
  EXPECT_TRUE(single.pair_value.empty());
  EXPECT_LT(std::max(single.value, ComputeLowerBound(p).value), 10.55 - 0.1);
  const DeviceSearchBound both = ComputeDeviceSearchBound(p);
  ASSERT_EQ(both.pair_value.size(), 1u);
  EXPECT_EQ(both.pair_value[0].devices, (std::array<int, 2>{0, 1}));
  EXPECT_TRUE(both.pair_value[0].finished);
  EXPECT_NEAR(both.pair_value[0].value, 10.55, 1e-9);
  EXPECT_NEAR(both.value, 10.55, 1e-9);
}

// By hand: a slow host link throttles the forwards that follow. Device 0
// holds one activation (device 1, none) and offloads in 3: F(0,1) waits until 4 (for O(0,0),
// 1-4, or for B(0,0), which ends at 4 after F10 B10), so device 1 cannot
// start F(1,1) before 5, and its F11 B11 F12 B12 then end at 9, with B(0,2)
// still to run: 10 for device 1 alone (8 if the link were ignored: F(1,1)
// from 2). Device 0 alone gives the optimum, 12.
TEST(DeviceSearchBound, ASlowLinkDelaysTheForwardsDownstream) {
  const Problem p = testing::MakeProblem(
      R"("devices": 2, "microbatches": 3, "split_backward": false,
         "stage_time": {"f": 1, "b": 1, "w": 0}, "offload_time": 3,
         "memory": {"activation": [1, 0], "limit": [1, 10]})");
  const DeviceSearchBound sb = ComputeDeviceSearchBound(p);
  ASSERT_EQ(sb.device_value.size(), 2u);
  EXPECT_NEAR(sb.device_value[1], 10, 1e-9);
  EXPECT_NEAR(sb.value, 12, 1e-9);
  EXPECT_NEAR(testing::BruteForceOptimum(p, true), 12, 1e-9);
}

// By hand: offloads of devices that share a host link queue on it. Three
// devices, unit F and fused B, room for one activation on devices 0 and 1,
// offloads of 2. The second F(1) needs one activation of stage 1 gone (its B
// ends at 5 at the earliest, its offload from the end of F(1,0) at 2 by 4),
// and the second F(0) before it one of stage 0 (from 1 by 3). On separate
// links F(1,1) may start at 4; on one link the two offloads end no earlier
// than 1 + 2 + 2 = 5. Device 2 alone then runs F20 B20 from 2, F21 B21 from
// 6 (5 apart) and the B chain of stages 1 and 0 after them: 10 (9 apart).
// (Never above the optimum: NeverAboveTheBruteForceOptimum shares links too.)
TEST(DeviceSearchBound, OffloadsOnASharedLinkQueue) {
  const auto make = [](const std::string& links) {
    return testing::MakeProblem(
        R"("devices": 3, "microbatches": 2, "split_backward": false,
           "stage_time": {"f": 1, "b": 1, "w": 0}, "offload_time": 2,
           "memory": {"activation": [1, 1, 0], "limit": [1, 1, 10]}, "host_links": )" +
        links);
  };
  const DeviceSearchBound shared = ComputeDeviceSearchBound(make("[[0, 1], [2]]"));
  const DeviceSearchBound apart = ComputeDeviceSearchBound(make("[[0], [1], [2]]"));
  ASSERT_EQ(shared.device_value.size(), 3u);
  ASSERT_EQ(apart.device_value.size(), 3u);
  EXPECT_NEAR(shared.device_value[2], 10, 1e-9);
  EXPECT_NEAR(apart.device_value[2], 9, 1e-9);
}

// Devices in pairs on host links, short of room, with slow copies: each
// device's relaxation capped at c offloads tells how many round trips it
// needs below a makespan, and a link carries both devices' trips one copy at
// a time. On tiny problems the bound never exceeds the brute-force optimum;
// on 4x6 ones never auto's makespan, and the link budget raises it above
// every device's own on a share of them.
TEST(DeviceSearchBound, ASharedLinkCarriesEveryDevicesRoundTrips) {
  std::mt19937 rng(43);
  const auto tighten = [&](Problem& p, double lo, double hi) {
    for (double& t : *p.offload) t *= 1.5;
    std::uniform_real_distribution<double> room(lo, hi);
    p.memory_limit = p.static_memory;
    for (int d = 0; d < p.devices; ++d) (*p.memory_limit)[d] += p.activation[d] * room(rng);
  };
  for (int trial = 0; trial < 6; ++trial) {  // split twice: that brute force takes seconds
    Problem p = testing::RandomProblem(rng, 2, 2, 1, trial % 3 == 0, true);
    p.host_links = {{0, 1}};
    tighten(p, 1.0, 1.5);
    const double opt = testing::BruteForceOptimum(p, true);
    EXPECT_LE(ComputeDeviceSearchBound(p).value, opt + 1e-9) << ToJson(p);
  }
  int raised = 0;
  for (int trial = 0; trial < 12; ++trial) {
    Problem p = testing::RandomProblem(rng, 4, 6, 1, trial % 2 == 0, true);
    p.host_links = {{0, 1}, {2, 3}};
    tighten(p, 1.0, 1.4);
    SearchOptions o;
    o.max_evaluations = 3000;
    o.threads = 1;
    StatusOr<Solution> a = RunMethod(p, "auto", o);
    ASSERT_TRUE(a.ok()) << a.status().message();
    const DeviceSearchBound sb = ComputeDeviceSearchBound(p, {200'000, 10.0});
    ASSERT_EQ(sb.link_value.size(), 2u);
    EXPECT_LE(sb.value, a->sim.objective + 1e-9) << ToJson(p);
    const double own = *std::max_element(sb.device_value.begin(), sb.device_value.end());
    raised += std::max(sb.link_value[0], sb.link_value[1]) > own + 1e-6;
  }
  std::printf("link budget above every device on %d of 12\n", raised);
  EXPECT_GE(raised, 2);
}

// A search cut short (node budget, clock, or a stop from any thread: a
// Ctrl-C) still bounds, more weakly: it reports the least bound of the nodes
// it left, never more than the finished search proves, and says it was cut
// short.
TEST(DeviceSearchBound, ACutShortSearchStillBounds) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 8, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 2})");
  const DeviceSearchBound full = ComputeDeviceSearchBound(p);
  ASSERT_TRUE(full.finished);
  EXPECT_GT(full.value, ComputeLowerBound(p).value + 1);  // the search pays here
  std::atomic<bool> stop{true};
  DeviceSearchOptions stopped;
  stopped.stop = &stop;
  for (const DeviceSearchOptions& o :
       {DeviceSearchOptions{1000, 60.0}, DeviceSearchOptions{1'000'000, 0.0}, stopped}) {
    const DeviceSearchBound cut = ComputeDeviceSearchBound(p, o);
    EXPECT_FALSE(cut.finished);
    EXPECT_GT(cut.value, 0.0);
    EXPECT_LE(cut.value, full.value + 1e-9);
  }
}

// A budget is spent, not left: the devices share it, those that finish
// leave theirs to the others, and a search cut short at its least target
// gets every node left (half would end the search with the other half
// unused).
TEST(DeviceSearchBound, ACutShortSearchSpendsItsWholeBudget) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 8, "stage_time": {"f": 1, "b": 1, "w": 1},
         "offload_time": 2, "memory": {"activation": 1, "freed_by_b": 0.5, "limit": 2})");
  const DeviceSearchBound full = ComputeDeviceSearchBound(p, {100'000'000, 60.0, 0});
  ASSERT_TRUE(full.finished);
  for (const std::int64_t n : {3'000, 10'000}) {
    const DeviceSearchBound cut = ComputeDeviceSearchBound(p, {n, 60.0, 0});
    EXPECT_FALSE(cut.finished) << n;
    EXPECT_GE(cut.nodes, p.devices * n) << n;
    EXPECT_LE(cut.nodes, p.devices * (n + 2)) << n;  // a node past each search's budget
    EXPECT_LE(cut.value, full.value + 1e-9) << n;
  }
}

// Four heterogeneous devices with little room, W split off: a 1F1B order
// (given below, checked by the simulator) ends at 27.47, so no bound may
// exceed that. A search that compared states by forward ends clamped to the
// current time took two states as equal although one's forward ended 1.37
// earlier, which its backward (gap 5.22 later) could use: it pruned the
// better one and reported 27.55.
TEST(DeviceSearchBound, NeverAboveAKnownSchedule) {
  const Problem p = testing::MakeProblem(
      R"("devices": 4, "microbatches": 6, "split_backward": true,
         "stage_time": {"f": [0.74, 1.1, 1.44, 1.45], "b": [1.65, 1.94, 1.13, 1.0],
                        "w": [0.67, 0.57, 0.53, 0.65]},
         "comm_time": 0.05, "memory": {"activation": [1.24, 1.15, 1.02, 1.39],
         "freed_by_b": [0.496, 0.46, 0.408, 0.556], "static": 2.0,
         "limit": [13.16, 5.795, 4.244, 3.529]})");
  const double known =
      Makespan(p,
               "d0: 0F0 0F1 0F2 0F3 0B0 0W0 0F4 0B1 0W1 0F5 0B2 0W2 0B3 0W3 0B4 0W4 0B5 0W5\n"
               "d1: 1F0 1F1 1F2 1B0 1W0 1F3 1B1 1W1 1F4 1B2 1W2 1F5 1B3 1W3 1B4 1W4 1B5 1W5\n"
               "d2: 2F0 2F1 2B0 2W0 2F2 2B1 2W1 2F3 2B2 2W2 2F4 2B3 2W3 2F5 2B4 2W4 2B5 2W5\n"
               "d3: 3F0 3B0 3W0 3F1 3B1 3W1 3F2 3B2 3W2 3F3 3B3 3W3 3F4 3B4 3W4 3F5 3B5 3W5\n");
  EXPECT_NEAR(known, 27.47, 1e-9);
  const DeviceSearchBound sb = ComputeDeviceSearchBound(p);
  EXPECT_TRUE(sb.finished);
  EXPECT_LE(sb.value, known + 1e-9);
  // It still proves more than core (26.81: device 3's drain beyond the W it
  // has room to defer).
  EXPECT_GT(sb.value, ComputeLowerBound(p).value + 0.5);
}

// Three devices, B and W fused; device 0 has room for 3 activations, device 2
// for 1. Device 2 alone proves 21.5: F(2, m+1) waits for B(2, m), six turns
// of f + b = 2.71 after the first forward reaches it, then the backward chain
// back to device 0. The order below (checked by the simulator) ends at 21.62.
// The search proves that it is optimal only by counting device 0's room: its
// 4th forward waits for its 1st backward, which waits for device 2's turns,
// so device 1's forwards arrive later than the forward chain alone says.
TEST(DeviceSearchBound, UpstreamRoomDelaysForwards) {
  const Problem p = testing::MakeProblem(
      R"("devices": 3, "microbatches": 6, "split_backward": false,
         "stage_time": {"f": [0.64, 1.48, 1.2], "b": [1.73, 1.19, 1.51]}, "comm_time": 0.05,
         "memory": {"activation": [0.8, 0.86, 1.26], "static": 2.0,
         "limit": [4.64, 9.74, 3.386]})");
  const double known = Makespan(p,
                                "d0: 0F0 0F1 0F2 0B0 0F3 0B1 0F4 0B2 0F5 0B3 0B4 0B5\n"
                                "d1: 1F0 1F1 1B0 1F2 1B1 1F3 1B2 1F4 1B3 1F5 1B4 1B5\n"
                                "d2: 2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3 2F4 2B4 2F5 2B5\n");
  EXPECT_NEAR(known, 21.62, 1e-9);
  EXPECT_NEAR(ComputeLowerBound(p).value, 21.5, 1e-9);
  EXPECT_NEAR(ComputeDeviceSearchBound(p).value, known, 1e-9);
}

// Random tight problems, a few devices and micro-batches, with and without
// offload: the bound never exceeds what auto finds.
TEST(DeviceSearchBound, NeverAboveAutosSchedules) {
  std::mt19937 rng(41);
  int compared = 0, tight = 0;
  for (int trial = 0; trial < 24; ++trial) {
    std::uniform_int_distribution<int> dev(2, 4), mb(4, 8);
    const bool offload = trial % 2 == 1;
    Problem p = testing::RandomProblem(rng, dev(rng), mb(rng), 1, trial % 3 != 0, offload);
    std::uniform_real_distribution<double> room(1.1, 3.5);
    p.memory_limit = p.static_memory;
    for (int d = 0; d < p.devices; ++d) (*p.memory_limit)[d] += p.activation[d] * room(rng);
    SearchOptions o;
    o.max_evaluations = 3000;
    o.threads = 1;
    StatusOr<Solution> a = RunMethod(p, "auto", o);
    if (!a.ok()) continue;
    ++compared;
    const DeviceSearchBound sb = ComputeDeviceSearchBound(p, {200'000, 10.0});
    EXPECT_LE(sb.value, a->sim.objective + 1e-9) << ToJson(p);
    tight += sb.value >= a->sim.objective - 1e-9;
  }
  EXPECT_GE(compared, 16);
  EXPECT_GE(tight, 4);  // often auto's schedule is proven optimal
}

// A device that cannot hold one activation has no schedule: its search ends
// at once (it used to probe ever higher targets until the clock stopped it)
// and the device adds nothing; the core's memory bound says infeasible.
TEST(DeviceSearchBound, NoRoomEndsTheSearch) {
  const Problem p = testing::MakeProblem(
      R"("devices": 2, "microbatches": 4, "stage_time": {"f": 1, "b": 1, "w": 1},
         "memory": {"activation": 1, "limit": [0.5, 3]})");
  const DeviceSearchBound sb = ComputeDeviceSearchBound(p, {1'000'000, 60.0});
  EXPECT_TRUE(sb.finished);
  ASSERT_EQ(sb.device_value.size(), 2u);
  EXPECT_EQ(sb.device_value[0], 0.0);
  EXPECT_GT(sb.device_value[1], 0.0);
}

// An upper end (a known schedule's makespan) caps every probe: the 2x2
// offload problem's pair proves its brute-force optimum, 10.55, in no more
// nodes; an upper end below the optimum is proven as it is (no schedule
// ends before it), never more.
TEST(DeviceSearchBound, AnUpperEndIsProvenNotPassed) {
  const Problem p = testing::OffloadTwoByTwo();
  const DeviceSearchBound plain = ComputeDeviceSearchBound(p);
  ASSERT_NEAR(plain.value, 10.55, 1e-9);
  DeviceSearchOptions o;
  o.upper = 10.55;
  const DeviceSearchBound capped = ComputeDeviceSearchBound(p, o);
  EXPECT_NEAR(capped.value, 10.55, 1e-9);
  EXPECT_LE(capped.nodes, plain.nodes);
  o.upper = 10.2;
  const double low = ComputeDeviceSearchBound(p, o).value;
  EXPECT_GE(low, 10.2 - 1e-9);
  EXPECT_LE(low, 10.55 + 1e-9);
}

// hetoff-5f of the benchmark set: its devices alone prove 52.87, devices 0
// and 1 together its optimum, 53.45.
Problem HetOff5f() {
  return testing::MakeProblem(
      R"("devices": 4, "microbatches": 8, "split_backward": false,
         "stage_time": {"f": [1.17, 1.25, 1.28, 1.37], "b": [1.74, 1.92, 1.03, 1.47],
                        "w": [1.16, 0.95, 1.13, 0.58]},
         "comm_time": 0.05, "offload_time": [0.53, 0.93, 1.06, 2.33],
         "memory": {"activation": [1.13, 0.97, 1.18, 1.2], "freed_by_b": [0.45, 0.39, 0.47, 0.48],
                    "static": 2.0, "limit": [4.486, 3.552, 3.888, 3.92]})");
}

// Aiming at the optimum (an upper end), hetoff-5f's pair 0, 1 proves it in
// far fewer nodes than probing up to it from below.
TEST(DeviceSearchBound, AnUpperEndSavesTheProbesAboveIt) {
  const Problem p = HetOff5f();
  const DeviceSearchBound plain = ComputeDeviceSearchBound(p);
  DeviceSearchOptions o;
  o.upper = 53.45;
  const DeviceSearchBound aimed = ComputeDeviceSearchBound(p, o);
  EXPECT_NEAR(plain.value, 53.45, 1e-9);
  EXPECT_NEAR(aimed.value, 53.45, 1e-9);
  EXPECT_LT(2 * aimed.nodes, plain.nodes);
}

// A search whose pairs were cut short resumes them alone: the devices keep
// their values, and the pairs climb from theirs to what one search with the
// whole budget proves, here below that as upper end.
TEST(DeviceSearchBound, ResumedPairsClimbFromWhereTheyStopped) {
  const Problem p = HetOff5f();
  const DeviceSearchBound full = ComputeDeviceSearchBound(p, {1'000'000, 60.0, 1'000'000});
  ASSERT_NEAR(full.value, 53.45, 1e-9);
  const DeviceSearchBound cut = ComputeDeviceSearchBound(p, {1'000'000, 60.0, 300});
  EXPECT_LT(cut.value, 53.45 - 0.5);
  ASSERT_TRUE(std::any_of(cut.pair_value.begin(), cut.pair_value.end(),
                          [](const DevicePairValue& q) { return !q.finished; }));
  DeviceSearchOptions again{1'000'000, 60.0, 1'000'000};
  again.upper = full.value;
  again.resume = &cut;
  const DeviceSearchBound resumed = ComputeDeviceSearchBound(p, again);
  EXPECT_EQ(resumed.device_value, cut.device_value);
  EXPECT_NEAR(resumed.value, 53.45, 1e-9);
  EXPECT_LT(resumed.nodes, full.nodes);
}

}  // namespace
}  // namespace optpipe
