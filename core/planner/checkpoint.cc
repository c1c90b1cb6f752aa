#include "core/planner/checkpoint.h"

#include <algorithm>
#include <cmath>

namespace optpipe::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool MayStartBlock(const std::vector<bool>& splittable, int k) {
  return k == 0 || splittable[k - 1];
}

// What a recomputed layer holds from F (booked) until W.
double Held(const LayerCost& l, const CheckpointOptions& opt) {
  return opt.split_backward ? std::min(l.retained_for_w, l.activation) : 0.0;
}

// One point of a suffix's Pareto front, with the choice that made it.
struct Point {
  double mem = 0;   // stored bytes per micro-batch of the suffix
  double gain = 0;  // forward time of the kept layers (not recomputed)
  int next = -1;    // first layer after this choice (i+1 for K, block end for R)
  int at = -1;      // index of the continuation in the front of `next`
  bool keep = false;
};

// Keeps the points no other point beats in both memory and gain.
void Prune(std::vector<Point>& pts) {
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    return a.mem != b.mem ? a.mem < b.mem : a.gain > b.gain;
  });
  std::vector<Point> out;
  for (const Point& p : pts) {
    if (out.empty() || p.gain > out.back().gain) out.push_back(p);
  }
  pts = std::move(out);
}

}  // namespace

bool FitsBudget(double need, double budget) {
  return need <= budget + 1e-9 * std::max(1.0, std::abs(budget));
}

std::string CheckpointPlan::Text() const {
  std::string s;
  for (LayerMode m : modes) s.push_back(static_cast<char>(m));
  return s;
}

StatusOr<CheckpointPlan> EvaluateCheckpoints(const std::vector<LayerCost>& layers,
                                             const std::vector<bool>& splittable,
                                             const std::vector<LayerMode>& modes,
                                             const CheckpointOptions& opt) {
  const int n = static_cast<int>(layers.size());
  if (static_cast<int>(modes.size()) != n || static_cast<int>(splittable.size()) != n - 1) {
    return InvalidArgument("checkpoint modes: expected " + std::to_string(n) + " modes and " +
                           std::to_string(n - 1) + " boundaries");
  }
  CheckpointPlan p;
  p.modes = modes;
  double block = 0;
  for (int k = 0; k < n; ++k) {
    const LayerCost& l = layers[k];
    p.f += l.f;
    p.b += l.b;
    p.w += l.w;
    switch (modes[k]) {
      case LayerMode::kKeep:
        p.activation += l.activation;
        p.freed_by_b += opt.split_backward ? l.activation - std::min(l.retained_for_w, l.activation)
                                           : l.activation;
        block = 0;
        break;
      case LayerMode::kCheckpoint:
        if (!MayStartBlock(splittable, k)) {
          return InvalidArgument("checkpoint modes[" + std::to_string(k) +
                                 "]: a block cannot start at an uncuttable boundary");
        }
        p.activation += l.input + Held(l, opt);
        p.freed_by_b += l.input + (opt.split_backward ? 0.0 : Held(l, opt));
        p.recompute += l.f;
        block = l.activation - Held(l, opt);
        break;
      case LayerMode::kRecompute:
        if (k == 0 || modes[k - 1] == LayerMode::kKeep) {
          return InvalidArgument("checkpoint modes[" + std::to_string(k) +
                                 "]: 'r' must follow an 'R' or another 'r'");
        }
        p.activation += Held(l, opt);
        p.freed_by_b += opt.split_backward ? 0.0 : Held(l, opt);
        p.recompute += l.f;
        block += l.activation - Held(l, opt);
        break;
    }
    p.transient = std::max(p.transient, block);
  }
  p.b += p.recompute;
  p.need = opt.in_flight * p.activation + p.transient;
  return p;
}

