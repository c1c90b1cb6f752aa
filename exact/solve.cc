#include "exact/solve.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>

#include "core/lower_bound.h"
#include "core/text_format.h"
#include "exact/device_search_bound.h"
#include "exact/milp.h"
#include "exact/model.h"
#include "exact/order_search.h"
#include "exact/sat_search.h"
#include "heuristics/auto_method.h"

namespace optpipe {
namespace {

// A solution, the bound the method proved, and how milp ended (Solve says
// how the others ended).
struct Solved {
  Solution solution;
  double bound = 0;
  std::optional<MilpTermination> milp;
};

constexpr const char* kMilpSummary =
    "exact: SAT probes on the time grid (CaDiCaL) where durations share a grain (on a fine "
    "grid or none, also on a coarser one, replayed), then the MILP (OptPipe App. C, "
    "tightened) on lp_solve, warm-started from the best heuristic; never worse than it, "
    "proves optimality on small problems (--time-limit)";

constexpr const char* kAutoPolish =
    "; on a time grid, half of the time to the SAT probes and their neighbourhoods below it "
    "(on a fine grid or none, on a coarser one, replayed)";

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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
                             const std::function<void(const std::string&)>& log,
                             SatSession* polish = nullptr, double* proven = nullptr) {
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

// The core bound (BestLowerBound), its device search held to a tenth of the
// time limit (cut short, it still bounds). For milp its node budget grows
// with that time too, about a million nodes a second shared by the devices
// (a search halves its budget probe by probe, so the nodes, not the clock,
// should end it); each pair of devices may take the whole of it (they run
// most promising first, in the time the devices left).
DeviceSearchOptions CoreSearch(const Problem& p, const SolveOptions& opt, bool for_milp) {
  DeviceSearchOptions search;
  search.time_limit_s = 0.1 * opt.time_limit_s;
  search.stop = opt.stop;
  if (for_milp) {
    search.max_nodes_per_device = std::max(
        search.max_nodes_per_device,
        static_cast<std::int64_t>(kSearchNodesPerSecond * search.time_limit_s / p.devices));
    search.max_nodes_per_pair =
        static_cast<std::int64_t>(kSearchNodesPerSecond * search.time_limit_s);
  }
  return search;
}

// The pairs of devices `devices` cut short, again from what they proved,
// aiming no higher than `upper` (a schedule's objective: see
// DeviceSearchOptions::upper), with milp's nodes in a twentieth of the time
// limit: enough for a pair whose least makespan is the schedule's to prove
// it optimal (where they prove nothing more, that time is lost to the
// probes). The new result
// replaces `devices`; its bound is returned, 0 where no pair was cut short or
// the problem is large (SatSearchIsLarge), whose pairs stay far below its
// schedules.
double PairsBelow(const Problem& p, const SolveOptions& opt, DeviceSearchOptions search,
                  DeviceSearchBound& devices, double upper) {
  const bool cut_short = std::any_of(devices.pair_value.begin(), devices.pair_value.end(),
                                     [](const DevicePairValue& q) { return !q.finished; });
  if (!cut_short || SatSearchIsLarge(p)) return 0;
  search.time_limit_s = 0.05 * opt.time_limit_s;
  search.max_nodes_per_pair = CoreSearch(p, opt, /*for_milp=*/true).max_nodes_per_pair;
  search.upper = upper;
  search.resume = &devices;
  DeviceSearchBound again = ComputeDeviceSearchBound(p, search);
  if (opt.log) {
    opt.log("bound: pairs of devices below " + FormatNumber(upper) + ": " + Describe(again));
  }
  devices = std::move(again);
  return AtGrain(p, devices.value);
}

SearchOptions Heuristic(const SolveOptions& opt) {
  SearchOptions o;
  o.time_limit_s = opt.time_limit_s;
  o.threads = opt.threads;
  o.seed = opt.seed;
  o.max_evaluations = opt.evaluations;
  o.stop = opt.stop;
  o.warm_start = opt.warm_start;
  o.on_improvement = opt.on_improvement;
  return o;
}

Solved FromMilp(MilpResult& r) {
  Solved out{Solution{std::move(*r.schedule), std::move(*r.sim)}, r.bound, r.termination};
  out.solution.schedule.method = "milp";
  return out;
}

// The schedules milp finds on its way, as it finds them (each better than
// the one its step started from, not always than every one before).
using Found = std::function<void(const Solution&)>;

StatusOr<Solved> SolveWithMilp(const Problem& p, const SolveOptions& opt, bool coarse = true,
                               const Found& found = nullptr);

// milp on p on a coarser grid (Coarsened) for `seconds`, every schedule it
// finds there replayed on p (Replay), the best kept: one that ends earlier
// there need not here; nothing where no grain is coarse enough or it finds
// no schedule.
std::optional<Solution> SolveCoarse(const Problem& p, const SolveOptions& opt, double objective,
                                    double seconds) {
  const std::optional<Problem> q = Coarsened(p, objective);
  if (!q) return std::nullopt;
  SolveOptions sub = opt;
  sub.time_limit_s = seconds;
  sub.log = nullptr;
  sub.devices = nullptr;         // p's device search: milp runs q's own
  std::optional<Solution> best;  // the best replay
  int replays = 0;
  StatusOr<Solved> s = SolveWithMilp(*q, sub, /*coarse=*/false, [&](const Solution& found) {
    ++replays;
    KeepReplay(p, found.schedule, found.sim, "milp", best);
  });
  if (opt.log && s.ok()) {
    opt.log("coarse: times rounded up to a grain of " + FormatNumber(TimeGrain(*q)) + ": " +
            FormatNumber(s->solution.sim.objective) + " (" + ToString(*s->milp) + "), " +
            std::to_string(replays) + " replayed, the best: " +
            (best ? FormatNumber(best->sim.objective) : std::string("none valid")));
  }
  return best;
}

StatusOr<Solved> SolveWithMilp(const Problem& p, const SolveOptions& opt, bool coarse,
                               const Found& found) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool large = SatSearchIsLarge(p);
  // The core bound first, aiming no higher than the list scheduler's
  // schedule (which a pair of devices may prove optimal at once), then auto
  // for a fiftieth of the budget, stopping where it meets that bound: where
  // the bound is the optimum auto often finds it at once, long before the
  // quick pass below would.
  std::optional<Solution> heuristic;  // the best heuristic schedule so far
  if (StatusOr<Solution> list = RunMethod(p, "list"); list.ok()) {
    heuristic = std::move(*list);
    if (found) found(*heuristic);
  }
  if (opt.warm_start) {
    StatusOr<Solution> warm = Certify(p, *opt.warm_start, "warm start");
    if (!warm.ok()) return InvalidArgument("warm_start: " + warm.status().message());
    if (!heuristic || warm->sim.objective < heuristic->sim.objective) heuristic = std::move(*warm);
  }
  DeviceSearchOptions core = CoreSearch(p, opt, /*for_milp=*/true);
  if (heuristic) core.upper = heuristic->sim.objective;
  DeviceSearchBound devices = ComputeDeviceSearchBound(p, core);
  double core_bound = BestLowerBound(p, devices);
  if (opt.log && devices.nodes > 0) {
    opt.log("bound: device search " + Describe(devices) + ", core bound " +
            FormatNumber(core_bound));
  }
  const auto run_auto = [&](double seconds) {
    SearchOptions search = Heuristic(opt);
    search.time_limit_s = seconds;
    if (!opt.evaluations) search.known_bound = core_bound;
    StatusOr<Solution> r = SolveAuto(p, search, opt.log);
    if (r.ok() && (!heuristic || r->sim.objective < heuristic->sim.objective)) {
      heuristic = std::move(*r);
      if (found) found(*heuristic);
    }
  };
  const auto proven = [&] {
    return heuristic && heuristic->sim.objective <= core_bound + 1e-9 * core_bound;
  };
  if (!opt.evaluations && !proven()) run_auto(opt.time_limit_s / 50);
  // The pairs of devices cut short search again below a better schedule, on
  // a fine grid (kFineSteps) at once: there the quick pass's probes rarely
  // decide, elsewhere they often do, in less time. Once a resume raises
  // nothing, the next is skipped.
  double aimed = core.upper;  // the objective the pairs last aimed at
  bool pairs_raise = true;    // the last resume raised the bound
  const auto pairs_below = [&](double objective) {
    if (proven() || objective >= aimed || !pairs_raise) return;
    const double raised = PairsBelow(p, opt, core, devices, objective);
    pairs_raise = raised > core_bound;
    core_bound = std::max(core_bound, raised);
    aimed = objective;
  };
  const double grain = TimeGrain(p);
  const auto fine = [&] {
    return heuristic && grain > 0 && heuristic->sim.objective - core_bound > kFineSteps * grain;
  };
  if (fine()) pairs_below(heuristic->sim.objective);
  // On a fine grid the SAT probes rarely decide, while on a grid of a few
  // hundred columns they do: the problem with its times rounded up to a
  // coarser grain is solved by milp for a quarter of the time and its
  // schedule replayed, which ends no later than there and often far earlier
  // (docs/exact.md). Likewise where the times share no grain at all
  // (measured ones), where no probe applies. Not where the order search
  // applies (no offload), which needs no grid.
  if (coarse && !OrderSearchApplies(p) && (fine() || (heuristic && grain == 0 && !proven()))) {
    std::optional<Solution> c = SolveCoarse(p, opt, heuristic->sim.objective, opt.time_limit_s / 4);
    if (c && c->sim.objective < heuristic->sim.objective) {
      heuristic = std::move(*c);
      pairs_below(heuristic->sim.objective);
    }
  }
  // The order search (without offload) and the SAT probes (on a time grid)
  // often prove a quick schedule optimal at once: a tenth of the budget from
  // the best so far. When they do not, what they proved and found carries
  // on. Not where only the SAT probes apply and the problem is large
  // (SatSearchIsLarge): there they prove nothing in a tenth of the budget,
  // and their schedule was worse than auto's on the 8x16 problems of the
  // benchmark set.
  std::optional<MilpResult> quick;
  SatSession sat;  // the SAT probes' solvers, encoded once for both passes
  if (heuristic && !proven() && (OrderSearchApplies(p) || (SatSearchApplies(p) && !large))) {
    MilpOptions qo;
    qo.time_limit_s = opt.time_limit_s / 10;
    qo.stop = opt.stop;
    qo.log = opt.log;
    qo.known_bound = core_bound;
    qo.device_search_nodes = 0;  // in core_bound already
    qo.sat_session = &sat;
    if (found) qo.on_improvement = [&](const Schedule& s, const SimResult& r) { found({s, r}); };
    StatusOr<MilpResult> r = SolveMilp(p, qo, &heuristic->schedule);
    if (r.ok() && r->schedule && r->termination == MilpTermination::kOptimal) {
      return FromMilp(*r);
    }
    if (r.ok() && r->schedule) {
      core_bound = std::max(core_bound, r->bound);
      quick = std::move(*r);
    }
  }
  // Warm start: auto with a fifth of the budget (or the quick pass's schedule,
  // if better), stopping where it meets the core bound. On a large problem a
  // tenth: its local search and list tuning find little more with more time
  // there, so the time goes to the SAT neighbourhoods. Not where the quick
  // pass left a few grains open (kFineSteps): there the probes decide in
  // time, where auto's local search finds little.
  const bool few_grains =
      quick && !large && grain > 0 && quick->objective - core_bound <= kFineSteps * grain;
  if (!proven() && !few_grains) run_auto(opt.time_limit_s / (large ? 10 : 5));
  const Schedule* warm = heuristic ? &heuristic->schedule : nullptr;
  double warm_objective = heuristic ? heuristic->sim.objective : 0.0;
  if (quick && (!warm || quick->objective < warm_objective)) {
    warm = &*quick->schedule;
    warm_objective = quick->objective;
  }
  if (warm) pairs_below(warm_objective);
  MilpOptions mo;
  mo.time_limit_s = std::max(0.0, opt.time_limit_s - Since(t0));
  mo.stop = opt.stop;
  mo.log = opt.log;
  mo.known_bound = core_bound;
  mo.device_search_nodes = 0;  // in core_bound already
  mo.sat_session = &sat;
  if (found) mo.on_improvement = [&](const Schedule& s, const SimResult& r) { found({s, r}); };
  StatusOr<MilpResult> r = SolveMilp(p, mo, warm);
  if (!r.ok()) return r.status();
  if (!r->schedule) {
    if (r->termination == MilpTermination::kInfeasible) {
      return Infeasible("milp: no schedule fits the memory limit (the model is infeasible)");
    }
    return Infeasible(
        "milp: no heuristic fits the memory limit and the MILP found no schedule in " +
        std::to_string(opt.time_limit_s) + " s (" + ToString(r->termination) + ")");
  }
  return FromMilp(*r);
}

// One method by name, its bound and what it knows of how it ended.
StatusOr<Solved> SolveMethod(const Problem& p, const std::string& method, const SolveOptions& opt) {
  if (method == "milp") {
    if (!MilpAvailable()) return Status(StatusCode::kNotApplicable, kMilpUnavailable);
    // Improvements as milp's steps find them, each announced only where it
    // beats every one before.
    double best = std::numeric_limits<double>::infinity();
    const Found announce = [&](const Solution& s) {
      if (!opt.on_improvement || s.sim.objective >= best) return;
      best = s.sim.objective;
      opt.on_improvement(s.schedule, s.sim);
    };
    SolveOptions quiet = opt;
    quiet.on_improvement = nullptr;
    return SolveWithMilp(p, quiet, /*coarse=*/true, announce);
  }
  const auto t0 = std::chrono::steady_clock::now();
  // The bound `bound` and `bench` report, the device search and the order
  // search (or where that does not apply, the SAT probes), below the
  // schedule's makespan, each held to a tenth of the time limit (cut short,
  // they still bound). The first runs before the method:
  // auto stops where it meets it (not with an evaluation budget, which must
  // give the same schedule on every run: a search cut short by the clock
  // bounds less on a slower machine).
  const DeviceSearchOptions core = CoreSearch(p, opt, /*for_milp=*/false);
  DeviceSearchBound devices = opt.devices ? *opt.devices : ComputeDeviceSearchBound(p, core);
  double bound = BestLowerBound(p, devices);
  SearchOptions search = Heuristic(opt);
  search.time_limit_s = std::max(0.0, opt.time_limit_s - Since(t0));
  if (!opt.evaluations) search.known_bound = bound;
  SatSession sat_session;  // auto's polish and the bound's probes
  double polished = 0;     // what the polish's probes proved
  StatusOr<Solution> s = method == "auto" ? SolveAuto(p, search, opt.log, &sat_session, &polished)
                                          : RunMethod(p, method, search);
  if (!s.ok()) return s.status();
  bound = std::max({bound, polished, PairsBelow(p, opt, core, devices, s->sim.objective)});
  Solved out{std::move(*s), bound, std::nullopt};
  if (OrderSearchApplies(p)) {
    OrderSearchOptions order;
    order.time_limit_s = 0.1 * opt.time_limit_s;
    order.stop = opt.stop;
    bound = std::max(bound, SearchOrders(p, bound, out.solution.sim.objective, order).bound);
  } else if (SatSearchApplies(p)) {
    SatSearchOptions sat;
    sat.time_limit_s = 0.1 * opt.time_limit_s;
    sat.stop = opt.stop;
    sat.hint = &out.solution.sim;
    sat.session = &sat_session;
    if (method == "auto") sat.solvers = 1;  // the polish's solver, when it ran
    bound = std::max(bound, SearchTimeIndexed(p, bound, out.solution.sim.objective, sat).bound);
  }
  out.bound = bound;
  return out;
}

Termination FromMilp(MilpTermination t) {
  switch (t) {
    case MilpTermination::kOptimal:
      return Termination::kOptimal;
    case MilpTermination::kInterrupted:
      return Termination::kInterrupted;
    case MilpTermination::kInfeasible:
      return Termination::kInfeasible;
    case MilpTermination::kTimeLimit:
      break;
  }
  return Termination::kTimeLimit;
}

}  // namespace

