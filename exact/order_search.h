// SearchOrders: an exact branch and bound over the device orders of a problem
// without offload, propagated by the MILP builder's time windows instead of
// LP relaxations.
//
// A probe at horizon T asks whether some schedule ends by T (for the
// device_span objective: whether each device can end by its head + T; with
// micro-batches in order and heads exact (milp::HeadsExact), every device's
// first op, the forward of micro-batch 0 of its lowest stage, starts at its
// head in every schedule, so that is its span). The builder
// (exact/model.h, "Implied orders") gives every compute op a window from the
// DAG, the fixed micro-batch order, the memory precedences and the load of
// the ops already ordered before and after it on its device, and fixes every
// pair of one device whose windows allow one order only, until nothing
// changes. Without offload a device's memory changes only with its own ops,
// so the memory rule is a rule on orders too: a forward starts with static
// memory, its activation, and what the ops ordered before it allocated less
// what they freed; with the open ops that could free memory counted as
// before it, above the limit the node fails, and an open op without which it
// would be is ordered before it. Both rules repeat until neither orders a
// pair. An op without a window, a pair that fits neither way, a forward that
// cannot fit, or a device that cannot finish by T even preemptively
// (Jackson's schedule with the windows' release times and tails) ends the
// branch. A node branches on the most constrained open pair (the least slack
// in its roomier order: y's latest start less x's earliest end for x then
// y), that order first. A leaf orders every device completely; its orders,
// simulated, are a schedule (the simulator has the last word). A probe that
// runs out of branches proves that no schedule ends by T; one that finds a
// schedule gives a new incumbent; one cut short by its budget proves
// nothing.
//
// The probes bisect between the lower bound and the incumbent (on multiples
// of the time grain, when the durations have one: proving "none by the
// incumbent less one grain" proves the incumbent optimal); each may use half
// of the nodes and of the time left (the only target left all of them), and
// one cut short lowers the next targets. Cost: a node re-propagates the
// windows, O(ops^2 / D) a pass; 8x16 problems run about 18000 nodes a second
// on one core.
//
//   OrderSearchOptions opt;
//   OrderSearchResult r = SearchOrders(problem, lower_bound, incumbent_objective, opt);
//   // r.bound: proven; r.schedule: better than the incumbent, when found
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"

namespace optpipe {

struct OrderSearchOptions {
  double time_limit_s = 1.0;
  std::int64_t max_nodes = 1'000'000;  // over all probes
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const std::string&)> log;  // one line per probe
};

struct OrderSearchResult {
  double bound = 0;  // no schedule ends earlier (at least the lower bound given)
  // The best schedule found, when better than the incumbent given (simulated, valid).
  std::optional<Schedule> schedule;
  std::optional<SimResult> sim;
  double best = 0;       // the best objective known: the incumbent's or the schedule's
  bool optimal = false;  // bound >= best (within the time grain)
  std::int64_t nodes = 0;
  int probes = 0;
};

// Offload not allowed (with offload the fixed micro-batch order is a
// restriction, so its proofs would not hold); for device_span, heads exact
// (milp::HeadsExact: else a device may start later than its head); a size whose
// pair literals and closure fit in about 100 MB: at most 4M pairs of one
// device's ops and 16,384 compute ops (16x128 applies, 32x256 does not).
bool OrderSearchApplies(const Problem& p);

// `lower_bound`: a proven bound; `incumbent`: the objective of a known schedule
// (the search looks below it). Requires OrderSearchApplies(p).
OrderSearchResult SearchOrders(const Problem& p, double lower_bound, double incumbent,
                               const OrderSearchOptions& opt);

}  // namespace optpipe
