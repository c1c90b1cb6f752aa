// milp's composite and the device searches the facade's bounds share:
// the SAT probes, a coarse pass, then the MILP warm-started from the best
// heuristic.
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
  out.nodes = r.stats.nodes + r.stats.order_search_nodes;
  out.solution.schedule.method = "milp";
  return out;
}

Solved WithSeed(Solved s, std::int64_t evaluations) {
  s.evaluations = evaluations;
  return s;
}

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
  std::int64_t seed_evaluations = 0;  // auto's, for SolveStats
  const auto run_auto = [&](double seconds) {
    SearchOptions search = Heuristic(opt);
    search.time_limit_s = seconds;
    if (!opt.evaluations) search.known_bound = core_bound;
    StatusOr<Solution> r = SolveAuto(p, search, opt.log, nullptr, nullptr, &seed_evaluations);
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
      return WithSeed(FromMilp(*r), seed_evaluations);
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
  return WithSeed(FromMilp(*r), seed_evaluations);
}

}  // namespace optpipe::solve_internal
