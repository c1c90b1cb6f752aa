// RunAuto: the default method. Runs every applicable published schedule and
// the list scheduler, keeps the best valid one (after a quarter of the budget
// spent tuning the list scheduler's knobs: warm-up depths, kept activations,
// offload rules), then improves it with LocalSearch for the rest of the time
// budget: from the best seed for half of
// it, then from the other seeds within 50% of the best, then (when every
// search ended at a local optimum early) from the incumbent with other draws.
// Tuning and search stop where a schedule meets the lower bound
// (opt.known_bound, or ComputeLowerBound's): nothing can end earlier. The
// seeds get half of the budget: on the clock, those not started by then are
// skipped once one has a schedule (reported "not run"; the list scheduler's
// starts first), while with opt.max_evaluations every seed runs.
//
//   SearchOptions opt;  opt.time_limit_s = 1;
//   StatusOr<AutoResult> r = RunAuto(problem, opt);
//   // r->seeds says what every method scored, r->winner which one seeded the search.
#pragma once

#include <string>
#include <vector>

#include "core/problem.h"
#include "heuristics/local_search.h"
#include "heuristics/method.h"

namespace optpipe {

struct SeedOutcome {
  std::string method;
  Status status;         // OK, not applicable, infeasible
  double objective = 0;  // when OK
};

struct AutoResult {
  Solution solution;
  std::vector<SeedOutcome> seeds;
  std::string winner;          // the seed the search started from ("list (tuned: SETTING)")
  SearchResult search;         // what the searches did together (its schedule is `solution`)
  int restarts = 0;            // searches from other seeds after the first
  int reseeds = 0;             // searches of the incumbent with other draws, when time was left
  std::string restart_winner;  // the seed of a restart that beat the first search, if any
};

// kInfeasible when no method fits the memory limit.
StatusOr<AutoResult> RunAuto(const Problem& p, const SearchOptions& opt);

}  // namespace optpipe
