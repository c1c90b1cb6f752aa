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

// How much one unit of time of an activation of a stage counts against its
// device's room of 1, while whole, after its B (waiting for W) and offloaded
// (what stays behind). Valid when any amounts that can be resident on the
// device together weigh at most 1 in total.
struct PhaseWeights {
  double whole = 0, after_b = 0, offloaded = 0;
};

// The three amounts an activation of stage s can hold, and how long each is
// held at the least when kept and when offloaded (per micro-batch).
struct Phases {
  double whole, after_b, offloaded;  // amounts
  double life;                       // F's start to B's end, kept
  double trip;                       // whole while offloaded: f + 2 t + b
  double w;                          // after B until W ends
};

// Every stage's phases [S].
std::vector<Phases> PhasesOf(const Problem& p) {
  const std::vector<double> gap = ForwardToBackward(p);
  const bool off = p.offload_allowed();
  std::vector<Phases> out;
  for (int s = 0; s < p.stages(); ++s) {
    const double a = p.activation[s];
    const double b = Duration(p, Op{OpType::kB, s, 0});
    const double life = p.f[s] + gap[s] + b;
    out.push_back({.whole = a,
                   .after_b = p.split_backward ? a - p.freed_by_b[s] : 0.0,
                   .offloaded = off ? a - p.offloadable[s] : 0.0,
                   .life = life,
                   .trip = off ? p.f[s] + 2 * (*p.offload)[s] + b : life,
                   .w = p.split_backward ? p.w[s] : 0.0});
  }
  return out;
}

// max c.x subject to A x <= 1 and x >= 0 (A >= 0, every column used by some
// row): the simplex method on a dense tableau, Bland's rule. Empty if it fails.
std::vector<double> MaximizeUnderOnes(const std::vector<std::vector<double>>& A,
                                      const std::vector<double>& c) {
  const int m = static_cast<int>(A.size()), n = static_cast<int>(c.size()), rhs = n + m;
  std::vector<std::vector<double>> t(m, std::vector<double>(n + m + 1, 0.0));
  std::vector<double> z(n + m + 1, 0.0);
  std::vector<int> basis(m);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) t[i][j] = A[i][j];
    t[i][n + i] = 1;
    t[i][rhs] = 1;
    basis[i] = n + i;
  }
  for (int j = 0; j < n; ++j) z[j] = -c[j];
  for (int iter = 0; iter < 50 * (n + m); ++iter) {
    int e = -1;
    for (int j = 0; j < n + m && e < 0; ++j) {
      if (z[j] < -1e-12) e = j;
    }
    if (e < 0) {
      std::vector<double> x(n, 0.0);
      for (int i = 0; i < m; ++i) {
        if (basis[i] < n) x[basis[i]] = t[i][rhs];
      }
      return x;
    }
    int l = -1;
    for (int i = 0; i < m; ++i) {
      if (t[i][e] <= 1e-12) continue;
      if (l < 0) {
        l = i;
        continue;
      }
      const double r = t[i][rhs] / t[i][e], best = t[l][rhs] / t[l][e];
      if (r < best - 1e-15 || (r <= best + 1e-15 && basis[i] < basis[l])) l = i;
    }
    if (l < 0) return {};  // unbounded
    const double piv = t[l][e];
    for (double& v : t[l]) v /= piv;
    const auto eliminate = [&](std::vector<double>& row) {
      const double f = row[e];
      if (f == 0) return;
      for (int j = 0; j <= rhs; ++j) row[j] -= f * t[l][j];
    };
    for (int i = 0; i < m; ++i) {
      if (i != l) eliminate(t[i]);
    }
    eliminate(z);
    basis[l] = e;
  }
  return {};
}

