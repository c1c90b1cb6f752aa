// GPipe (Huang et al., 2019): every micro-batch's forward through the
// pipeline, then every backward. Each device runs the F of its stages in
// stage order, then the B of its stages in reverse stage order; with a split
// backward each W follows its B at once. Peak activation memory is M per stage.
#include "heuristics/method.h"

namespace optpipe {

StatusOr<Schedule> BuildGPipe(const Problem& p) {
  Schedule s = Schedule::Empty(p, "gpipe");
  const int S = p.stages(), M = p.microbatches;
  for (int st = 0; st < S; ++st) {
    for (int m = 0; m < M; ++m) s.compute[p.stage_device[st]].push_back({OpType::kF, st, m});
  }
  for (int st = S - 1; st >= 0; --st) {
    for (int m = 0; m < M; ++m) {
      auto& lane = s.compute[p.stage_device[st]];
      lane.push_back({OpType::kB, st, m});
      if (p.split_backward) lane.push_back({OpType::kW, st, m});
    }
  }
  return s;
}

}  // namespace optpipe
