// The device search of DeviceSearchBound (exact/device_search_bound.h): one
// device, or a pair, with the rest of the pipeline as release times and
// tails, and the branch and bound that finds the relaxation's least
// makespan. See that header and docs/exact.md for what the relaxation keeps
// and why each pruning rule is sound.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

namespace optpipe::device_search {

constexpr int kMaxMicrobatches = 24;  // the search's keys hold one bit per forward

// One stage of the device, with the rest of the pipeline as release times
// and tails (see exact/device_search_bound.h).
struct Lane {
  double f = 0, b = 0, w = 0;  // b: B's duration (b + w when fused); w: 0 when fused
  double gap = 0;              // least time from F(s,m)'s end to B(s,m)'s start
  double a = 0, freed_b = 0, o = 0, t = 0;
  bool offload = false;
  std::vector<double> rF, rB, qB;  // [M] k-th earliest F / B start; after the k-th last B's end
  // To the lane of the device's previous stage (lane 0: none): the k-th F of
  // this lane starts at least df after the k-th of that lane ends, and the
  // k-th B of that lane at least db after the k-th of this lane ends (the
  // stages between run on other devices).
  double df = 0, db = 0;
  int dev = 0, link = 0;  // the relaxation's device and host link running it
};

constexpr int kMaxGroup = 2;  // devices searched together

// One device, or a few searched together: their stages in pipeline order, each
// device with its compute and room, each host link among them with its copies.
struct Relaxed {
  int M = 0;
  bool split = true;
  int devices = 1, links = 1;
  std::array<double, kMaxGroup> room{};
  std::array<int, kMaxGroup> link_of{};                // each device's host link
  std::array<double, kMaxGroup> a_min{}, slots{};      // least activation; whole ones room holds
  int max_offloads = std::numeric_limits<int>::max();  // over all lanes
  double grain = 0;  // TimeGrain(p): the problem's least makespan is a multiple of it
  std::vector<Lane> lanes;
};

struct Result {
  double value = 0;  // the least makespan (infinity: none), or a bound on it when cut short
  bool finished = true;
  std::int64_t nodes = 0;
};

// The relaxation's least makespan, from a bound `known` on it, in at most
// `max_nodes` nodes and by `deadline`. No probe aims above `upper` (an
// objective a schedule of the problem reaches): a probe there that finds
// nothing proves it, and the value is then `upper` (at most the least
// makespan, whatever `upper` is). `stop`, set from any thread, ends it as
// the deadline does.
Result Solve(const Relaxed& r, double known, double upper, std::int64_t max_nodes,
             std::chrono::steady_clock::time_point deadline,
             const std::atomic<bool>* stop = nullptr);

}  // namespace optpipe::device_search
