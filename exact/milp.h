// SolveMilp: exact refinement of a schedule with a mixed-integer model (OptPipe
// Appendix C, tightened as in its section 4) solved by lp_solve.
//
// The model orders every pair of compute ops of a device whose order is not
// already implied, chooses which activations to offload and orders the O/R ops
// of every host link, with continuous start times and the memory rule of
// docs/FORMAT.md written exactly (exact/model.h has the formulation). A warm start
// steers the first dive of branch and bound and caps the objective, so the
// result is never worse than it; where durations share a time grain the cap
// is its largest multiple below the incumbent, and a model without schedules
// proves the incumbent optimal. Before the model, where they apply, the
// order search (exact/order_search.h, no offload) and the SAT probes on the
// time grid (exact/sat_search.h) look below the incumbent; their proofs end
// the call. Every returned schedule is re-timed by the core Simulator and
// passes CheckSchedule.
//
//   MilpOptions opt;
//   opt.time_limit_s = 10;
//   opt.log = [](const std::string& line) { std::cerr << line << "\n"; };
//   StatusOr<MilpResult> r = SolveMilp(problem, opt, &warm_start);
//   if (r.ok() && r->schedule) Use(*r->schedule, r->objective, r->bound);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"
#include "exact/sat_search.h"

namespace optpipe {

struct MilpOptions {
  // Wall-clock budget for the whole call (model building included); fractions
  // of a second are honoured.
  double time_limit_s = 10.0;
  // Set to true from any thread to stop the search; the result keeps the incumbent.
  const std::atomic<bool>* stop = nullptr;
  // Called with every schedule better than the best so far (simulated, valid;
  // one call at a time, the SAT search's from its threads).
  std::function<void(const Schedule&, const SimResult&)> on_improvement;
  // Progress lines ("t=1.20s incumbent 30 bound 27 gap 10.0% nodes 812"); the
  // library prints nothing itself.
  std::function<void(const std::string&)> log;
  // Cuts tying a device's load to the objective and to start times (valid for
  // both objectives; they lift the LP bound from "critical path" towards the
  // device bound).
  bool load_cuts = true;
  // Transitivity (triangle) cuts on the ordering binaries of each device
  // (OptPipe section 4.1.2), added while their number stays below max_triangle_cuts.
  bool triangle_cuts = false;
  std::int64_t max_triangle_cuts = 200000;
  // Fix the order of the micro-batches of every (op type, stage) (OptPipe
  // section 4.1.1). Without offload this loses no optimum: sorting each type's
  // start times per stage keeps every dependency, lane and memory count. With
  // offload it is the paper's restriction (an O/R pair must fit between the F
  // and the B of one micro-batch, which a re-labelling can break): the ordered
  // model then only finds schedules; its bounds are not reported, and once it
  // is solved (or found empty) the search goes on in the model without that
  // order, whose optimum and bounds hold for the problem.
  bool fix_microbatch_order = true;
  // Node budget per device, and per pair of devices searched together, of
  // DeviceSearchBound (exact/device_search_bound.h), whose bound joins ComputeLowerBound's:
  // reported, and a cut on the objective. It gets at most a quarter of time_limit_s; 0: not run.
  // It aims no higher than the warm start (DeviceSearchOptions::upper).
  std::int64_t device_search_nodes = 1'000'000;
  // Node budget of SearchOrders (exact/order_search.h), run before lp_solve
  // where it applies (no offload; see OrderSearchApplies): its bound joins the core
  // bounds, its schedules the incumbent, and when it proves the incumbent
  // optimal lp_solve does not run. It gets at most half of the time left; 0:
  // not run.
  std::int64_t order_search_nodes = 2'000'000;
  // Run SearchTimeIndexed (exact/sat_search.h) before lp_solve where it
  // applies (a time grain, memory amounts on a grain): its bound joins the
  // core bounds, its schedules the incumbent. It gets nine tenths of the
  // time left (on such problems it decides and finds far more than
  // lp_solve's tree), and on a large problem (SatSearchIsLarge) nineteen
  // twentieths, nine tenths of that to its neighbourhoods (there lp_solve
  // may not even end the root relaxation).
  bool sat_search = true;
  // Keeps the SAT probes' solvers from this call for a later one on the same
  // problem (see SatSession); null: this call's own.
  SatSession* sat_session = nullptr;
  // A lower bound the caller has already proven (an earlier call's `bound`):
  // it joins the core bounds, so the searches start from it. 0: none.
  double known_bound = 0;
};

enum class MilpTermination {
  kOptimal,      // the incumbent is optimal (bound == objective within the time grain)
  kTimeLimit,    // stopped by time_limit_s
  kInterrupted,  // stopped by `stop`
  kInfeasible,   // no schedule fits the memory limit
};
const char* ToString(MilpTermination t);

struct MilpStats {
  int ops = 0;                  // op start-time columns (compute + candidate O/R)
  int order_binaries = 0;       // device lane pairs left to the solver
  int pairs_fixed = 0;          // device lane pairs whose order was implied
  int offload_binaries = 0;     // one per activation that may be offloaded
  int copy_order_binaries = 0;  // host-link O/R pairs left to the solver
  int memory_binaries = 0;      // "has ended / has started by" indicators across lanes
  int columns = 0, rows = 0, nonzeros = 0;
  int triangle_cuts = 0;
  double horizon = 0;                   // objective cap the big-M values derive from
  double root_bound = 0;                // LP relaxation at the root (0 if not reached)
  std::int64_t nodes = 0;               // branch-and-bound nodes
  std::int64_t order_search_nodes = 0;  // SearchOrders' nodes (0: not run)
  int improvements = 0;                 // incumbents the solver found better than the warm start
  // Largest (simulated objective - MILP objective) over the solver's solutions:
  // <= 0 means re-timing never lost anything (always so without offload).
  double max_retime_excess = -std::numeric_limits<double>::infinity();
  double build_seconds = 0, solve_seconds = 0;
};

struct MilpResult {
  MilpTermination termination = MilpTermination::kTimeLimit;
  // The best schedule (simulated and checked); absent only when there is none:
  // infeasible, or stopped before any was found without a warm start.
  std::optional<Schedule> schedule;
  std::optional<SimResult> sim;
  double objective = 0;          // sim->objective when there is a schedule
  double bound = 0;              // max(MILP bound, core bounds); == objective when optimal
  double gap = 0;                // (objective - bound) / objective
  bool from_warm_start = false;  // the solver found nothing better than the warm start
  std::string warm_start_method;
  MilpStats stats;
};

// `warm_start` (may be null) must be a schedule of `p` that Simulate accepts.
// Without one, a sequential schedule (one micro-batch at a time) is tried.
// Errors: kInvalidArgument for an invalid problem or warm start, kInternal if
// lp_solve fails. Infeasibility and stops are results, not errors.
StatusOr<MilpResult> SolveMilp(const Problem& p, const MilpOptions& opt,
                               const Schedule* warm_start = nullptr);

// False in a build without the exact solvers (OPTPIPE_WITH_EXACT=OFF), where
// SolveMilp and WriteMilpModel return kNotApplicable saying so.
bool MilpAvailable();
inline constexpr const char* kMilpUnavailable =
    "milp is not available: optpipe was built without the exact solvers "
    "(OPTPIPE_WITH_EXACT=OFF); rebuild with lp_solve and CaDiCaL (tools/setup.sh)";

// "1953 columns (448 order, 32 offload, 448 link order, 672 memory binaries;
// 32 pairs fixed), 4968 rows": a model's size in words, for logs.
std::string ModelSize(const MilpStats& s);

// The model SolveMilp searches, built below `incumbent` (a schedule of `p`)
// and written for any MILP solver: free MPS when `path` ends in ".mps", else
// lp_solve's LP format; minimise C (exact/lp_solve_backend.cc names the
// columns). Its optimum is the problem's: the micro-batch order is fixed
// only without offload (where that loses nothing), and the objective is
// capped at the incumbent's (whose orders stay feasible) and bounded below
// by the core bounds (BestLowerBound). Errors:
// kInvalidArgument for an invalid problem or incumbent, or a file that
// cannot be written.
StatusOr<MilpStats> WriteMilpModel(const Problem& p, const Schedule& incumbent,
                                   const std::string& path);

}  // namespace optpipe
