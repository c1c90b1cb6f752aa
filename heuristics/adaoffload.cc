// AdaOffload (OptPipe, Appendix D, Algorithm 1): PipeOffload with a denser
// fill phase. PipeOffload (Wan et al. 2025) runs only a few forwards before
// the first backward, whatever memory is left; AdaOffload places on every
// device as many forwards before its first B as can run while that B could
// not start anyway, then follows the PipeOffload orders for the rest.
//
// Orders. Start from the PipeOffload orders (heuristics/pipe_offload.cc).
// For each device, Algorithm 1's step 1 estimates EstStart, the earliest
// start of the device's first backward (its last chunk's B of its first
// micro-batch): the chain of forwards to the last stage, then the chain of
// backwards back, each forward at its earliest time when every device runs
// its forwards back to back in PipeOffload order. Step 2 fills: the leading
// forwards that would end by EstStart + T move before the first B (never
// fewer than PipeOffload's warm-up). Step 3 keeps every other op in
// PipeOffload's relative order, so after the fill the device runs backwards
// until PipeOffload's pattern catches up, then B W F as before. The deeper
// fill holds more activations, so offload matters: the O/R of the PipeOffload
// offload set are re-planned on the host links for the new orders, sharing
// devices included (pipe_offload.cc, PlaceCopies).
//
// Knobs, chosen by simulation under the memory limit (fastest that fits,
// ties to the lower peak): the tolerance T in {no fill, 0, 1, 2, 4, 8 mean
// forwards, everything}, the offload set (PO-H's half or PO-F's all) and the
// PipeOffload group size (every one, with or without a limit). With v = 1
// the orders are 1F1B's and the fill generalises 1F1B's warm-up of d - i
// forwards.
//
// Fallback. "No fill" is PipeOffload's published copy plan, but po-h and
// po-f also try every activation offloaded where the link cannot hide the
// round trips (PlaceCopies' keep_all), which fits limits none of these
// settings does (u48-r3-o2: po-f 37, none of AdaOffload's 14). As OptPipe's
// Appendix D falls back to PipeOffload, the result is the fastest of
// AdaOffload's best setting, po-h's and po-f's schedules (ties in that
// order), so AdaOffload is never slower than po-h or po-f whenever they fit
// and fits wherever they do. The schedule keeps the name "adaoffload": the
// method is the whole procedure, fallback included, as in the paper.
#include <algorithm>
#include <chrono>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "heuristics/best_fitting.h"
#include "heuristics/method.h"
#include "heuristics/pipe_offload.h"

namespace optpipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// End of every forward [stage * M + mb] when the devices run only their
// forwards, in the order given, each as early as possible. Empty if the
// forward orders wait on each other (they never do for PipeOffload orders).
std::vector<double> ForwardOnlyEnds(const Problem& p, const Schedule& s) {
  const int M = p.microbatches;
  std::vector<std::vector<Op>> fwd(p.devices);
  for (int d = 0; d < p.devices; ++d) {
    for (const Op& op : s.compute[d]) {
      if (op.type == OpType::kF) fwd[d].push_back(op);
    }
  }
  std::vector<double> end(static_cast<std::size_t>(p.stages()) * M, -1.0);
  std::vector<std::size_t> next(p.devices, 0);
  std::vector<double> free_at(p.devices, 0.0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int d = 0; d < p.devices; ++d) {
      for (; next[d] < fwd[d].size(); ++next[d]) {
        const Op& op = fwd[d][next[d]];
        double ready = free_at[d];
        if (op.stage > 0) {
          const double pred = end[static_cast<std::size_t>(op.stage - 1) * M + op.microbatch];
          if (pred < 0) break;
          ready = std::max(ready, pred + CommTime(p, op.stage - 1));
        }
        free_at[d] = end[static_cast<std::size_t>(op.stage) * M + op.microbatch] =
            ready + p.f[op.stage];
        progress = true;
      }
    }
  }
  for (int d = 0; d < p.devices; ++d) {
    if (next[d] < fwd[d].size()) return {};
  }
  return end;
}

// How many leading forwards each device runs before its first B: those that
// end (forward-only times `f_end`, from ForwardOnlyEnds) by EstStart(first B)
// + tolerance, never fewer than PipeOffload's own warm-up. Empty when the
// forward orders wait on each other (no fill).
std::vector<std::size_t> FillDepths(const Problem& p, const Schedule& po,
                                    const std::vector<double>& f_end, double tolerance) {
  if (f_end.empty()) return {};
  const int M = p.microbatches, S = p.stages();
  const auto fe = [&](int s, int m) { return f_end[static_cast<std::size_t>(s) * M + m]; };
  std::vector<std::size_t> depth(p.devices, 0);
  for (int d = 0; d < p.devices; ++d) {
    const std::vector<Op>& lane = po.compute[d];
    const auto first_b =
        std::find_if(lane.begin(), lane.end(), [](const Op& op) { return op.type == OpType::kB; });
    if (first_b == lane.end()) continue;
    // Algorithm 1, step 1: the B chain of this micro-batch from the last stage down.
    const int m0 = first_b->microbatch;
    double b_start = fe(S - 1, m0);
    for (int s = S - 2; s >= first_b->stage; --s) {
      const double prev_end = b_start + Duration(p, Op{OpType::kB, s + 1, m0});
      b_start = std::max(fe(s, m0), prev_end + CommTime(p, s));
    }
    // Step 2: the fill, never shallower than PipeOffload's own warm-up.
    const auto warmup = static_cast<std::size_t>(
        std::count_if(lane.begin(), first_b, [](const Op& op) { return op.type == OpType::kF; }));
    for (const Op& op : lane) {
      if (op.type != OpType::kF) continue;
      if (depth[d] >= warmup && fe(op.stage, op.microbatch) > b_start + tolerance) break;
      ++depth[d];
    }
  }
  return depth;
}

