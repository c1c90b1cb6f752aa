// V-Half and V-Min (Qi et al., "Pipeline Parallelism with Controllable Memory",
// NeurIPS 2024): two chunks per device in a V, at about 1/2 and 1/3 of 1F1B's
// activation memory. (ZB-V, the V at 1F1B's memory, shares the zero-bubble
// list scheduler and is built in zero_bubble.cc.)
//
// Device i holds stage i (chunk 0, forward F0 and backward B0) and stage
// 2D-1-i (chunk 1, F1 and B1). Following the paper, a schedule is a building
// block -- one micro-batch's F0, F1, B1, B0 on every device at fixed offsets in
// unit time slots -- repeated every 6 slots, one per micro-batch. The offsets
// (from the paper's reference implementation) set each activation's lifespan,
// and a device's peak activations are the block's lifespans on it over the
// 6-slot period:
//   V-Half: F0 2i, F1 3D-i-2, B1 3D+c+2i-1, B0 6D+c-i-2 (c = 3 if D is even)
//   V-Min:  F0 i,  F1 2D-i-1, B1 2D+c+i,    B0 4D+c-i-1 (c = 2 if 3 | D)
// W's fill the free slots, oldest first. In the warm-up and cool-down the
// repeated block leaves gaps, which the paper closes by moving passes earlier
// ("reordering") where memory allows and squeezing out the idle slots:
//  1. with W's in place, move every warm-up and cool-down pass to the
//     earliest free slot after its dependencies that keeps the device's peak
//     at its steady-state value; squeeze;
//  2. without W's (they fill free slots), do the same for the cool-down;
//     squeeze;
//  3. place the W's once more, a chunk-1 W first (its B came earlier).
// The per-device order of the slots is the schedule; the simulator times it
// with the real per-stage times and comm. On unit costs, p = 4 and m = 8:
// V-Half makespan 26.5 at 3 activations per device, V-Min 29.5 at 2, against
// 1F1B's 4 (one activation = both chunks of a device).
// Memory: the compacted block and, as a fallback, the plain repeated block
// (the same steady state, wider warm-up and cool-down) are simulated; the
// better one that fits memory.limit is kept, else the memory it needs is
// reported. The blocks assume a split backward: with a fused one the W's are
// dropped from the order and each B, now b+w long, stretches the steady state
// (unit costs, p = 4, m = 8: V-Half 38, V-Min 54, against 1F1B's 33), at the
// same memory.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>

#include "core/simulator.h"
#include "heuristics/best_fitting.h"
#include "heuristics/method.h"