CheckpointSearch SearchCheckpoints(const std::vector<LayerCost>& layers,
                                   const std::vector<bool>& splittable,
                                   const CheckpointOptions& opt) {
  const int n = static_cast<int>(layers.size());
  const double l = std::max(1, opt.in_flight);
  std::vector<double> held(n), live(n);
  double keep_all = 0;
  for (int k = 0; k < n; ++k) {
    held[k] = Held(layers[k], opt);
    live[k] = layers[k].activation - held[k];
    keep_all += layers[k].activation;
  }
  // When keeping everything fits, the least recompute time is 0 and only
  // layers with no forward time may join a block (to lower the need): this
  // keeps the search small when memory is plentiful.
  const bool keep_all_fits = FitsBudget(l * keep_all, opt.budget);
  std::vector<bool> any(n, true), cheap(n);
  for (int k = 0; k < n; ++k) cheap[k] = !keep_all_fits || layers[k].f == 0;

  // The transients of every block of `allowed` layers, summed in one order so
  // that equal blocks give equal values: the candidate bounds t.
  auto bounds_of = [&](const std::vector<bool>& allowed) {
    std::vector<double> bounds = {0.0};
    for (int i = 0; i < n; ++i) {
      if (!MayStartBlock(splittable, i)) continue;
      double sum = 0;
      for (int j = i; j < n && allowed[j]; ++j) bounds.push_back(sum += live[j]);
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    return bounds;
  };
  // The least stored memory with blocks of `allowed` layers and transient <= t.
  std::vector<double> least(n + 1);
  auto least_stored = [&](double t, const std::vector<bool>& allowed) {
    least[n] = 0;
    for (int i = n - 1; i >= 0; --i) {
      least[i] = layers[i].activation + least[i + 1];
      if (!MayStartBlock(splittable, i)) continue;
      double sum = 0, mem = layers[i].input;
      for (int j = i; j < n && allowed[j] && (sum += live[j]) <= t; ++j) {
        mem += held[j];
        least[i] = std::min(least[i], mem + least[j + 1]);
      }
    }
    return least[0];
  };

  CheckpointSearch out;
  out.min_need = kInf;
  for (double t : bounds_of(any))
    out.min_need = std::min(out.min_need, l * least_stored(t, any) + t);

  std::vector<std::vector<Point>> front(n + 1);
  for (double t : bounds_of(cheap)) {
    if (!FitsBudget(l * least_stored(t, cheap) + t, opt.budget)) continue;
    // Pareto fronts of the suffixes, memory capped by what l micro-batches may store.
    const double cap = (opt.budget - t) / l + 1e-9 * std::max(1.0, std::abs(opt.budget)) / l;
    front[n] = {Point{}};
    for (int i = n - 1; i >= 0; --i) {
      std::vector<Point> pts;
      for (std::size_t e = 0; e < front[i + 1].size(); ++e) {
        const Point& c = front[i + 1][e];
        const double mem = layers[i].activation + c.mem;
        if (mem <= cap)
          pts.push_back({mem, layers[i].f + c.gain, i + 1, static_cast<int>(e), true});
      }
      if (MayStartBlock(splittable, i)) {
        double sum = 0, mem = layers[i].input;
        for (int j = i; j < n && cheap[j] && (sum += live[j]) <= t; ++j) {
          mem += held[j];
          for (std::size_t e = 0; e < front[j + 1].size(); ++e) {
            const Point& c = front[j + 1][e];
            if (mem + c.mem <= cap) {
              pts.push_back({mem + c.mem, c.gain, j + 1, static_cast<int>(e), false});
            }
          }
        }
      }
      Prune(pts);
      front[i] = std::move(pts);
    }
    if (front[0].empty()) continue;

    // The most kept forward time; rebuild its modes.
    std::vector<LayerMode> modes(n, LayerMode::kKeep);
    for (int i = 0, at = static_cast<int>(front[0].size()) - 1; i < n;) {
      const Point& p = front[i][at];
      if (!p.keep) {
        modes[i] = LayerMode::kCheckpoint;
        for (int k = i + 1; k < p.next; ++k) modes[k] = LayerMode::kRecompute;
      }
      i = p.next;
      at = p.at;
    }
    StatusOr<CheckpointPlan> plan = EvaluateCheckpoints(layers, splittable, modes, opt);
    if (!plan.ok() || !FitsBudget(plan->need, opt.budget)) continue;  // cannot happen
    const bool better = !out.best || plan->recompute < out.best->recompute ||
                        (plan->recompute == out.best->recompute && plan->need < out.best->need);
    if (better) out.best = std::move(*plan);
  }
  return out;
}

}  // namespace optpipe::planner