// Step 3: each device's first depth[d] forwards first, everything else in
// PipeOffload's order. Distinct depths give distinct orders (a depth beyond
// the warm-up moves a forward ahead of a B).
Schedule Fill(const Schedule& po, const std::vector<std::size_t>& depth) {
  Schedule out = po;
  for (std::size_t d = 0; d < depth.size(); ++d) {
    std::vector<Op>& filled = out.compute[d];
    filled.clear();
    for (const Op& op : po.compute[d]) {
      if (op.type == OpType::kF && filled.size() < depth[d]) filled.push_back(op);
    }
    std::size_t forwards = 0;
    for (const Op& op : po.compute[d]) {
      if (op.type != OpType::kF || forwards++ >= depth[d]) filled.push_back(op);
    }
  }
  return out;
}

}  // namespace

Status AdaOffloadApplies(const Problem& p) {
  if (!p.offload_allowed()) {
    return NotApplicable(
        "needs offload_time (the problem allows no offload): the deeper fill "
        "relies on offloading activations");
  }
  return PipeOffloadApplies(p);
}

namespace {

// The best of AdaOffload's own settings (BestFitting over the knobs above).
StatusOr<Schedule> BestSetting(const Problem& p, const SearchOptions& opt) {
  using namespace pipe_offload;
  double mean_f = 0;
  for (double f : p.f) mean_f += f / p.stages();
  std::vector<double> tolerances = {-kInf, 0.0};  // -inf: no fill, PipeOffload itself
  for (double k : {1.0, 2.0, 4.0, 8.0}) tolerances.push_back(k * mean_f);
  tolerances.push_back(kInf);
  const std::vector<int> gs = GroupSizes(p, /*search=*/true);
  const int per_g = 2 * static_cast<int>(tolerances.size());
  const std::vector<char> offload[2] = {OffloadedStages(p, false), OffloadedStages(p, true)};
  // Candidate i: group size gs[i / per_g], offload set all = (i / T) % 2, tolerance i % T.
  const auto knobs = [&](int i) {
    const int t = i % static_cast<int>(tolerances.size());
    return std::tuple{gs[i / per_g], (i / static_cast<int>(tolerances.size())) % 2, t};
  };
  return BestFitting(
      p, "setting", static_cast<int>(gs.size()) * per_g,
      [&](int i) -> std::optional<Schedule> {
        const auto [g, all, t] = knobs(i);
        const Schedule po = BlockOrders(p, g, /*per_microbatch=*/true);
        Schedule s = po;
        if (t > 0) {
          const std::vector<double> f_end = ForwardOnlyEnds(p, po);
          const std::vector<std::size_t> depth = FillDepths(p, po, f_end, tolerances[t]);
          // A larger T that fills no more than the one before (T = -inf: the
          // warm-up, PipeOffload itself) adds nothing.
          if (depth == FillDepths(p, po, f_end, tolerances[t - 1])) return std::nullopt;
          s = Fill(po, depth);
        }
        if (!PlaceCopies(p, s, offload[all]).ok()) return std::nullopt;  // a fill that deadlocks
        return s;
      },
      [&](int i) {
        const auto [g, all, t] = knobs(i);
        std::ostringstream label;
        label << "g = " << g << ", offload " << (all ? "all" : "half") << ", fill ";
        if (t == 0) {
          label << "none";
        } else {
          label << "T = " << tolerances[t];
        }
        return label.str();
      },
      opt);
}

}  // namespace

StatusOr<Schedule> BuildAdaOffload(const Problem& p, const SearchOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<Schedule> own = BestSetting(p, opt);
  // PipeOffload on what is left of the clock (like every knob scan, each
  // scores at least its first setting).
  SearchOptions rest = opt;
  rest.time_limit_s = std::max(
      0.0, opt.time_limit_s -
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  StatusOr<Schedule> candidates[] = {std::move(own), BuildPOH(p, rest), BuildPOF(p, rest)};
  int best = -1;
  double best_objective = kInf;
  for (int i = 0; i < 3; ++i) {
    if (!candidates[i].ok()) continue;
    const StatusOr<SimResult> r = Simulate(p, *candidates[i]);
    if (r.ok() && r->objective < best_objective) {
      best = i;
      best_objective = r->objective;
    }
  }
  // None fits: AdaOffload's own message, which names its leanest setting.
  if (best < 0) return candidates[0];
  return std::move(candidates[best]);
}

}  // namespace optpipe
