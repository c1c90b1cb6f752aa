// BestFitting: the knob search the published schedules share. A method
// proposes candidate settings of its knobs (group size, offload set, fill
// depth, ...); each is simulated under memory.limit and the best objective
// that fits wins, ties to the lower peak memory, then to the earlier
// candidate (so the published default goes first).
//
// Candidates are built and simulated in parallel batches of 1, 2, 4, 8, then
// 16 (Scorer; sizes independent of the thread count), so
// the choice depends only on which candidates were scored: all of them,
// unless opt's wall-clock limit or stop token ends the search: candidates not
// started by then are skipped (never the first; the limit is ignored when
// opt.max_evaluations is set, the deterministic mode).
//
// If none fits: kInfeasible naming the leanest candidate and the memory it
// needs, the smallest uniform raise of memory.limit under which it runs
// (copies and reloads wait for memory, so this is often well below its peak
// without a limit).
//
//   StatusOr<Schedule> s = BestFitting(p, "group size", gs.size(),
//       [&](int i) { return std::optional(Interleaved(p, gs[i])); },
//       [&](int i) { return "g = " + std::to_string(gs[i]); }, opt);
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/status.h"
#include "heuristics/local_search.h"

namespace optpipe {

// make(i) builds candidate i in [0, n) or declines (nullopt); label(i) names
// it in messages; `knob` names what the candidates vary. `chosen`, when
// given, receives the index of the winner.
StatusOr<Schedule> BestFitting(const Problem& p, const std::string& knob, int n,
                               const std::function<std::optional<Schedule>(int)>& make,
                               const std::function<std::string(int)>& label,
                               const SearchOptions& opt = {}, int* chosen = nullptr);

// The clock of a knob scan: more() is true until opt's stop token is set or,
// outside the deterministic mode (opt.max_evaluations unset), until
// opt.time_limit_s has passed since construction.
class ScanClock {
 public:
  explicit ScanClock(const SearchOptions& opt) : opt_(opt), t0_(std::chrono::steady_clock::now()) {}
  bool more() const {
    if (opt_.stop && opt_.stop->load()) return false;
    if (opt_.max_evaluations) return true;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count() <
           opt_.time_limit_s;
  }

 private:
  const SearchOptions& opt_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace optpipe
