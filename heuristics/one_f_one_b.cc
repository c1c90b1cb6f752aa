// 1F1B (PipeDream-Flush: Narayanan et al., "Memory-Efficient Pipeline-Parallel
// DNN Training", ICML 2021; Megatron-LM's non-interleaved schedule): stage s runs
// min(S-1-s, M) warm-up forwards, then alternates one forward and one
// backward, then drains the remaining backwards. A stage holds at most
// S - s activations, against M for GPipe, at the same bubble (S-1)(f+b).
// With a split backward each W runs right after its B. Needs one stage per
// device (the registry checks it).
#include <algorithm>

#include "heuristics/method.h"

namespace optpipe {

StatusOr<Schedule> BuildOneFOneB(const Problem& p) {
  Schedule s = Schedule::Empty(p, "1f1b");
  const int S = p.stages(), M = p.microbatches;
  for (int st = 0; st < S; ++st) {
    auto& lane = s.compute[p.stage_device[st]];
    const auto backward = [&](int m) {
      lane.push_back({OpType::kB, st, m});
      if (p.split_backward) lane.push_back({OpType::kW, st, m});
    };
    const int warmup = std::min(S - 1 - st, M);
    for (int m = 0; m < warmup; ++m) lane.push_back({OpType::kF, st, m});
    for (int m = warmup; m < M; ++m) {
      lane.push_back({OpType::kF, st, m});
      backward(m - warmup);
    }
    for (int m = M - warmup; m < M; ++m) backward(m);
  }
  return s;
}

}  // namespace optpipe
