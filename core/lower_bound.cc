#include "core/lower_bound.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/dag.h"

namespace optpipe {
namespace {

// The largest total of `sizes` (each used any number of times) that is at
// most `cap`: what the activations resident at one instant can add up to.
// Falls back to `cap` itself (always valid) when the search would be long.
double MostThatFits(std::vector<double> sizes, double cap) {
  std::erase_if(sizes, [](double x) { return !(x > 1e-12); });
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  sizes.erase(std::unique(sizes.begin(), sizes.end(),
                          [](double a, double b) { return std::abs(a - b) <= 1e-12 * a; }),
              sizes.end());
  const double tol = 1e-9 * std::max(1.0, cap);
  // Tiny sizes fill the room to within themselves: nothing worth a search.
  if (sizes.empty() || cap <= 0 || sizes.back() < cap / 4096) return std::max(cap, 0.0);
  double best = 0;
  long nodes = 0;
  constexpr long kMaxNodes = 200000;
  const auto dfs = [&](auto&& self, std::size_t i, double used) -> void {
    if (++nodes > kMaxNodes || best >= cap - tol) return;
    best = std::max(best, used);
    if (i == sizes.size()) return;
    for (double u = used; u <= cap + tol && nodes <= kMaxNodes; u += sizes[i]) self(self, i + 1, u);
  };
  dfs(dfs, 0, 0.0);
  return nodes > kMaxNodes ? cap : std::min(cap, best + tol);
}

// The memory-time bound (see the header) over the devices `group`, which
// share one host link: the least T such that the least link time that brings
// every device's memory-time under C_d T is at most T. `full_only` counts an
// activation only while it is whole on the device (F's start to O's end, R's
// start to B's end): what is resident then adds up to sums of whole
// activations, often well below the room (two of 1.33 do not fit in 2.13).
// `edges[d]`: time of the span in which device d can hold no activation (its
// head before the first F can start, its tail after the last B must end).
double MemoryBound(const Problem& p, const std::vector<int>& group, bool full_only,
                   const std::vector<double>& edges) {
  const int S = p.stages(), M = p.microbatches;
  struct Item {
    double save, cost;  // memory-time saved and link time spent by one offload
  };
  std::vector<double> keep(p.devices, 0.0);
  std::vector<std::vector<Item>> items(p.devices);
  std::vector<std::vector<double>> sizes(p.devices);  // amounts one activation can hold
  for (int s = 0; s < S; ++s) {
    const int d = p.stage_device[s];
    if (std::find(group.begin(), group.end(), d) == group.end()) continue;
    const double a = p.activation[s];
    const double b = Duration(p, Op{OpType::kB, s, 0});
    double life = p.f[s] + b;
    for (int u = s + 1; u < S; ++u) life += p.f[u] + Duration(p, Op{OpType::kB, u, 0});
    for (int u = s; u + 1 < S; ++u) life += 2 * CommTime(p, u);
    const double after_b = p.split_backward ? a - p.freed_by_b[s] : 0.0;
    keep[d] += M * (a * life + (full_only ? 0.0 : after_b * p.w[s]));
    sizes[d].push_back(a);
    if (!full_only) sizes[d].push_back(after_b);
    if (!p.offload_allowed()) continue;
    if (!full_only) sizes[d].push_back(a - p.offloadable[s]);
    const double t = (*p.offload)[s];
    const double save = (full_only ? a : p.offloadable[s]) * (life - (p.f[s] + 2 * t + b));
    if (save > 0 && t > 0) items[d].push_back({save, 2 * t});
  }
  std::vector<double> room(p.devices, 0.0);
  for (int d : group) {
    room[d] = MostThatFits(sizes[d], (*p.memory_limit)[d] - p.static_memory[d]);
  }
  for (auto& v : items) {
    std::sort(v.begin(), v.end(),
              [](const Item& x, const Item& y) { return x.save * y.cost > y.save * x.cost; });
  }
  // Least link time for device d to fit its memory-time under room_d T; inf if it cannot.
  const auto link_time = [&](int d, double T) {
    double need = keep[d] - room[d] * std::max(0.0, T - edges[d]), cost = 0;
    for (const Item& it : items[d]) {
      if (need <= 0) break;
      const double take = std::min<double>(M, need / it.save);
      cost += take * it.cost;
      need -= take * it.save;
    }
    return need > 1e-12 * std::max(1.0, keep[d]) ? std::numeric_limits<double>::infinity() : cost;
  };
  const auto fits = [&](double T) {
    double total = 0;
    for (int d : group) total += link_time(d, T);
    return total <= T;
  };
  double hi = 1;
  for (int k = 0; k < 1100 && !fits(hi); ++k) hi *= 2;
  if (!fits(hi)) return 0;  // a device without room for its activations: no schedule at all
  double lo = 0;
  for (int it = 0; it < 60 && hi - lo > 1e-12 * hi; ++it) {
    const double mid = (lo + hi) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  return lo;  // fits(T) fails below lo: a valid (never too large) bound
}

}  // namespace

LowerBound ComputeLowerBound(const Problem& p) {
  const int S = p.stages(), D = p.devices, M = p.microbatches;
  LowerBound lb;
  std::vector<double> work(D, 0.0);
  std::vector<int> lowest(D, S);
  for (int s = 0; s < S; ++s) {
    const int d = p.stage_device[s];
    work[d] += M * (p.f[s] + p.b[s] + p.w[s]);
    lowest[d] = std::min(lowest[d], s);
  }
  // One micro-batch's DAG gives ASAP starts (head) and the critical path.
  Problem one = p;
  one.microbatches = 1;
  const std::vector<char> none(S, 0);
  const Dag dag = BuildDag(one, none);
  const std::vector<double> est = dag.EarliestStarts();
  lb.critical_path = dag.CriticalPath();

  if (p.objective == Objective::kMakespan) {
    for (int d = 0; d < D; ++d) {
      if (lowest[d] == S) continue;  // a device without stages
      const double head = est[dag.VertexOf(Op{OpType::kF, lowest[d], 0})];
      double tail = 0;
      if (!p.split_backward) {
        for (int s = lowest[d] - 1; s >= 0; --s) tail += p.b[s] + p.w[s] + CommTime(p, s);
      }
      if (head + work[d] + tail > lb.device_bound) {
        lb.device_bound = head + work[d] + tail;
        lb.binding_device = d;
      }
    }
    if (p.memory_limit) {
      // Activations of stage s live from F(s,m) (not before the F chain
      // below s) to B(s,m), after which W(s,m) and the B chain below s run.
      std::vector<double> head(D, std::numeric_limits<double>::infinity()), tail = head, edges(D);
      double chain = 0;
      for (int s = 0; s < S; ++s) {
        const int d = p.stage_device[s];
        head[d] = std::min(head[d], est[dag.VertexOf(Op{OpType::kF, s, 0})]);
        tail[d] = std::min(tail[d], std::max(p.split_backward ? p.w[s] : 0.0, chain));
        chain += Duration(p, Op{OpType::kB, s, 0}) + (s + 1 < S ? CommTime(p, s) : 0.0);
      }
      for (int d = 0; d < D; ++d) edges[d] = lowest[d] == S ? 0.0 : head[d] + tail[d];
      for (const std::vector<int>& link : p.host_links) {
        for (bool full_only : {false, true})
          lb.memory_bound = std::max(lb.memory_bound, MemoryBound(p, link, full_only, edges));
      }
    }
    lb.value = std::max({lb.device_bound, lb.critical_path, lb.memory_bound});
    return lb;
  }
  // device_span: the longest F(s)..B(s)[..W(s)] round trip of a stage on d.
  double best = 0;
  const std::vector<double> no_edges(D, 0.0);
  for (int d = 0; d < D; ++d) {
    double span = work[d];
    for (int s = 0; s < S; ++s) {
      if (p.stage_device[s] != d) continue;
      double trip = p.split_backward ? p.w[s] : 0.0;
      for (int u = s; u < S; ++u) {
        trip += p.f[u] + Duration(p, Op{OpType::kB, u, 0});
        if (u + 1 < S) trip += 2 * CommTime(p, u);
      }
      span = std::max(span, trip);
    }
    if (work[d] > lb.device_bound) {
      lb.device_bound = work[d];
      lb.binding_device = d;
    }
    best = std::max(best, span);
    if (p.memory_limit) {
      for (bool full_only : {false, true})
        lb.memory_bound = std::max(lb.memory_bound, MemoryBound(p, {d}, full_only, no_edges));
    }
  }
  lb.value = std::max(best, lb.memory_bound);
  return lb;
}

}  // namespace optpipe