// Weights for device d (stages `own`) that maximise what its activations
// weigh when all are kept (`offload` false) or all offloaded: a small LP over
// the distinct amounts, one row per most that fits together within `room`.
// Empty when there are too many such combinations to list.
std::vector<PhaseWeights> BestWeights(const std::vector<Phases>& phases,
                                      const std::vector<int>& own, double room, bool offload) {
  std::vector<double> amounts;  // distinct, largest first
  const auto index = [&](double x) {
    for (std::size_t j = 0; j < amounts.size(); ++j) {
      if (std::abs(amounts[j] - x) <= 1e-12 * std::max(1.0, x)) return static_cast<int>(j);
    }
    return -1;
  };
  std::vector<Phases> ph;
  for (int s : own) {
    ph.push_back(phases[s]);
    for (double x : {ph.back().whole, ph.back().after_b, ph.back().offloaded}) {
      if (x > 1e-12 && index(x) < 0) amounts.push_back(x);
    }
  }
  std::sort(amounts.begin(), amounts.end(), std::greater<>());
  const double tol = 1e-9 * std::max(1.0, room);
  if (amounts.empty() || amounts.front() > room + tol) return {};
  std::vector<std::vector<double>> rows;
  std::vector<double> count(amounts.size(), 0.0);
  long nodes = 0;
  constexpr long kMaxNodes = 100000;
  constexpr std::size_t kMaxRows = 300;
  const auto list = [&](auto&& self, std::size_t j, double used) -> bool {
    if (++nodes > kMaxNodes || rows.size() > kMaxRows) return false;
    if (j == amounts.size()) {
      if (used + amounts.back() > room + tol) rows.push_back(count);  // nothing more fits
      return true;
    }
    // (more than kMaxNodes of one amount end the listing anyway)
    const double most = std::min<double>(kMaxNodes, (room + tol - used) / amounts[j]);
    for (int k = static_cast<int>(most); k >= 0; --k) {
      count[j] = k;
      if (!self(self, j + 1, used + k * amounts[j])) return false;
    }
    count[j] = 0;
    return true;
  };
  if (!list(list, 0, 0.0) || rows.size() > kMaxRows) return {};
  std::vector<double> c(amounts.size(), 0.0);
  for (const Phases& h : ph) {
    const double whole = offload ? std::min(h.trip, h.life) : h.life;
    if (h.whole > 1e-12) c[index(h.whole)] += whole;
    if (h.after_b > 1e-12) c[index(h.after_b)] += h.w;
    if (offload && h.offloaded > 1e-12) c[index(h.offloaded)] += h.life - whole;
  }
  std::vector<double> w = MaximizeUnderOnes(rows, c);
  if (w.empty()) return {};
  double worst = 0;  // make every row hold exactly, whatever the rounding
  for (const auto& r : rows) {
    double sum = 0;
    for (std::size_t j = 0; j < r.size(); ++j) sum += r[j] * std::max(0.0, w[j]);
    worst = std::max(worst, sum);
  }
  const double scale = 1 / (std::max(worst, 1.0) * (1 + 1e-12));
  std::vector<PhaseWeights> out;
  for (const Phases& h : ph) {
    const auto weight = [&](double x) {
      return x > 1e-12 ? std::max(0.0, w[index(x)]) * scale : 0.0;
    };
    out.push_back({weight(h.whole), weight(h.after_b), weight(h.offloaded)});
  }
  return out;
}

