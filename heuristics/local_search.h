// LocalSearch: improve a schedule by moves on its orders, each move scored by
// the core simulator.
//
// Moves: swap two neighbouring compute ops of a device (two forwards or two
// backwards that swap also swap their offloads or reloads on a shared link),
// shift one op a few places, offload an activation that is kept (O where the
// link is when F ends, R to land just before B) or keep one that is
// offloaded, offload one and let the device's next forward in before its B
// or keep one and move the forward before its B after it, move a copy one
// place on its link, and drop an op's hold (Schedule::release). Each round
// draws a batch of moves from a seeded generator, scores them in parallel
// (TBB) and applies the best strictly better one (ties: the lower sum of
// device spans, then of op ends, then the lower batch index). At a local
// optimum (20 rounds without a better move) the walk restarts from the
// incumbent kicked by 1-4 random moves taken together, which may pass
// through orders that do not run on their own (iterated local search); it
// ends at a limit, at the lower bound, or after 300 kicks in a row that found
// nothing better. The batches do not depend on the number of threads, so the
// result depends only on the seed and the budget.
//
//   SearchOptions opt;
//   opt.time_limit_s = 1.0;
//   StatusOr<SearchResult> r = LocalSearch(problem, start_schedule, opt);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"

namespace optpipe {

struct SearchOptions {
  double time_limit_s = 1.0;  // wall clock, for everything the call does
  // A deterministic budget (simulations): when set, the clock is ignored.
  std::optional<std::int64_t> max_evaluations;
  int threads = 0;  // 0: TBB's default; 1 reproduces bit for bit
  std::uint64_t seed = 1;
  int batch = 32;                           // moves scored per round
  const std::atomic<bool>* stop = nullptr;  // set to true to interrupt
  // A lower bound the caller has proven (BestLowerBound, say): searches stop
  // on reaching it, as they do on ComputeLowerBound's. 0: none.
  double known_bound = 0;
  // Called with every new incumbent (already simulated and valid).
  std::function<void(const Schedule&, const SimResult&)> on_improvement;
  // A schedule to start from (auto): a seed of its own, searched from when
  // it beats the others. Checked first; an invalid one is an error.
  const Schedule* warm_start = nullptr;
};

// Why the search stopped: the first limit reached.
enum class SearchStop { kBound, kTimeLimit, kBudget, kInterrupted, kNoMove };
const char* ToString(SearchStop s);

struct SearchResult {
  Schedule schedule;
  SimResult sim;
  double start_objective = 0;
  std::int64_t evaluations = 0;
  int improvements = 0;
  SearchStop stop = SearchStop::kNoMove;
  double seconds = 0;
};

// The search order on results: lower objective, then lower sum of device spans,
// then lower sum of op ends.
bool Better(const SimResult& a, const SimResult& b);

// `start` must simulate (kInvalidArgument / kInfeasible otherwise).
StatusOr<SearchResult> LocalSearch(const Problem& p, const Schedule& start,
                                   const SearchOptions& opt);

}  // namespace optpipe
