// auto's composite: the heuristics (RunAuto), then on a time grid the SAT
// probes and their neighbourhoods below its schedule, on a coarser grid
// where the problem's is fine (replayed).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>

#include "core/lower_bound.h"
#include "core/text_format.h"
#include "exact/model.h"
#include "exact/order_search.h"
#include "exact/solve_internal.h"
#include "heuristics/auto_method.h"

namespace optpipe::solve_internal {

// The share of auto's time limit its heuristics get where the SAT polish
// follows them, and the size of an encoding (its lanes' literals, about 20
// million encoded a second) the polish takes on per second of its time: it
// should leave itself half of that time to search.
constexpr double kHeuristicShare = 0.5;
constexpr double kPolishLiteralsPerSecond = 1e7;

// A time grid's columns that a coarse pass aims at.
constexpr double kCoarseColumns = 512;

// p with its times rounded up (RoundedUp) to the finest of kGrains coarser
// than p's grain with at most kCoarseColumns columns up to `objective`, and
// where its memory amounts share no grain the probes can use, those too (to
// the finest grain on which they apply); nothing where no grain is coarse
// enough. A schedule of it, replayed (Replay), is one of p that ends no later.
std::optional<Problem> Coarsened(const Problem& p, double objective) {
  const double fine = TimeGrain(p);
  double coarse = 0;
  for (double g : kGrains) {
    if (g > fine && objective / g <= kCoarseColumns) coarse = g;
  }
  if (coarse == 0) return std::nullopt;
  Problem q = RoundedUp(p, coarse);
  if (q.memory_limit && !SatSearchApplies(q)) {
    for (auto g = kGrains.rbegin(); g != kGrains.rend(); ++g) {
      if (Problem r = RoundedUp(p, coarse, *g); SatSearchApplies(r)) return r;
    }
  }
  return q;
}

// A schedule of Coarsened(p), run as `run`, replayed (Replay) and certified
// on p as `method`'s, in `best` where it ends earlier than best does.
void KeepReplay(const Problem& p, const Schedule& s, const SimResult& run,
                const std::string& method, std::optional<Solution>& best) {
  StatusOr<Schedule> r = Replay(p, s, run.start);
  StatusOr<Solution> c = r.ok() ? Certify(p, *r, method) : r.status();
  if (c.ok() && (!best || c->sim.objective < best->sim.objective)) best = std::move(*c);
}

// auto, telling its story through `log`: what every seed scored, which won,
// what tuning and search added (and in `proven`, what the polish proved).
// With a SatSession, on a time grid (and on the clock, where a probe is small
// enough to encode in time), the heuristics get half of the time and the SAT
// probes below their schedule the rest, its
// neighbourhoods where the whole problem is too hard (exact/sat_search.h): an
// exact solver as a large neighbourhood search, which proves nothing here
// but finds what moves of single ops do not (docs/exact.md). On a fine grid
// (kFineSteps), where a probe rarely decides, or on none (measured times),
// the polish runs on the problem coarsened (Coarsened), from the schedule's
// orders there, and its schedules are replayed; it proves nothing there.
StatusOr<Solution> SolveAuto(const Problem& p, const SearchOptions& search,
                             const std::function<void(const std::string&)>& log, SatSession* polish,
                             double* proven, std::int64_t* evaluations) {
  const auto t0 = std::chrono::steady_clock::now();
  // Where a probe near the bound would take most of the polish's time to
  // encode, the polish does not run on `x`.
  const auto fits = [&](const Problem& x) {
    return SatSearchApplies(x) &&
           SatLaneLiterals(x, 1.25 * search.known_bound) <=
               kPolishLiteralsPerSecond * (1 - kHeuristicShare) * search.time_limit_s;
  };
  // Not in the deterministic mode, nor without a bound, nor where neither the
  // problem nor a coarser one takes it.
  if (polish && (search.max_evaluations || search.known_bound <= 0)) polish = nullptr;
  if (polish && !fits(p)) {
    const std::optional<Problem> q = Coarsened(p, 1.25 * search.known_bound);
    if (!q || !fits(*q)) polish = nullptr;
  }
  SearchOptions heuristics = search;
  if (polish) heuristics.time_limit_s *= kHeuristicShare;
  StatusOr<AutoResult> r = RunAuto(p, heuristics);
  if (!r.ok()) return r.status();
  if (evaluations) *evaluations += r->search.evaluations;
  if (log) {
    for (const SeedOutcome& s : r->seeds) {
      std::ostringstream line;
      line << "  " << s.method << std::string(s.method.size() < 11 ? 11 - s.method.size() : 1, ' ');
      if (s.status.ok()) {
        line << s.objective;
      } else {
        std::string why = s.status.message();
        if (why.size() > 90) why = why.substr(0, 87) + "...";
        line << "-  (" << why << ")";
      }
      log(line.str());
    }
    const SearchResult& sr = r->search;
    std::ostringstream line;
    line << "auto: best seed " << r->winner << ", local search " << sr.start_objective << " -> "
         << sr.sim.objective << " (" << sr.improvements << " improvements, " << sr.evaluations
         << " evaluations in " << sr.seconds << " s, stopped: " << ToString(sr.stop);
    if (r->restarts > 0) {
      line << "; " << r->restarts << " restarts from other seeds"
           << (r->restart_winner.empty() ? "" : ", best from " + r->restart_winner);
    }
    if (r->reseeds > 0) line << "; " << r->reseeds << " more searches with other draws";
    line << ")";
    log(line.str());
  }
  Solution& best = r->solution;
  const double objective = best.sim.objective;
  const double left = search.time_limit_s - Since(t0);
  const double bound = AtGrain(p, search.known_bound);
  if (!polish || objective <= bound + 1e-9 * std::max(1.0, objective) || left <= 0) {
    return std::move(best);
  }
  // The problem the probes run on, and the schedule they start from there:
  // a coarser one on a fine grid, on none, or where p's encoding is too large.
  const double grain = TimeGrain(p);
  std::optional<Problem> coarse;
  std::optional<Solution> start;
  if (grain == 0 || objective - bound > kFineSteps * grain || !fits(p)) {
    coarse = Coarsened(p, objective);
    if (coarse && fits(*coarse)) {
      StatusOr<Solution> s = Certify(*coarse, best.schedule, "auto");
      if (!s.ok()) s = RunMethod(*coarse, "list");
      if (s.ok()) start = std::move(*s);
    }
    if (!start) coarse.reset();
  }
  if (!coarse && !fits(p)) {
    if (log) {
      log("auto: no SAT polish: neither its schedule nor the list scheduler's fits the problem "
          "with its times and memory rounded to a coarser grid");
    }
    return std::move(best);
  }
  const Problem& on = coarse ? *coarse : p;
  const SimResult& from = start ? start->sim : best.sim;
  SatSession coarse_session;  // the caller's serves p
  SatSearchOptions sat;
  sat.time_limit_s = left;
  sat.stop = search.stop;
  sat.hint = &from;
  // One solver, the one the hint guides: two would race for the first
  // probe, but take twice the memory and, freed, their time.
  sat.solvers = 1;
  sat.session = coarse ? &coarse_session : polish;
  sat.neighbourhood_share = 0.5;
  // On the coarse problem every schedule found is replayed, the best kept:
  // one that ends earlier there need not here.
  std::optional<Solution> found;  // the best schedule of p the polish found
  int replays = 0;
  if (coarse) {
    sat.on_schedule = [&](const Schedule& s, const SimResult& run) {
      ++replays;
      KeepReplay(p, s, run, "auto", found);
    };
  }
  const SatSearchResult sr =
      SearchTimeIndexed(on, AtGrain(on, search.known_bound), from.objective, sat);
  if (proven && !coarse) *proven = sr.bound;
  if (sr.schedule && !coarse) {
    StatusOr<Solution> c = Certify(p, *sr.schedule, "auto");
    if (!c.ok()) return c.status();
    found = std::move(*c);
  }
  if (log) {
    std::ostringstream line;
    line << "auto: SAT below it ";
    if (coarse) line << "(times rounded up to a grain of " << TimeGrain(*coarse) << ") ";
    line << from.objective << " -> " << sr.best;
    if (coarse && replays > 0) {
      line << ", " << replays << " replayed, the best "
           << (found ? FormatNumber(found->sim.objective) : std::string("none valid"));
    }
    line << " (" << sr.probes << " probes, " << sr.neighbourhood_schedules
         << " schedules from neighbourhoods, " << FormatNumber(std::round(Since(t0) * 100) / 100)
         << " s in all)";
    log(line.str());
  }
  if (!found || found->sim.objective >= objective) return std::move(best);
  return std::move(*found);
}

}  // namespace optpipe::solve_internal