namespace optpipe {
namespace {

// The passes of one device in building-block order, then its W's: kW holds
// them all (the k-th follows the device's k-th backward) or, once split by
// chunk, chunk 1's, and kW0 chunk 0's.
enum Kind { kF0 = 0, kF1, kB1, kB0, kW, kW0, kKinds };
using Lane = std::array<std::vector<int>, kKinds>;  // [kind][index] -> slot
using Lanes = std::vector<Lane>;                    // [device]

enum class Block { kHalf, kMin };

Lanes RepeatBlock(Block block, int D, int M) {
  Lanes lanes(D);
  for (int i = 0; i < D; ++i) {
    std::array<int, 4> offset;
    if (block == Block::kHalf) {
      const int c = D % 2 == 0 ? 3 : 0;
      offset = {2 * i, 3 * D - i - 2, 3 * D + c + 2 * i - 1, 6 * D + c - i - 2};
    } else {
      const int c = D % 3 == 0 ? 2 : 0;
      offset = {i, 2 * D - i - 1, 2 * D + c + i, 4 * D + c - i - 1};
    }
    for (int k = 0; k < 4; ++k) {
      for (int m = 0; m < M; ++m) lanes[i][k].push_back(offset[k] + 6 * m);
    }
  }
  return lanes;
}

int LastSlot(const Lane& lane) {
  int last = -1;
  for (const auto& slots : lane) {
    for (int t : slots) last = std::max(last, t);
  }
  return last;
}

// Kind in each slot of a lane, -1 where free.
std::vector<int> Occupancy(const Lane& lane, int size) {
  std::vector<int> occ(size, -1);
  for (int k = 0; k < kKinds; ++k) {
    for (int t : lane[k]) occ[t] = k;
  }
  return occ;
}

// Puts one W per free slot, oldest backward first; with `split`, chunk 1's
// W's (kW) go before chunk 0's (kW0). The rest follow the last pass.
void PlaceW(Lane& lane, bool split) {
  lane[kW].clear();
  lane[kW0].clear();
  const int last = LastSlot(lane);
  const std::vector<int> occ = Occupancy(lane, last + 1);
  int pending[2] = {0, 0};
  for (int t = 0; t <= last; ++t) {
    if (occ[t] == kB1 || occ[t] == kB0) {
      ++pending[split && occ[t] == kB0 ? 1 : 0];
    } else if (occ[t] < 0) {
      for (int q = 0; q < 2; ++q) {
        if (pending[q] == 0) continue;
        lane[q == 0 ? kW : kW0].push_back(t);
        --pending[q];
        break;
      }
    }
  }
  int t = last;
  for (int q = 0; q < 2; ++q) {
    for (; pending[q] > 0; --pending[q]) lane[q == 0 ? kW : kW0].push_back(++t);
  }
}

// Peak activations of a lane in the slot model: F0/F1 allocate one, a W frees
// one; without explicit W's, every free slot after a backward runs one.
int Peak(const std::vector<int>& occ, bool explicit_w) {
  int cur = 0, peak = 0, pending = 0;
  for (int k : occ) {
    if (k == kF0 || k == kF1) {
      ++cur;
    } else if (k == kB1 || k == kB0) {
      ++pending;
    } else if (k == kW || k == kW0) {
      --cur;
    } else if (!explicit_w && pending > 0) {
      --cur;
      --pending;
    }
    peak = std::max(peak, cur);
  }
  return peak;
}

struct Pass {
  int slot, device, kind, index;
  bool operator<(const Pass& o) const {
    return std::tie(slot, device, kind, index) < std::tie(o.slot, o.device, o.kind, o.index);
  }
};

std::vector<Pass> InSlotOrder(const Lanes& lanes) {
  std::vector<Pass> passes;
  for (int d = 0; d < static_cast<int>(lanes.size()); ++d) {
    for (int k = 0; k < kKinds; ++k) {
      for (int i = 0; i < static_cast<int>(lanes[d][k].size()); ++i) {
        passes.push_back({lanes[d][k][i], d, k, i});
      }
    }
  }
  std::sort(passes.begin(), passes.end());
  return passes;
}

// Calls fn(device, kind, index) for the passes `x` depends on: the same pass
// of the neighbouring device along the V (chunk 0 flows from device 0 to D-1,
// chunk 1 back), the previous pass of the micro-batch on this device
// (F0 -> F1 -> B1 -> B0), and the previous micro-batch of the same kind.
template <typename Fn>
void ForEachDependency(const Pass& x, int D, Fn&& fn) {
  if (x.kind == kF0 || x.kind == kB1) {
    if (x.device > 0) fn(x.device - 1, x.kind, x.index);
  } else if (x.kind == kF1 || x.kind == kB0) {
    if (x.device + 1 < D) fn(x.device + 1, x.kind, x.index);
  }
  if (x.kind > kF0 && x.kind < kW) fn(x.device, x.kind - 1, x.index);
  if (x.index > 0) fn(x.device, x.kind, x.index - 1);
}

// Every pass as early as its dependencies and its device's order allow, one
// slot each (the paper's "squeeze").
void Squeeze(Lanes& lanes) {
  const int D = static_cast<int>(lanes.size());
  Lanes end = lanes;
  std::vector<int> free_at(D, 0);
  for (const Pass& x : InSlotOrder(lanes)) {
    int start = free_at[x.device];
    ForEachDependency(x, D, [&](int d, int k, int i) { start = std::max(start, end[d][k][i]); });
    end[x.device][x.kind][x.index] = start + 1;
    free_at[x.device] = start + 1;
    lanes[x.device][x.kind][x.index] = start;
  }
}

// Moves warm-up (only `with_w`) and cool-down passes to the earliest free slot
// after their dependencies that keeps each device's peak, then squeezes. The
// steady phase runs from device 0's first chunk-0 backward to the next chunk-0
// forward of the last micro-batch; it stays as the block has it.
void Compact(Lanes& lanes, bool with_w, int M) {
  const int D = static_cast<int>(lanes.size());
  if (with_w) {
    for (Lane& lane : lanes) PlaceW(lane, false);
  }
  std::vector<std::vector<int>> occ(D);
  std::vector<int> cap(D);
  for (int d = 0; d < D; ++d) {
    occ[d] = Occupancy(lanes[d], LastSlot(lanes[d]) + 1);
    cap[d] = Peak(occ[d], with_w);
  }
  enum { kWarmUp, kSteady, kCoolDown } phase = kWarmUp;
  for (const Pass& x : InSlotOrder(lanes)) {
    if (phase == kWarmUp && x.kind == kB0 && x.device == 0) phase = kSteady;
    if (phase == kSteady) {
      if (x.kind == kF0 && x.index == M - 1) phase = kCoolDown;
      continue;
    }
    if (phase == kWarmUp && !with_w) continue;
    Lane& lane = lanes[x.device];
    int dep = -1;
    ForEachDependency(x, D, [&](int d, int k, int i) { dep = std::max(dep, lanes[d][k][i]); });
    if (x.kind == kW) {  // the k-th W follows the device's k-th backward
      std::vector<int> backward = lane[kB1];
      backward.insert(backward.end(), lane[kB0].begin(), lane[kB0].end());
      std::nth_element(backward.begin(), backward.begin() + x.index, backward.end());
      dep = std::max(dep, backward[x.index]);
    }
    std::vector<int>& o = occ[x.device];
    for (int t = dep + 1; t < x.slot; ++t) {
      if (o[t] >= 0) continue;
      std::swap(o[t], o[x.slot]);
      if (Peak(o, with_w) <= cap[x.device]) {
        lane[x.kind][x.index] = t;
        break;
      }
      std::swap(o[t], o[x.slot]);
    }
  }
  if (!with_w) {
    for (Lane& lane : lanes) PlaceW(lane, false);
  }
  Squeeze(lanes);
  for (Lane& lane : lanes) {
    lane[kW].clear();
    lane[kW0].clear();
  }
}

Schedule ToSchedule(const Problem& p, Lanes lanes) {
  Schedule s = Schedule::Empty(p, "v");
  const int D = p.devices;
  for (int d = 0; d < D; ++d) {
    PlaceW(lanes[d], true);
    const int chunk1 = 2 * D - 1 - d;
    static constexpr OpType kType[kKinds] = {OpType::kF, OpType::kF, OpType::kB,
                                             OpType::kB, OpType::kW, OpType::kW};
    for (const Pass& x : InSlotOrder({lanes[d]})) {
      if (kType[x.kind] == OpType::kW && !p.split_backward) continue;
      const bool first_chunk = x.kind == kF0 || x.kind == kB0 || x.kind == kW0;
      s.compute[d].push_back({kType[x.kind], first_chunk ? d : chunk1, x.index});
    }
  }
  return s;
}

// The compacted block, else the plain one: the better that fits memory.limit.
StatusOr<Schedule> BuildBlock(const Problem& p, Block block) {
  const Lanes plain = RepeatBlock(block, p.devices, p.microbatches);
  Lanes compact = plain;
  Compact(compact, true, p.microbatches);
  Compact(compact, false, p.microbatches);
  return BestFitting(
      p, "block", 2, [&](int i) { return std::optional(ToSchedule(p, i == 0 ? compact : plain)); },
      [](int i) { return i == 0 ? std::string("compacted") : std::string("plain"); });
}

}  // namespace

Status VShapeApplies(const Problem& p) {
  if (p.stages_per_device != 2) {
    return NotApplicable("V schedules need stages_per_device = 2 (got " +
                         std::to_string(p.stages_per_device) + ") in placement \"vshape\"");
  }
  if (p.stage_device != *PlaceStages("vshape", p.devices, 2)) {
    return NotApplicable(
        "V schedules need placement \"vshape\" (chunk 0 of device d is stage d, chunk 1 is "
        "stage 2D-1-d)");
  }
  return OkStatus();
}

StatusOr<Schedule> BuildVHalf(const Problem& p) { return BuildBlock(p, Block::kHalf); }
StatusOr<Schedule> BuildVMin(const Problem& p) { return BuildBlock(p, Block::kMin); }

}  // namespace optpipe
