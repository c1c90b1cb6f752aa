// Internal to the facade (exact/solve.cc): the composite steps behind
// `auto` (the heuristics, then the SAT polish: exact/solve_auto.cc) and
// `milp` (the probes, a coarse pass, the MILP: exact/solve_milp.cc), and
// what they share with Solve.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "core/problem.h"
#include "core/status.h"
#include "exact/device_search_bound.h"
#include "exact/milp.h"
#include "exact/sat_search.h"
#include "exact/solve.h"
#include "heuristics/method.h"

namespace optpipe::solve_internal {

// A solution, the bound the method proved, and how milp ended (Solve says
// how the others ended).
struct Solved {
  Solution solution;
  double bound = 0;
  std::optional<MilpTermination> milp;
  std::int64_t evaluations = 0, nodes = 0;  // SolveStats'
};

inline double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// exact/solve_auto.cc
std::optional<Problem> Coarsened(const Problem& p, double objective);
void KeepReplay(const Problem& p, const Schedule& s, const SimResult& run,
                const std::string& method, std::optional<Solution>& best);
// auto, telling its story through `log`; with a SatSession, the SAT polish
// too (what it proved in `proven`).
StatusOr<Solution> SolveAuto(const Problem& p, const SearchOptions& search,
                             const std::function<void(const std::string&)>& log,
                             SatSession* polish = nullptr, double* proven = nullptr,
                             std::int64_t* evaluations = nullptr);

// exact/solve_milp.cc
DeviceSearchOptions CoreSearch(const Problem& p, const SolveOptions& opt, bool for_milp);
double PairsBelow(const Problem& p, const SolveOptions& opt, DeviceSearchOptions search,
                  DeviceSearchBound& devices, double upper);
SearchOptions Heuristic(const SolveOptions& opt);
// The schedules milp finds on its way, as it finds them (each better than
// the one its step started from, not always than every one before).
using Found = std::function<void(const Solution&)>;
StatusOr<Solved> SolveWithMilp(const Problem& p, const SolveOptions& opt, bool coarse = true,
                               const Found& found = nullptr);

}  // namespace optpipe::solve_internal
