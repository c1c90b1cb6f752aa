// Interleaved 1F1B (Narayanan et al., "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", SC 2021), in the order
// Megatron-LM's forward_backward_pipelining_with_interleaving runs it.
//
// Each device holds v >= 2 chunks, stage s on device s mod D. The forwards of
// every device follow Megatron's schedule table: groups of g consecutive
// micro-batches (microbatch_group_size_per_vp_stage, default D) run through
// chunk 0, then chunk 1, ..., then the next group starts; when M is not a
// multiple of g the last group is the smaller remainder, as in Megatron. The
// backwards follow the same table with the chunks mirrored (v-1-chunk), since
// a micro-batch's backward starts from its last chunk. Device r runs
// (D-r-1)*2 + (v-1)*g warm-up forwards (at most M*v), then alternates one
// forward and one backward, then drains the remaining backwards. With a split
// backward each W runs right after its B (Megatron computes both at once).
// The bubble, (D-1)(F+B)/v for a device's whole-model F and B, is v times
// smaller than 1F1B's, for about v times the warm-up activations.
//
// The knob is g: a larger g leaves more slack between a chunk's forward and
// the next chunk's (it absorbs comm time) but keeps more activations in
// flight. Megatron accepts D <= g <= M with a last group (M mod g) that is
// empty or at least D long (a shorter one stalls the pipeline); so does this
// builder, and it needs M >= D for that. Every accepted g is simulated and the
// best objective that fits memory.limit is kept, ties going to the smaller g.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "core/simulator.h"
#include "heuristics/best_fitting.h"
#include "heuristics/method.h"

namespace optpipe {
namespace {

Schedule Interleaved(const Problem& p, int g) {
  const int D = p.devices, M = p.microbatches, v = p.stages_per_device, total = M * v;
  // Megatron's schedule table: virtual micro-batch k -> (micro-batch, chunk).
  std::vector<std::pair<int, int>> table;
  for (int lo = 0; lo < M; lo += g) {
    const int hi = lo + g >= M ? M : lo + g;
    for (int c = 0; c < v; ++c) {
      for (int m = lo; m < hi; ++m) table.push_back({m, c});
    }
  }
  Schedule s = Schedule::Empty(p, "1f1b-i");
  for (int r = 0; r < D; ++r) {
    auto& lane = s.compute[r];
    const auto forward = [&](int k) {
      lane.push_back({OpType::kF, table[k].second * D + r, table[k].first});
    };
    const auto backward = [&](int k) {
      const int stage = (v - 1 - table[k].second) * D + r;
      lane.push_back({OpType::kB, stage, table[k].first});
      if (p.split_backward) lane.push_back({OpType::kW, stage, table[k].first});
    };
    const int warmup = std::min(total, (D - r - 1) * 2 + (v - 1) * g);
    for (int k = 0; k < warmup; ++k) forward(k);
    for (int k = 0; k + warmup < total; ++k) {
      forward(k + warmup);
      backward(k);
    }
    for (int k = total - warmup; k < total; ++k) backward(k);
  }
  return s;
}

// The group sizes Megatron accepts, smallest (least memory) first.
std::vector<int> GroupSizes(const Problem& p) {
  std::vector<int> sizes;
  for (int g = p.devices; g <= p.microbatches; ++g) {
    const int last = p.microbatches % g;
    if (last == 0 || last >= p.devices) sizes.push_back(g);
  }
  return sizes;
}

}  // namespace

Status Interleaved1F1BApplies(const Problem& p) {
  if (p.stages_per_device < 2) {
    return NotApplicable("interleaved 1F1B needs stages_per_device >= 2 (got " +
                         std::to_string(p.stages_per_device) +
                         "); with one stage per device use 1f1b");
  }
  for (int s = 0; s < p.stages(); ++s) {
    if (p.stage_device[s] != s % p.devices) {
      return NotApplicable(
          "interleaved 1F1B needs placement \"interleaved\" (stage s on device s mod D); stage " +
          std::to_string(s) + " is on device " + std::to_string(p.stage_device[s]));
    }
  }
  if (p.microbatches < p.devices) {
    return NotApplicable("interleaved 1F1B needs microbatches >= devices (got " +
                         std::to_string(p.microbatches) + " < " + std::to_string(p.devices) +
                         "): Megatron's group size g must lie in [devices, microbatches]");
  }
  return OkStatus();
}

StatusOr<Schedule> BuildInterleaved1F1B(const Problem& p, const SearchOptions& opt) {
  const std::vector<int> gs = GroupSizes(p);
  if (gs.empty()) return NotApplicable("no group size g in [devices, microbatches]");
  return BestFitting(
      p, "group size", static_cast<int>(gs.size()),
      [&](int i) { return std::optional(Interleaved(p, gs[i])); },
      [&](int i) { return "g = " + std::to_string(gs[i]); }, opt);
}

}  // namespace optpipe
