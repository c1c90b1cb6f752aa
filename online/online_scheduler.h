// OnlineScheduler: the loop of OptPipe (Li et al., "OptPipe: Memory- and
// Scheduling-Optimized Pipeline Parallelism for LLM Training", 2025, Fig. 1
// and sections 4.2-4.3) for a trainer that links optpipe.
//
// 1. Initialize: Start() returns with a schedule that fits memory, from the
//    cache (a row of this very key, re-timed and checked) or from the fast
//    heuristics (auto's seeds, no search: milliseconds).
// 2. Schedule and train: a background thread refines it (each method of
//    `methods` in turn, auto then milp by default, within `refine_seconds`,
//    warm-started from the best so far). Every schedule it finds is checked
//    (CheckSchedule) before it may be adopted, and waits: Current() changes
//    only in Advance(), which the trainer calls at an iteration boundary, and
//    only to a schedule with a lower objective.
// 3. Profile: Report() takes each iteration's measured op times. When the
//    medians of the last `drift_window` reports differ from the model by more
//    than `drift_threshold` on any stage's F, B, W or offload time, the problem
//    is rebuilt from those medians, the schedule in use is re-timed on it
//    (or, if it no longer fits memory, replaced by the fast heuristics'
//    schedule, at the next Advance whatever its objective), and refinement
//    restarts from it.
// A finished refinement stores its best schedule in the cache (when given).
// Stop() (or the destructor) ends the refinement and joins the thread: within
// the time a search takes to notice its stop token (milliseconds, but see
// exact/milp.h for what lp_solve and CaDiCaL cannot interrupt).
//
// Thread safety: every method may be called from any thread; Current() is a
// shared pointer copy under a mutex.
//
//   OnlineOptions opt;
//   opt.refine_seconds = 60;
//   auto online = OnlineScheduler::Start(estimate, opt);
//   for (int it = 0; it < iterations; ++it) {
//     (*online)->Advance();                          // a boundary: adopt the best so far
//     auto s = (*online)->Current();                 // run s->schedule, measure it
//     (*online)->Report(runtime::ProfileFromRun(...));
//   }
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"

namespace optpipe {

struct OnlineOptions {
  double refine_seconds = 30;  // each (re)solve, every method together
  std::vector<std::string> methods = {"auto", "milp"};
  int threads = 1;                // of the refinement: the trainer keeps the other cores
  std::string cache_path;         // the schedule cache (online/cache.h); empty: none
  double drift_threshold = 0.05;  // relative difference of a stage's median time
  int drift_window = 3;           // reports whose medians are compared
  // Progress lines (refinement steps, adoptions, drift, cache), from any thread.
  std::function<void(const std::string&)> log;
};

// One schedule the scheduler has handed out, numbered in the order adopted.
struct ScheduleVersion {
  int version = 0;          // 0: the initial schedule
  std::string method;       // what found it: "initial: zb-h1", "auto", "milp", "cache: milp", ...
  int problem_version = 0;  // the model it is timed on: 0 the estimate, +1 for every drift
  std::shared_ptr<const Problem> model;  // that model: run the schedule with it
  Schedule schedule;
  SimResult sim;  // on that model
  double objective = 0;
  double found_s = 0;  // seconds after Start
};

class OnlineScheduler {
 public:
  // Fails for a problem that fails Validate, or where no heuristic fits its
  // memory limit (kInfeasible, saying what it needs).
  static StatusOr<std::unique_ptr<OnlineScheduler>> Start(const Problem& estimate,
                                                          OnlineOptions opt = {});
  ~OnlineScheduler();
  OnlineScheduler(const OnlineScheduler&) = delete;
  OnlineScheduler& operator=(const OnlineScheduler&) = delete;

  // The schedule to run; the same until Advance() adopts another.
  std::shared_ptr<const ScheduleVersion> Current() const;
  // An iteration boundary: adopts the best schedule found since (a lower
  // objective on the current model, or the replacement after a drift).
  // True when Current() changed.
  bool Advance();
  // An iteration's measured times: the problem with its f, b, w (and offload)
  // replaced by what was measured (runtime/measure.h ProfileFromRun).
  void Report(const Problem& measured);

  Problem model() const;  // the problem the schedules are timed on now
  bool refining() const;  // the background thread is searching
  // Blocks until the background thread is idle (its refinement done) or
  // `seconds` pass; true when idle.
  bool WaitIdle(double seconds) const;
  void Stop();

 private:
  struct State;
  explicit OnlineScheduler(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

// The schedule a trainer can start on at once: the best of the fast
// heuristics (auto's seeds, no local search or exact step) that fits memory.
StatusOr<ScheduleVersion> InitialSchedule(const Problem& p);

}  // namespace optpipe
