// Scorer: candidate schedules simulated in parallel (TBB), for the searches
// of heuristics/. Internal to the heuristics library, which keeps TBB private.
#pragma once

#include <tbb/enumerable_thread_specific.h>
#include <tbb/task_arena.h>

#include <functional>
#include <optional>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"

namespace optpipe {

// Score builds candidate i with make(i) and scores it with the simulator, for
// i in [0, n), in parallel on `threads` (0: TBB's default). A candidate that make
// declines (nullopt) or that does not simulate gets no score. Deterministic:
// slot i depends only on make(i). A Scorer keeps its thread arena and its
// threads' simulators (with their scratch memory) from one batch to the next:
// made afresh per batch they cost more than scoring a batch of small schedules.
class Scorer {
 public:
  Scorer(const Problem& p, int threads);
  // With `base` (and its run), candidates that differ little from it are
  // simulated from their first change on (Simulator::RunChanged: their
  // peak_memory counts only from there).
  void Score(int n, const std::function<std::optional<Schedule>(int)>& make,
             std::vector<std::optional<Schedule>>& cand,
             std::vector<std::optional<SimResult>>& score, const Schedule* base = nullptr,
             const SimResult* base_run = nullptr);

 private:
  tbb::task_arena arena_;
  tbb::enumerable_thread_specific<Simulator> sims_;
};

}  // namespace optpipe
