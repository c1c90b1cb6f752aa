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
#include "exact/solve_internal.h"
#include "exact/solve_log.h"
#include "heuristics/auto_method.h"

namespace optpipe {
namespace {

using namespace solve_internal;

constexpr const char* kMilpSummary =
    "exact: SAT probes on the time grid (CaDiCaL) where durations share a grain (on a fine "
    "grid or none, also on a coarser one, replayed), then the MILP (OptPipe App. C, "
    "tightened) on lp_solve, warm-started from the best heuristic; never worse than it, "
    "proves optimality on small problems (--time-limit)";

constexpr const char* kAutoPolish =
    "; on a time grid, half of the time to the SAT probes and their neighbourhoods below it "
    "(on a fine grid or none, on a coarser one, replayed)";

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
  std::int64_t evaluations = 0;
  StatusOr<Solution> s = method == "auto"
                             ? SolveAuto(p, search, opt.log, &sat_session, &polished, &evaluations)
                             : RunMethod(p, method, search);
  if (!s.ok()) return s.status();
  bound = std::max({bound, polished, PairsBelow(p, opt, core, devices, s->sim.objective)});
  Solved out{std::move(*s), bound, std::nullopt};
  out.evaluations = evaluations;
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

namespace {
StatusOr<SolveResult> Finish(const Problem& p, const SolveOptions& opt, const MethodInfo* info,
                             StatusOr<Solved> solved, std::chrono::steady_clock::time_point t0);
}  // namespace

StatusOr<SolveResult> Solve(const Problem& p, const SolveOptions& opt) {
  const MethodInfo* info = FindMethod(opt.method);
  if (!info && opt.method != "milp") {
    return InvalidArgument("method: unknown method '" + opt.method +
                           "'; `optpipe methods` lists them");
  }
  if (Status st = Validate(p); !st.ok()) return st;
  const auto t0 = std::chrono::steady_clock::now();
  SolveLog log(p, opt);
  SolveOptions inner = opt;
  if (opt.log) {
    inner.log = log.sink();
    inner.on_improvement = [&](const Schedule& s, const SimResult& sim) {
      log.Improved(sim.objective, s.method);
      if (opt.on_improvement) opt.on_improvement(s, sim);
    };
  }
  StatusOr<SolveResult> r = Finish(p, opt, info, SolveMethod(p, opt.method, inner), t0);
  if (r.ok()) log.Summary(*r);
  return r;
}

namespace {

// The result of a method's solve: its bound settled, how it ended.
StatusOr<SolveResult> Finish(const Problem& p, const SolveOptions& opt, const MethodInfo* info,
                             StatusOr<Solved> solved, std::chrono::steady_clock::time_point t0) {
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
  r.stats.evaluations = solved->evaluations;
  r.stats.nodes = solved->nodes;
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

}  // namespace

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
  double bound =
      std::min(std::max(info.bound.value_or(0.0), ComputeLowerBound(p).value), objective);
  // A bound that differs from the objective only by rounding (the same sums
  // added in another order) meets it: the schedule is optimal.
  if (objective - bound <= 1e-12 * std::max(1.0, std::abs(objective))) bound = objective;
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
