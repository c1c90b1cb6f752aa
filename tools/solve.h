// Solve: every method by name, the heuristics' registry and the methods the
// tools layer composes from heuristics and exact/ (auto with its SAT polish,
// milp), simulated and checked, with what each knows of its bound. The CLI's
// schedule, bench and plan commands and the quality report run methods
// through it.
//
//   SolveOptions opt;  opt.time_limit_s = 1;
//   StatusOr<Solved> s = SolveDetailed(problem, "auto", opt);
//   // s->solution: schedule and simulation; s->info: bound, gap, termination
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/device_search_bound.h"
#include "core/problem.h"
#include "core/schedule.h"
#include "core/status.h"
#include "heuristics/method.h"

namespace optpipe::cli {

// Options every way of solving shares (flags map onto these).
struct SolveOptions {
  double time_limit_s = 1.0;  // wall-clock budget for methods that search
  // Searching heuristics (auto, list, po-keep, ...): threads (0: all), the
  // random seed, and a budget of simulations that replaces the clock.
  int threads = 0;
  std::uint64_t seed = 1;
  std::optional<std::int64_t> evaluations;
  // Progress lines of methods that search (milp); none when empty.
  std::function<void(const std::string&)> log;
  // A device search already run on the problem, with at least
  // CoreSearchOptions' budgets: every method but milp starts its bound from
  // it instead of searching again (bench runs one a problem for all its
  // methods). Null: each runs its own.
  const DeviceSearchBound* devices = nullptr;
  // Set from any thread (a Ctrl-C handler) to end every search as its clock
  // would: the method returns its best so far, termination "interrupted".
  const std::atomic<bool>* stop = nullptr;
};

// The device search behind the bound SolveDetailed reports for a method
// other than milp: a tenth of the time limit.
DeviceSearchOptions CoreSearchOptions(const Problem& p, const SolveOptions& opt);

// A solution and what the method knows about it: termination, bound, gap and
// time (SolveInfo; the bound is at least core's ComputeLowerBound).
struct Solved {
  Solution solution;
  SolveInfo info;
};

// `info`'s bound raised to core's ComputeLowerBound where below it and held
// at `objective` (above it only by rounding: r48-1f's proven 42.09 had a gap
// of -3e-16), and its gap from them.
void SettleBound(const Problem& p, double objective, SolveInfo& info);

// Every method the CLI can run: the heuristics registry plus the composite and
// exact methods the tools layer wires together. The result is simulated and checked.
StatusOr<Solution> Solve(const Problem& p, const std::string& method, const SolveOptions& opt);
StatusOr<Solved> SolveDetailed(const Problem& p, const std::string& method,
                               const SolveOptions& opt);
// Method names Solve accepts, with one line each, and their applicability.
struct MethodLine {
  std::string name, summary;
  Status applies;
};
std::vector<MethodLine> ListMethods(const Problem* p);

}  // namespace optpipe::cli
