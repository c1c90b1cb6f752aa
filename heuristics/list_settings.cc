// The list scheduler's settings (heuristics/list_scheduler.h): the warm-up
// depths and kept activations a setting gives, its description, and the grid
// of settings BuildList searches.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "core/text_format.h"
#include "heuristics/best_fitting.h"
#include "heuristics/list_scheduler.h"

namespace optpipe {

std::vector<int> WarmupDepths(const Problem& p, const ListOptions& opt) {
  const int S = p.stages(), M = p.microbatches;
  std::vector<int> depth(S, 1);
  if (static_cast<int>(opt.warmup_depth.size()) == S) {
    for (int s = 0; s < S; ++s) depth[s] = std::clamp(opt.warmup_depth[s], 1, M);
    return depth;
  }
  // Micro-batches the device works through while micro-batch 0 goes from
  // F(s) to the last stage and back to B(s): 1F1B's S - s on unit costs.
  const std::vector<double> gap = ForwardToBackward(p);
  for (int s = 0; s < S; ++s) {
    const double trip = p.f[s] + gap[s];
    double per_mb = 0;
    for (int u = 0; u < S; ++u) {
      if (p.stage_device[u] == p.stage_device[s])
        per_mb += p.f[u] + Duration(p, Op{OpType::kB, u, 0});
    }
    const double rounds = std::ceil(trip / std::max(per_mb, 1e-12) - 1e-9);
    depth[s] = std::clamp(static_cast<int>(std::lround(opt.warmup_scale * rounds)), 1, M);
  }
  return depth;
}

std::vector<char> Choices(const Problem& p, const ListOptions& opt) {
  const int S = p.stages(), M = p.microbatches;
  if (static_cast<int>(opt.choice.size()) == S * M) return opt.choice;
  std::vector<char> choice(static_cast<std::size_t>(S) * M, ListOptions::kByRule);
  for (int s = 0; s < S && opt.keep_every > 0; ++s) {
    for (int m = opt.keep_every - 1; m < M; m += opt.keep_every)
      choice[static_cast<std::size_t>(s) * M + m] = ListOptions::kKeep;
  }
  return choice;
}
std::string Describe(const Problem& p, const ListOptions& o) {
  std::ostringstream out;
  out << (o.breadth_first ? "breadth first" : "1F1B-like");
  if (o.warmup_depth.empty()) {
    out << ", warm-up x" << FormatNumber(o.warmup_scale);
  } else if (!o.breadth_first || std::any_of(o.warmup_depth.begin(), o.warmup_depth.end(),
                                             [&](int d) { return d < p.microbatches; })) {
    const auto [lo, hi] = std::minmax_element(o.warmup_depth.begin(), o.warmup_depth.end());
    out << ", warm-up depth " << *lo;
    if (*hi > *lo) out << "-" << *hi;
  }
  if (p.split_backward) out << (o.eager_w ? ", eager W" : ", lazy W");
  if (o.express) out << ", express";
  if (!o.offload || !p.offload_allowed() || !p.memory_limited()) {
    if (o.express && o.keep_every > 0) out << " 1 in " << o.keep_every;
    return out.str();
  }
  out << ", offload, look-ahead " << o.reload_lookahead;
  if (o.offload_warmup) out << ", in warm-up";
  if (o.offload_first) out << ", offloads first";
  if (o.keep_every > 0) out << ", keep 1 in " << o.keep_every;
  const auto count = [&](char c) { return std::count(o.choice.begin(), o.choice.end(), c); };
  if (const auto kept = count(ListOptions::kKeep); kept > 0) out << ", " << kept << " kept";
  if (const auto sent = count(ListOptions::kSend); sent > 0) out << ", " << sent << " sent";
  return out.str();
}

std::vector<ListOptions> ListOptionGrid(const Problem& p) {
  std::vector<ListOptions> grid;
  const bool can_offload = p.offload_allowed() && p.memory_limited();
  // The warm-up scale matters most: it varies fastest, so that a search cut
  // short by its time limit has tried every scale first.
  for (bool eager : {false, true}) {
    if (eager && !p.split_backward) continue;
    for (bool off : {true, false}) {
      if (!off && !can_offload) continue;
      for (int look : {1, 2}) {
        if (look == 2 && !(off && can_offload)) continue;
        for (bool warmup : {false, true}) {
          if (warmup && !(off && can_offload)) continue;
          for (int keep : {0, 4, 3}) {
            if (keep > 0 && !warmup) continue;
            for (bool express : {false, true}) {
              if (express && keep == 0) continue;
              for (double scale : {1.0, 1.5, 2.0, 0.5}) {
                ListOptions o{scale, eager, off && can_offload, look, warmup, keep, {}, {}};
                o.express = express;
                grid.push_back(o);
              }
            }
          }
        }
      }
    }
  }
  // Breadth first, every micro-batch in, offloading what the warm-up rule
  // allows (the tuner lowers the depths and keeps activations from there),
  // then every activation where its device is short of memory: a round trip
  // the rule finds too long to hide may still be the only way to fit.
  if (can_offload) {
    for (bool send : {false, true}) {
      for (bool eager : {false, true}) {
        if (eager && !p.split_backward) continue;
        ListOptions o;
        o.eager_w = eager;
        o.offload_warmup = true;
        o.warmup_depth.assign(p.stages(), p.microbatches);
        o.breadth_first = true;
        if (send)
          o.choice.assign(static_cast<std::size_t>(p.stages()) * p.microbatches,
                          ListOptions::kSend);
        grid.push_back(o);
      }
    }
  }
  return grid;
}

StatusOr<Schedule> BuildList(const Problem& p, const SearchOptions& opt) {
  StatusOr<ListChoice> c = BestListChoice(p, opt);
  if (!c.ok()) return c.status();
  return std::move(c->schedule);
}

StatusOr<ListChoice> BestListChoice(const Problem& p, const SearchOptions& opt) {
  const std::vector<ListOptions> grid = ListOptionGrid(p);
  int chosen = -1;
  StatusOr<Schedule> s = BestFitting(
      p, "setting", static_cast<int>(grid.size()),
      [&](int i) -> std::optional<Schedule> {
        StatusOr<Schedule> s = ListSchedule(p, grid[i]);
        return s.ok() ? std::optional<Schedule>(std::move(*s)) : std::nullopt;
      },
      [&](int i) { return Describe(p, grid[i]); }, opt, &chosen);
  if (!s.ok()) return s.status();
  return ListChoice{grid[chosen], std::move(*s)};
}

}  // namespace optpipe