// The memory-time bound (see the header) over the devices `group`, which
// share one host link, with weights[s] for each stage's phases: the least T
// such that the least link time that brings every device's weighted
// memory-time under T - edges_d is at most T - link_edges (the time of the
// span in which the link can copy nothing, see the header). edges_d: time of
// the span in which device d holds nothing counted: head[d] before its first
// F can start, and, when only whole activations count, tail[d] after its last
// B has ended (an activation waiting for its W may be what is left at the
// very end).
double MemoryBound(const Problem& p, const std::vector<Phases>& phases,
                   const std::vector<int>& group, const std::vector<PhaseWeights>& weights,
                   const std::vector<double>& head, const std::vector<double>& tail,
                   double link_edges) {
  const int S = p.stages(), M = p.microbatches;
  std::vector<double> edges = head;
  for (int d = 0; d < p.devices; ++d) {
    bool after_b = false;
    for (int s = 0; s < S; ++s) after_b |= p.stage_device[s] == d && weights[s].after_b > 0;
    if (!after_b) edges[d] += tail[d];
  }
  struct Item {
    double save, cost;  // weighted memory-time saved and link time spent by one offload
  };
  std::vector<double> keep(p.devices, 0.0);
  std::vector<std::vector<Item>> items(p.devices);
  for (int s = 0; s < S; ++s) {
    const int d = p.stage_device[s];
    if (std::find(group.begin(), group.end(), d) == group.end()) continue;
    const Phases& h = phases[s];
    const PhaseWeights& w = weights[s];
    keep[d] += M * (w.whole * h.life + w.after_b * h.w);
    if (!p.offload_allowed()) continue;
    const double save = (w.whole - w.offloaded) * (h.life - h.trip);
    if (save > 0 && (*p.offload)[s] > 0) items[d].push_back({save, 2 * (*p.offload)[s]});
  }
  for (auto& v : items) {
    std::sort(v.begin(), v.end(),
              [](const Item& x, const Item& y) { return x.save * y.cost > y.save * x.cost; });
  }
  // Least link time for device d to fit its memory-time under T - edges; inf
  // if it cannot. An activation is offloaded or not: the counts per stage are
  // whole, searched best ratio first under the fractional (greedy) bound of
  // the rest; past kMaxNodes the fractional value (never above) is taken.
  constexpr int kMaxNodes = 20000;
  const auto link_time = [&](int d, double T) {
    const std::vector<Item>& v = items[d];
    const double eps = 1e-12 * std::max(1.0, keep[d]);
    const double need = keep[d] - std::max(0.0, T - edges[d]);
    // The fractional least cost of covering `rest` with items i.. (inf: cannot).
    const auto fractional = [&](std::size_t i, double rest) {
      double cost = 0;
      for (; i < v.size() && rest > eps; ++i) {
        const double take = std::min<double>(M, rest / v[i].save);
        cost += take * v[i].cost;
        rest -= take * v[i].save;
      }
      return rest > eps ? std::numeric_limits<double>::infinity() : cost;
    };
    const double relaxed = fractional(0, need);
    if (!std::isfinite(relaxed) || need <= eps) return relaxed;
    double best = std::numeric_limits<double>::infinity();
    int nodes = 0;
    const auto search = [&](auto&& self, std::size_t i, double rest, double cost) -> void {
      if (rest <= eps) {
        best = std::min(best, cost);
        return;
      }
      if (i == v.size() || ++nodes > kMaxNodes || cost + fractional(i, rest) >= best - eps) return;
      const int most = static_cast<int>(std::min<double>(M, std::ceil(rest / v[i].save - 1e-9)));
      for (int n = most; n >= 0; --n) self(self, i + 1, rest - n * v[i].save, cost + n * v[i].cost);
    };
    search(search, 0, need, 0.0);
    return nodes > kMaxNodes ? relaxed : best;
  };
  const auto fits = [&](double T) {
    double total = 0;
    for (int d : group) total += link_time(d, T);
    return total <= 0 || total <= T - link_edges;
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

// The weightings the memory bound tries, each [S]: amounts over the most
// they can fill of the room; whole activations only, over the most of those
// that fit; and the LP's best for all kept and for all offloaded (falling back
// to the first on a device with too many combinations).
std::vector<std::vector<PhaseWeights>> Weightings(const Problem& p,
                                                  const std::vector<Phases>& phases) {
  const int S = p.stages();
  std::vector<std::vector<PhaseWeights>> out(4, std::vector<PhaseWeights>(S));
  for (int d = 0; d < p.devices; ++d) {
    std::vector<int> own;
    std::vector<double> all, whole;
    for (int s = 0; s < S; ++s) {
      if (p.stage_device[s] != d) continue;
      own.push_back(s);
      const Phases& h = phases[s];
      all.insert(all.end(), {h.whole, h.after_b, h.offloaded});
      whole.push_back(h.whole);
    }
    const double room = (*p.memory_limit)[d] - p.static_memory[d];
    const double fill = MostThatFits(all, room), fill_whole = MostThatFits(whole, room);
    if (own.empty() || fill <= 0 || fill_whole <= 0) continue;  // no activation fits: no bound here
    for (int s : own) {
      const Phases& h = phases[s];
      out[0][s] = {h.whole / fill, h.after_b / fill, h.offloaded / fill};
      out[1][s] = {h.whole / fill_whole, 0.0, 0.0};
    }
    for (int k : {2, 3}) {
      const std::vector<PhaseWeights> w = BestWeights(phases, own, room, k == 3);
      for (std::size_t i = 0; i < own.size(); ++i)
        out[k][own[i]] = w.empty() ? out[0][own[i]] : w[i];
    }
  }
  return out;
}

// Without offload, a device with one stage s runs only forwards until its
// first B, at most n = room / a of them (nothing frees memory before a B
// ends), and that B starts at least life_s - b_s after its device's first F:
// the device idles at least life_s - b_s - n f_s of that time.
double WarmupIdle(const Problem& p, const std::vector<Phases>& phases, int d) {
  if (!p.memory_limit || p.offload_allowed()) return 0;
  int stage = -1;
  for (int s = 0; s < p.stages(); ++s) {
    if (p.stage_device[s] != d) continue;
    if (stage >= 0) return 0;  // more than one stage: its B may come first
    stage = s;
  }
  if (stage < 0 || p.activation[stage] <= 0) return 0;
  const double room = (*p.memory_limit)[d] - p.static_memory[d];
  const double n = std::floor((room + 1e-9 * std::max(1.0, room)) / p.activation[stage]);
  if (n >= p.microbatches) return 0;
  return std::max(0.0, phases[stage].life - Duration(p, Op{OpType::kB, stage, 0}) - n * p.f[stage]);
}

// With a split backward a W can end device d, but once its last B has ended
// (every F and B of d done) only W's are left there: that B's own and those
// whose remains (a - freed_by_b each) were resident beside its whole
// activation while it ran, at most the room less that activation. Its
// micro-batch must still run the B chain below its stage and W(0), and what
// of that the W's left cannot cover is idle at the end of the iteration (a
// zero-bubble drain needs room for the W's it defers). The last B may be of
// any stage s of d; the W's left are bounded by a fractional knapsack (most
// W time per memory first).
double SplitTail(const Problem& p, int d) {
  if (!p.split_backward || !p.memory_limit) return 0;
  std::vector<std::pair<double, int>> by_density;  // (memory per unit of W time, stage)
  double free_w = 0;                               // W time that holds no memory
  for (int s = 0; s < p.stages(); ++s) {
    if (p.stage_device[s] != d || p.w[s] <= 0) continue;
    const double remains = p.activation[s] - p.freed_by_b[s];
    if (remains <= 0) {
      free_w += p.microbatches * p.w[s];
    } else {
      by_density.push_back({remains / p.w[s], s});
    }
  }
  std::sort(by_density.begin(), by_density.end());
  const double room = (*p.memory_limit)[d] - p.static_memory[d];
  double tail = std::numeric_limits<double>::infinity();
  double drain = p.w[0];  // below stage s: B(s-1..0) and W(0)
  for (int s = 0; s < p.stages(); ++s) {
    if (s > 0) drain += p.b[s - 1] + CommTime(p, s - 1);
    if (p.stage_device[s] != d) continue;
    double left = p.w[s] + free_w, rest = room - p.activation[s];
    for (const auto& [density, u] : by_density) {
      if (rest <= 0) break;
      const double time = std::min(p.microbatches * p.w[u], rest / density);
      left += time;
      rest -= time * density;
    }
    tail = std::min(tail, std::max(0.0, drain - left));
  }
  return tail == std::numeric_limits<double>::infinity() ? 0 : tail;
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
  const std::vector<Phases> phases = PhasesOf(p);

  if (p.objective == Objective::kMakespan) {
    for (int d = 0; d < D; ++d) {
      if (lowest[d] == S) continue;  // a device without stages
      const double head = est[dag.VertexOf(Op{OpType::kF, lowest[d], 0})];
      double tail = 0;
      if (!p.split_backward) {
        for (int s = lowest[d] - 1; s >= 0; --s) tail += p.b[s] + p.w[s] + CommTime(p, s);
      }
      tail += SplitTail(p, d);
      const double idle = WarmupIdle(p, phases, d);
      if (head + work[d] + tail + idle > lb.device_bound) {
        lb.device_bound = head + work[d] + tail + idle;
        lb.binding_device = d;
      }
    }
    if (p.memory_limit) {
      // Activations of stage s live from F(s,m) (not before the F chain
      // below s) to B(s,m), after which W(s,m) and the B chain below s run.
      // A link copies nothing before the first forward of its stages ends, nor
      // after the last reload but one backward and what must follow it.
      constexpr double kNone = std::numeric_limits<double>::infinity();
      std::vector<double> head(D, kNone), tail = head, first = head, last = head;
      double chain = 0;
      for (int s = 0; s < S; ++s) {
        const int d = p.stage_device[s];
        const double f_start = est[dag.VertexOf(Op{OpType::kF, s, 0})];
        const double b = Duration(p, Op{OpType::kB, s, 0});
        const double after_b = std::max(p.split_backward ? p.w[s] : 0.0, chain);
        head[d] = std::min(head[d], f_start);
        tail[d] = std::min(tail[d], after_b);
        if (p.offload_allowed() && p.offloadable[s] > 0) {
          first[d] = std::min(first[d], f_start + p.f[s]);
          last[d] = std::min(last[d], b + after_b);
        }
        chain += b + (s + 1 < S ? CommTime(p, s) : 0.0);
      }
      for (int d = 0; d < D; ++d) {
        if (lowest[d] == S) head[d] = tail[d] = 0;
      }
      const auto weightings = Weightings(p, phases);
      for (const std::vector<int>& link : p.host_links) {
        double start = kNone, end = kNone;
        for (int d : link) {
          start = std::min(start, first[d]);
          end = std::min(end, last[d]);
        }
        const double edges = start < kNone ? start + end : 0.0;
        for (const std::vector<PhaseWeights>& w : weightings) {
          lb.memory_bound =
              std::max(lb.memory_bound, MemoryBound(p, phases, link, w, head, tail, edges));
        }
      }
    }
    lb.value = AtGrain(p, std::max({lb.device_bound, lb.critical_path, lb.memory_bound}));
    return lb;
  }
  // device_span: the longest F(s)..B(s)[..W(s)] round trip of a stage on d.
  double best = 0;
  const std::vector<double> no_edges(D, 0.0);
  const auto weightings =
      p.memory_limit ? Weightings(p, phases) : std::vector<std::vector<PhaseWeights>>{};
  for (int d = 0; d < D; ++d) {
    double span = work[d];
    for (int s = 0; s < S; ++s) {
      if (p.stage_device[s] == d) span = std::max(span, phases[s].life + phases[s].w);
    }
    if (work[d] > lb.device_bound) {
      lb.device_bound = work[d];
      lb.binding_device = d;
    }
    best = std::max(best, span);
    if (p.memory_limit) {
      for (const std::vector<PhaseWeights>& w : weightings)
        lb.memory_bound =
            std::max(lb.memory_bound, MemoryBound(p, phases, {d}, w, no_edges, no_edges, 0.0));
    }
  }
  lb.value = AtGrain(p, std::max(best, lb.memory_bound));
  return lb;
}

}  // namespace optpipe