const char* ToString(Termination t) {
  switch (t) {
    case Termination::kOptimal:
      return "optimal";
    case Termination::kFeasible:
      return "feasible";
    case Termination::kTimeLimit:
      return "time_limit";
    case Termination::kWorkLimit:
      return "work_limit";
    case Termination::kInterrupted:
      return "interrupted";
    case Termination::kInfeasible:
      return "infeasible";
    case Termination::kNotApplicable:
      return "not_applicable";
  }
  return "unknown";
}

StatusOr<SolveResult> Solve(const Problem& p, const SolveOptions& opt) {
  const MethodInfo* info = FindMethod(opt.method);
  if (!info && opt.method != "milp") {
    return InvalidArgument("method: unknown method '" + opt.method +
                           "'; `optpipe methods` lists them");
  }
  if (Status st = Validate(p); !st.ok()) return st;
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<Solved> solved = SolveMethod(p, opt.method, opt);
  SolveResult r;
  r.stats.wall_s = Since(t0);
  const bool stopped = opt.stop && opt.stop->load();
  if (!solved.ok()) {
    // Stopped before any schedule: cancelled, unless the call was bad (a warm start
    // of another problem), which no stop explains.
    const StatusCode code = solved.status().code();
    if (stopped && code != StatusCode::kInvalidArgument) {
      return Cancelled(solved.status().message());
    }
    if (code != StatusCode::kInfeasible && code != StatusCode::kNotApplicable) {
      return solved.status();
    }
    r.termination =
        code == StatusCode::kInfeasible ? Termination::kInfeasible : Termination::kNotApplicable;
    r.message = solved.status().message();
    return r;
  }
  Solution& sol = solved->solution;
  SolveInfo settled;
  settled.bound = solved->bound;
  SettleBound(p, sol.sim.objective, settled);  // at least core's bound, at most the objective
  r.objective = sol.sim.objective;
  r.bound = *settled.bound;
  r.gap = *settled.gap;
  r.stats.found_by = sol.schedule.method;
  if (solved->milp) {
    r.termination = FromMilp(*solved->milp);
  } else if (stopped) {
    r.termination = Termination::kInterrupted;
  } else if (r.gap <= 0) {
    r.termination = Termination::kOptimal;
  } else if (info->search) {
    r.termination = opt.evaluations ? Termination::kWorkLimit : Termination::kTimeLimit;
  } else {
    r.termination = Termination::kFeasible;
  }
  r.schedule = std::move(sol.schedule);
  r.sim = std::move(sol.sim);
  return r;
}

