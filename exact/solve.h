// Solve: the library's entry point. Every method by name (the heuristics'
// registry, `auto` with its SAT polish, `milp`), its schedule simulated and
// checked, with a proven lower bound and how the search ended: the CLI,
// the benchmarks and a trainer that links optpipe all call this.
//
//   optpipe::SolveOptions opt;  // method "auto", 1 s
//   optpipe::StatusOr<optpipe::SolveResult> r = optpipe::Solve(problem, opt);
//   if (r.ok() && r->has_schedule()) Use(r->schedule, r->objective, r->bound, r->gap);
//
// A Status error is for a call that cannot work (an unknown method, a
// problem that fails Validate, kCancelled: stopped before any schedule);
// what the solve found, a schedule or why there is none (kInfeasible,
// kNotApplicable), is the result's `termination`.
//
// Thread safety: concurrent calls are safe; they share only read-only
// tables (the method registry). Each call's searches run in a TBB arena of
// `threads` threads of its own; `log` and `on_improvement` are called from
// the solving threads, one call at a time per Solve.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/lower_bound.h"
#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"
#include "exact/device_search_bound.h"
#include "exact/order_search.h"
#include "exact/sat_search.h"

namespace optpipe {

// How a solve ended: the first reason that applies.
enum class Termination {
  kOptimal,        // the objective meets the proven bound
  kFeasible,       // a schedule; the method ran to its end (no search, or none left)
  kTimeLimit,      // a schedule; time_limit_s ended the search
  kWorkLimit,      // a schedule; the evaluation budget ended the search
  kInterrupted,    // a schedule; `stop` ended the search
  kInfeasible,     // no schedule of the method fits memory.limit: `message` says what it needs
  kNotApplicable,  // the method does not apply to this problem: `message` says why
};
const char* ToString(Termination t);

struct SolveOptions {
  std::string method = "auto";  // `MethodNames()`; "milp" for the exact solver
  double time_limit_s = 1.0;    // wall clock, for methods that search
  // A deterministic work limit (simulations) for the searching heuristics:
  // with threads = 1 the same schedule on every run and machine.
  std::optional<std::int64_t> evaluations;
  int threads = 0;  // 0: all cores
  std::uint64_t seed = 1;
  // Set from any thread (a Ctrl-C handler) to end every search as its clock
  // would: the best schedule so far comes back, termination kInterrupted.
  const std::atomic<bool>* stop = nullptr;
  // The solve's log, as a MILP solver's reads: a header (size, method,
  // limits), a row on every better schedule (*) and at least every second
  // (time, incumbent, bound, gap, who found it), the method's own lines
  // (seed scores, SAT and MILP rows), a summary; one call at a time.
  std::function<void(const std::string&)> log;
  // Every better schedule as a search finds it (simulated and valid).
  std::function<void(const Schedule&, const SimResult&)> on_improvement;
  // A schedule to start from (a previous solve's, a cached one): auto
  // searches from it when it beats its seeds, milp starts its branch and
  // bound from it; the result is never worse. Other methods ignore it.
  const Schedule* warm_start = nullptr;
  // A device search already run on the problem, with at least
  // CoreSearchOptions' budgets: every method but milp starts its bound from
  // it instead of searching again (bench runs one a problem). Null: each
  // runs its own.
  const DeviceSearchBound* devices = nullptr;
};

struct SolveStats {
  double wall_s = 0;
  std::string found_by;          // the method or component whose schedule came back
  std::int64_t evaluations = 0;  // schedules auto's local search simulated (auto, milp's seed)
  std::int64_t nodes = 0;        // milp: lp_solve's branch-and-bound nodes and the order search's
};

struct SolveResult {
  Termination termination = Termination::kFeasible;
  std::string message;  // why there is no schedule (kInfeasible, kNotApplicable)
  Schedule schedule;    // timed by `sim`; empty without a schedule
  SimResult sim;
  double objective = 0;  // sim.objective
  double bound = 0;      // a proven lower bound on every schedule's objective
  double gap = 0;        // (objective - bound) / objective
  SolveStats stats;
  bool has_schedule() const {
    return termination != Termination::kInfeasible && termination != Termination::kNotApplicable;
  }
};

StatusOr<SolveResult> Solve(const Problem& p, const SolveOptions& opt = {});

// ProveBound: the strongest lower bound optpipe proves in the time given,
// from every source: the core bounds (ComputeLowerBound), the device
// search (alone, by host link and in pairs), and then the order search
// (without offload) or the SAT probes on the time grid, all aiming at a
// schedule's objective (the one given, else the list scheduler's): a bound
// that reaches it proves that schedule optimal.
struct BoundOptions {
  double search_seconds = DeviceSearchOptions{}.time_limit_s;  // each search's clock
  const Schedule* schedule = nullptr;  // aim at it (it must be one of the problem)
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> log;
};
struct BoundResult {
  double bound = 0;  // the largest, raised to the time grain
  LowerBound core;   // device bound, critical path, memory bound
  DeviceSearchBound device_search;
  std::optional<OrderSearchResult> order;                  // where it ran
  std::optional<SatSearchResult> sat;                      // where they ran
  std::optional<double> schedule_objective, schedule_gap;  // of BoundOptions::schedule
};
StatusOr<BoundResult> ProveBound(const Problem& p, const BoundOptions& opt = {});

// The timed schedule of a result, with its termination, bound, gap and
// time: what `optpipe schedule` writes.
TimedSchedule ToTimed(const Problem& p, const SolveResult& r);

// The device search behind the bound Solve reports for a method other than
// milp: a tenth of the time limit.
DeviceSearchOptions CoreSearchOptions(const Problem& p, const SolveOptions& opt);

// `bound` raised to core's ComputeLowerBound where below it and held at
// `objective` (above it, or below it by rounding error: 1e-12 relative); the
// gap from them.
void SettleBound(const Problem& p, double objective, SolveInfo& info);

// Every method Solve accepts, one line each, and whether it applies to `p`.
struct MethodLine {
  std::string name, summary;
  Status applies;
};
std::vector<MethodLine> ListMethods(const Problem* p);

}  // namespace optpipe
