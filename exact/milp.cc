#include "exact/milp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>

#include "core/checker.h"
#include "core/lower_bound.h"
#include "core/text_format.h"
#include "exact/device_search_bound.h"
#include "exact/lp_solve_backend.h"
#include "exact/model.h"
#include "exact/order_search.h"
#include "exact/sat_search.h"

namespace optpipe {

const char* ToString(MilpTermination t) {
  switch (t) {
    case MilpTermination::kOptimal:
      return "optimal";
    case MilpTermination::kTimeLimit:
      return "time_limit";
    case MilpTermination::kInterrupted:
      return "interrupted";
    case MilpTermination::kInfeasible:
      return "infeasible";
  }
  return "unknown";
}

namespace {

using Clock = std::chrono::steady_clock;

// One micro-batch at a time through the pipeline and back: the schedule of
// least memory (OptPipe 4.1.3), a warm start of last resort.
Schedule SequentialSchedule(const Problem& p) {
  Schedule s = Schedule::Empty(p, "sequential");
  for (int m = 0; m < p.microbatches; ++m) {
    for (int st = 0; st < p.stages(); ++st)
      s.compute[p.stage_device[st]].push_back({OpType::kF, st, m});
    for (int st = p.stages() - 1; st >= 0; --st) {
      auto& lane = s.compute[p.stage_device[st]];
      lane.push_back({OpType::kB, st, m});
      if (p.split_backward) lane.push_back({OpType::kW, st, m});
    }
  }
  return s;
}

void CountModel(const milp::Model& model, MilpStats& stats) {
  stats.ops = static_cast<int>(model.ops.size());
  stats.order_binaries = model.order_binaries;
  stats.pairs_fixed = model.pairs_fixed;
  stats.offload_binaries = model.offload_binaries;
  stats.copy_order_binaries = model.copy_order_binaries;
  stats.memory_binaries = model.memory_binaries;
  stats.triangle_cuts = model.triangle_cuts;
  stats.columns = static_cast<int>(model.cols.size());
  stats.rows = static_cast<int>(model.rows.size());
  stats.nonzeros = static_cast<int>(model.nonzeros());
}

double Gap(double objective, double bound) {
  return objective > 0 ? std::max(0.0, (objective - bound) / objective) : 0.0;
}

}  // namespace

StatusOr<MilpResult> SolveMilp(const Problem& p, const MilpOptions& opt,
                               const Schedule* warm_start) {
  const Clock::time_point t0 = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  if (Status st = Validate(p); !st.ok()) return st;
  if (!MilpAvailable()) return Status(StatusCode::kNotApplicable, kMilpUnavailable);
  if (!(opt.time_limit_s >= 0) || !std::isfinite(opt.time_limit_s)) {
    return InvalidArgument("time_limit_s: must be a finite number >= 0");
  }
  if (!(opt.known_bound >= 0) || !std::isfinite(opt.known_bound)) {
    return InvalidArgument("known_bound: must be a finite number >= 0");
  }
  const auto log = [&](const std::string& line) {
    if (opt.log) {
      std::ostringstream t;
      t << std::fixed << std::setprecision(2) << elapsed();
      opt.log("milp: t=" + t.str() + "s " + line);
    }
  };

  MilpResult res;
  Simulator simulator(p);
  std::optional<Schedule> best;
  std::optional<SimResult> best_sim;
  if (warm_start) {
    StatusOr<SimResult> r = simulator.Run(*warm_start);
    if (!r.ok()) return InvalidArgument("warm start: " + r.status().message());
    best = *warm_start;
    best_sim = *r;
    res.warm_start_method = warm_start->method;
  } else {
    Schedule seq = SequentialSchedule(p);
    if (StatusOr<SimResult> r = simulator.Run(seq); r.ok()) {
      best = std::move(seq);
      best_sim = *r;
      res.warm_start_method = "sequential";
    }
  }
  res.from_warm_start = best.has_value();
  // The core bounds: ComputeLowerBound, and the devices alone and in pairs
  // solved exactly, aiming no higher than the warm start.
  double core_bound = AtGrain(p, std::max(ComputeLowerBound(p).value, opt.known_bound));
  if (opt.device_search_nodes > 0) {
    DeviceSearchOptions so{opt.device_search_nodes, opt.time_limit_s / 4, opt.device_search_nodes};
    if (best_sim) so.upper = best_sim->objective;
    const DeviceSearchBound search = ComputeDeviceSearchBound(p, so);
    core_bound = AtGrain(p, std::max(core_bound, search.value));
    log("device search bound " + Describe(search) + ", core bound " + FormatNumber(core_bound));
  }
  const double grain = TimeGrain(p);
  const double tol = 1e-9 * std::max(1.0, best_sim ? best_sim->objective : 1.0);

  // Why the search stopped: the first limit reached.
  std::optional<MilpTermination> stopped;
  const auto should_stop = [&] {
    if (!stopped) {
      if (opt.stop && opt.stop->load()) {
        stopped = MilpTermination::kInterrupted;
      } else if (elapsed() >= opt.time_limit_s) {
        stopped = MilpTermination::kTimeLimit;
      }
    }
    return stopped.has_value();
  };

  const auto finish = [&](MilpTermination term, double milp_bound) -> StatusOr<MilpResult> {
    res.termination = term;
    res.stats.solve_seconds = elapsed() - res.stats.build_seconds;
    if (best) {
      res.objective = best_sim->objective;
      res.bound = std::min(AtGrain(p, std::max(core_bound, milp_bound)), res.objective);
      // Optimal: the least objective is a multiple of the grain (TimeGrain)
      // at or above the bound. (When the model's optimum re-times worse, with
      // offload or inexact device heads, the bound stays the model's.)
      if (term == MilpTermination::kOptimal && res.objective <= res.bound + tol) {
        res.bound = res.objective;
      }
      res.gap = Gap(res.objective, res.bound);
      const CheckReport rep = CheckSchedule(p, ToTimed(p, *best, *best_sim));
      if (!rep.valid())
        return Internal("milp: the best schedule fails the checker: " + rep.errors.front());
      res.schedule = std::move(best);
      res.sim = std::move(best_sim);
    } else {
      res.bound = AtGrain(p, std::max(core_bound, milp_bound));
    }
    log(std::string(ToString(term)) +
        (res.schedule ? ": objective " + FormatNumber(res.objective) : ": no schedule") +
        " bound " + FormatNumber(res.bound) + " gap " + FormatNumber(100 * res.gap) + "% nodes " +
        std::to_string(res.stats.nodes));
    return std::move(res);
  };

  // Nothing to refine when the warm start meets the bound.
  if (best && best_sim->objective <= core_bound + tol) {
    return finish(MilpTermination::kOptimal, core_bound);
  }

  // A simulated schedule better than the incumbent replaces it.
  // `announced`: on_improvement has had it already (the SAT search's).
  const auto adopt = [&](Schedule s, const SimResult& sim, bool announced = false) {
    if (best && sim.objective >= best_sim->objective - tol) return false;
    best = std::move(s);
    best_sim = sim;
    res.from_warm_start = false;
    ++res.stats.improvements;
    if (opt.on_improvement && !announced) opt.on_improvement(*best, *best_sim);
    return true;
  };

  // Where it applies, the order search first: it proves far more per second
  // than lp_solve's tree on such problems (exact/order_search.h).
  if (opt.order_search_nodes > 0 && OrderSearchApplies(p) && opt.fix_microbatch_order) {
    OrderSearchOptions os;
    os.time_limit_s = std::max(0.0, opt.time_limit_s - elapsed()) / 2;
    os.max_nodes = opt.order_search_nodes;
    os.stop = opt.stop;
    os.log = log;
    OrderSearchResult r =
        SearchOrders(p, core_bound, best ? best_sim->objective : milp::SerialHorizon(p), os);
    if (r.schedule) adopt(std::move(*r.schedule), *r.sim);
    res.stats.order_search_nodes = r.nodes;
    core_bound = AtGrain(p, std::max(core_bound, r.bound));
    log("order search: bound " + FormatNumber(core_bound) +
        (best ? ", incumbent " + FormatNumber(best_sim->objective) : "") + " (" +
        std::to_string(r.nodes) + " nodes, " + std::to_string(r.probes) + " probes)");
    if (best && best_sim->objective <= core_bound + tol) {
      return finish(MilpTermination::kOptimal, core_bound);
    }
  }

  // Where a time grid applies, the SAT probes next: exact with offload too,
  // where the order search does not apply (exact/sat_search.h).
  if (opt.sat_search && best && SatSearchApplies(p)) {
    SatSearchOptions ss;
    const bool large = SatSearchIsLarge(p);
    ss.time_limit_s = std::max(0.0, opt.time_limit_s - elapsed()) * (large ? 0.95 : 0.9);
    ss.stop = opt.stop;
    ss.log = log;
    ss.hint = &*best_sim;
    ss.session = opt.sat_session;
    ss.neighbourhood_share = large ? 0.9 : 0.75;
    ss.on_schedule = opt.on_improvement;  // each as found; the best is adopted below
    SatSearchResult r = SearchTimeIndexed(p, core_bound, best_sim->objective, ss);
    if (r.schedule) adopt(std::move(*r.schedule), *r.sim, /*announced=*/true);
    core_bound = AtGrain(p, std::max(core_bound, r.bound));
    if (best_sim->objective <= core_bound + tol) {
      return finish(MilpTermination::kOptimal, core_bound);
    }
  }

  milp::BuildOptions bo;
  bo.horizon = best ? milp::ModelObjective(p, *best_sim) : milp::SerialHorizon(p);
  bo.lower_bound = core_bound;
  bo.load_cuts = opt.load_cuts;
  bo.triangle_cuts = opt.triangle_cuts;
  bo.max_triangle_cuts = opt.max_triangle_cuts;
  bo.fix_microbatch_order = opt.fix_microbatch_order;
  milp::Hint hint;
  if (best) hint = {&*best, &*best_sim};
  milp::Model model = milp::BuildModel(p, bo, hint);
  if (model.infeasible && bo.fix_microbatch_order && (best || p.offload_allowed())) {
    // A warm start that breaks the micro-batch order (possible with offload,
    // where re-labelling it is not sound) may lie outside the ordered model,
    // and with offload the ordered model may have no schedule where the
    // problem has one: fall back to the model without that restriction.
    log("the ordered model " + std::string(best ? "excludes the warm start" : "has no schedule") +
        " (" + model.infeasible_reason + "): micro-batch order left free");
    bo.fix_microbatch_order = false;
    model = milp::BuildModel(p, bo, hint);
  }
  // Proofs come from a model capped below the incumbent. lp_solve's absolute
  // MIP gap prunes more than "a node's bound less the gap": with 0.75 of a
  // grain it ended a 4x5 problem "optimal" at 25 where a schedule of 24
  // exists. So where the least objective is a multiple of the grain, the
  // model that may prove it caps the objective at the incumbent's largest
  // multiple below it: it holds every better schedule, and lp_solve decides
  // it with its default gaps; no schedule in it proves the incumbent optimal.
  double cap = 0;  // the capped model's horizon, 0 while there is none
  const auto capped_horizon = [&]() -> std::optional<double> {
    if (grain <= 0 || !best) return std::nullopt;
    return BelowGrain(p, milp::ModelObjective(p, *best_sim));
  };
  const auto cap_model = [&] {
    const std::optional<double> h = capped_horizon();
    if (!h) return;
    cap = *h;
    bo.horizon = cap;
    model = milp::BuildModel(p, bo, hint);
  };
  if (!(bo.fix_microbatch_order && model.offload_binaries > 0)) cap_model();
  CountModel(model, res.stats);
  res.stats.horizon = bo.horizon;
  res.stats.build_seconds = elapsed();
  log("model: " + ModelSize(res.stats) + ", horizon " + FormatNumber(bo.horizon) +
      (best ? (cap > 0 ? " (below " : " (") + res.warm_start_method + "'s " +
                  FormatNumber(best_sim->objective) + ")"
            : ""));

  // A model without schedules: a modelling bug when it rejects the warm start
  // (which lies inside every window), else the problem has none.
  const auto empty_model = [&]() -> StatusOr<MilpResult> {
    if (best)
      return Internal("milp: the model rejects its own warm start: " + model.infeasible_reason);
    log("infeasible: " + model.infeasible_reason);
    return finish(MilpTermination::kInfeasible, core_bound);
  };
  // No schedule at or below the cap: the incumbent's multiple of the grain is the bound.
  const auto proven = [&] {
    log("no schedule at or below " + FormatNumber(cap) + ": the incumbent is optimal");
    return finish(MilpTermination::kOptimal, cap + grain);
  };
  if (model.infeasible) return cap > 0 ? proven() : empty_model();
  if (should_stop()) return finish(*stopped, core_bound);

  // A MILP solution, decoded and re-timed by the simulator; kept if better.
  // Its orders alone, replayed as soon as possible, may start a reload before
  // the solution does and take memory it gave a forward: then the copies, or
  // every op, are held at the solution's times (which replay it exactly).
  const auto consider = [&](const std::vector<double>& values, double milp_objective) {
    Schedule s;
    StatusOr<SimResult> r = Internal("not decoded");
    std::string why;  // the first replay's failure
    for (milp::DecodeHolds holds :
         {milp::DecodeHolds::kNone, milp::DecodeHolds::kCopies, milp::DecodeHolds::kAll}) {
      Schedule held = milp::Decode(p, model, values, holds);
      StatusOr<SimResult> hr = simulator.Run(held);
      if (!hr.ok() && why.empty()) why = hr.status().message();
      if (hr.ok() && (!r.ok() || hr->objective < r->objective - tol)) {
        s = std::move(held);
        r = std::move(hr);
      }
      if (r.ok() && r->objective <= milp_objective + tol) break;
    }
    if (!r.ok()) {
      log("a solution of objective " + FormatNumber(milp_objective) + " does not simulate: " + why);
      return;
    }
    res.stats.max_retime_excess =
        std::max(res.stats.max_retime_excess, r->objective - milp_objective);
    if (!adopt(std::move(s), *r)) return;
    log("incumbent " + FormatNumber(best_sim->objective) + " (milp " +
        FormatNumber(milp_objective) + ") bound " +
        FormatNumber(std::max(core_bound, res.stats.root_bound)));
  };

  // With offload, the fixed micro-batch order is a restriction (see
  // MilpOptions): that model's solutions are schedules, but its bounds,
  // optimum and infeasibility say nothing of the problem. Solved to the end
  // with time left, the search goes on in the model without it.
  bool restricted = bo.fix_microbatch_order && model.offload_binaries > 0;
  milp::LpParams lp;
  lp.should_stop = should_stop;
  lp.on_incumbent = consider;
  lp.on_root_bound = [&](double v) {
    if (restricted) return;
    res.stats.root_bound = v;
    log("root relaxation " + FormatNumber(v));
  };
  // The restricted model only finds schedules: there a node that cannot beat
  // the incumbent by nearly a grain is left (it proves nothing either way).
  const double default_gap = lp.absolute_gap;
  if (restricted && grain > 0) lp.absolute_gap = 0.99 * grain;
  milp::LpOutcome out = milp::SolveWithLpSolve(model, lp);
  res.stats.nodes = out.nodes;
  if (out.has_solution) consider(out.values, out.objective);
  const bool ended =
      out.code == milp::LpOutcome::Code::kOptimal || out.code == milp::LpOutcome::Code::kInfeasible;
  if (restricted && ended && !should_stop()) {
    log("done with the micro-batch order fixed, a restriction under offload: searching on "
        "without it");
    bo.fix_microbatch_order = false;
    milp::Hint free_hint;
    if (best) {
      bo.horizon = milp::ModelObjective(p, *best_sim);
      free_hint = {&*best, &*best_sim};
    }
    hint = free_hint;
    restricted = false;
    lp.absolute_gap = default_gap;
    if (capped_horizon()) {
      cap_model();
    } else {
      model = milp::BuildModel(p, bo, hint);
    }
    if (model.infeasible) return cap > 0 ? proven() : empty_model();
    out = milp::SolveWithLpSolve(model, lp);
    res.stats.nodes += out.nodes;
    if (out.has_solution) consider(out.values, out.objective);
  }
  const double root = restricted ? core_bound : res.stats.root_bound;

  switch (out.code) {
    case milp::LpOutcome::Code::kOptimal: {
      if (restricted) return finish(stopped.value_or(MilpTermination::kTimeLimit), core_bound);
      // Optimal for the model: its optimum, or, when it holds none, nothing
      // below its horizon (the capped model: below the incumbent's multiple).
      if (!out.has_solution && cap > 0) return proven();
      const double milp_bound =
          (out.has_solution ? std::min(out.objective, bo.horizon) : bo.horizon) - lp.absolute_gap;
      return finish(MilpTermination::kOptimal, milp_bound);
    }
    case milp::LpOutcome::Code::kStopped:
      return finish(stopped.value_or(MilpTermination::kTimeLimit), root);
    case milp::LpOutcome::Code::kInfeasible:
      if (!restricted && cap > 0) return proven();
      if (best) {
        log("lp_solve reports infeasible although the warm start fits: keeping it");
        return finish(MilpTermination::kTimeLimit, core_bound);
      }
      if (restricted) return finish(stopped.value_or(MilpTermination::kTimeLimit), core_bound);
      return finish(MilpTermination::kInfeasible, core_bound);
    case milp::LpOutcome::Code::kError:
      if (best) {
        log(out.error + ": keeping the best schedule so far");
        return finish(stopped.value_or(MilpTermination::kTimeLimit), root);
      }
      return Internal("milp: " + out.error);
  }
  return Internal("milp: unreachable");
}

std::string ModelSize(const MilpStats& s) {
  return std::to_string(s.columns) + " columns (" + std::to_string(s.order_binaries) + " order, " +
         std::to_string(s.offload_binaries) + " offload, " + std::to_string(s.copy_order_binaries) +
         " link order, " + std::to_string(s.memory_binaries) + " memory binaries; " +
         std::to_string(s.pairs_fixed) + " pairs fixed), " + std::to_string(s.rows) + " rows";
}

StatusOr<MilpStats> WriteMilpModel(const Problem& p, const Schedule& incumbent,
                                   const std::string& path) {
  if (Status st = Validate(p); !st.ok()) return st;
  if (!MilpAvailable()) return Status(StatusCode::kNotApplicable, kMilpUnavailable);
  StatusOr<SimResult> sim = Simulate(p, incumbent);
  if (!sim.ok()) return InvalidArgument("incumbent: " + sim.status().message());
  milp::BuildOptions bo;
  bo.horizon = milp::ModelObjective(p, *sim);
  bo.lower_bound = BestLowerBound(p);  // a cut on the objective, as SolveMilp has
  // Sound for the problem: the micro-batch order is fixed only without offload.
  bo.fix_microbatch_order = !p.offload_allowed();
  const milp::Model model = milp::BuildModel(p, bo, {&incumbent, &*sim});
  if (model.infeasible) {
    return Internal("milp: the model rejects the schedule it was built from: " +
                    model.infeasible_reason);
  }
  if (Status st = milp::WriteModelFile(model, path); !st.ok()) return st;
  MilpStats stats;
  CountModel(model, stats);
  stats.horizon = bo.horizon;
  return stats;
}

}  // namespace optpipe