TimedSchedule ToTimed(const Problem& p, const SolveResult& r) {
  TimedSchedule t = ToTimed(p, r.schedule, r.sim);
  t.info.termination = ToString(r.termination);
  t.info.bound = r.bound;
  t.info.gap = r.gap;
  t.info.solve_seconds = r.stats.wall_s;
  return t;
}

StatusOr<BoundResult> ProveBound(const Problem& p, const BoundOptions& opt) {
  if (Status st = Validate(p); !st.ok()) return st;
  const auto log = [&](const std::string& line) {
    if (opt.log) opt.log(line);
  };
  // The schedule given, simulated: its objective is an upper end.
  std::optional<SimResult> given;
  if (opt.schedule) {
    StatusOr<SimResult> sim = Simulate(p, *opt.schedule);
    if (!sim.ok())
      return InvalidArgument("schedule: not one of this problem: " + sim.status().message());
    given = std::move(*sim);
  }
  BoundResult r;
  r.core = ComputeLowerBound(p);
  DeviceSearchOptions so;
  so.time_limit_s = opt.search_seconds;
  so.stop = opt.stop;
  // kSearchNodesPerSecond, as milp gives it (at least the defaults): the
  // clock, not the nodes, ends a search given more time.
  so.max_nodes_per_device =
      std::max(so.max_nodes_per_device,
               static_cast<std::int64_t>(kSearchNodesPerSecond * opt.search_seconds / p.devices));
  so.max_nodes_per_pair = std::max(
      so.max_nodes_per_pair, static_cast<std::int64_t>(kSearchNodesPerSecond * opt.search_seconds));
  // Every search aims at the schedule given, or else the list scheduler's.
  std::optional<Solution> list;
  if (!given) {
    if (StatusOr<Solution> l = RunMethod(p, "list"); l.ok()) list = std::move(*l);
  }
  const SimResult* hint = given ? &*given : list ? &list->sim : nullptr;
  if (hint) so.upper = hint->objective;
  r.device_search = ComputeDeviceSearchBound(p, so);
  const DeviceSearchBound& search = r.device_search;
  r.bound = AtGrain(p, std::max(r.core.value, search.value));
  if (search.nodes > 0) {  // it ran (memory limit, makespan)
    std::string source;    // a link budget or a pair above every device alone
    double from = *std::max_element(search.device_value.begin(), search.device_value.end());
    for (std::size_t l = 0; l < search.link_value.size(); ++l) {
      if (search.link_value[l] > from && search.link_value[l] >= search.value) {
        source = ", from the round trips on host link " + std::to_string(l);
        from = search.link_value[l];
      }
    }
    for (const DevicePairValue& q : search.pair_value) {
      if (q.value > from && q.value >= search.value) {
        source = ", from devices " + std::to_string(q.devices[0]) + " and " +
                 std::to_string(q.devices[1]) + " together";
        from = q.value;
      }
    }
    log("device search bound " + Describe(search, source));
  }
  const bool ordered = OrderSearchApplies(p);
  if ((ordered || SatSearchApplies(p)) && !(given && r.bound >= given->objective)) {
    const double above = hint ? hint->objective : milp::SerialHorizon(p);
    log(std::string(ordered ? "order search" : "SAT probes") + " below " + FormatNumber(above) +
        (given  ? " (the schedule given)"
         : list ? " (the list scheduler's schedule)"
                : " (all ops in series)"));
    if (ordered) {
      OrderSearchOptions os;
      os.time_limit_s = opt.search_seconds;
      os.stop = opt.stop;
      os.log = opt.log;
      r.order = SearchOrders(p, r.bound, above, os);
      r.bound = std::max(r.bound, r.order->bound);
    } else {
      SatSearchOptions ss;
      ss.time_limit_s = opt.search_seconds;
      ss.stop = opt.stop;
      ss.log = opt.log;
      ss.hint = hint;
      r.sat = SearchTimeIndexed(p, r.bound, above, ss);
      r.bound = std::max(r.bound, r.sat->bound);
    }
  }
  if (given) {
    r.bound = std::min(r.bound, given->objective);  // above it only by rounding
    r.schedule_objective = given->objective;
    r.schedule_gap = given->objective > 0 ? (given->objective - r.bound) / given->objective : 0.0;
  }
  return r;
}

void SettleBound(const Problem& p, double objective, SolveInfo& info) {
  const double bound =
      std::min(std::max(info.bound.value_or(0.0), ComputeLowerBound(p).value), objective);
  info.bound = bound;
  info.gap = objective > 0 ? (objective - bound) / objective : 0.0;
}

DeviceSearchOptions CoreSearchOptions(const Problem& p, const SolveOptions& opt) {
  return CoreSearch(p, opt, /*for_milp=*/false);
}

std::vector<MethodLine> ListMethods(const Problem* p) {
  std::vector<MethodLine> out;
  for (const MethodInfo& m : Methods()) {
    out.push_back({m.name, m.summary, p ? m.applicable(*p) : OkStatus()});
    if (m.name == "auto") out.back().summary += kAutoPolish;
  }
  out.push_back(
      {"milp", kMilpSummary,
       MilpAvailable() ? OkStatus() : Status(StatusCode::kNotApplicable, kMilpUnavailable)});
  return out;
}

}  // namespace optpipe
