// Quality report for auto as the CLI runs it (exact/solve.h: the heuristics,
// and on a time grid the SAT probes below them): on memory-rich problems, auto vs the
// lower bound and vs the best published schedule; under memory limits that
// leave 60% and 30% of 1F1B's activation memory, auto vs the best schedule
// that ignores memory, and vs PipeOffload (po-h, po-f); last, OptPipe's
// memory-limited regime: a host link slower than the compute (k > 1), where
// PipeOffload offloads everything and waits for its reloads (po-keep: the same
// orders, with the activations that stay on the device searched).
// Run: build/bin/optpipe_quality_report [seconds per auto run, default 1]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>

#include "core/lower_bound.h"
#include "exact/device_search_bound.h"
#include "exact/solve.h"
#include "heuristics/auto_method.h"
#include "heuristics/method.h"

namespace optpipe {
namespace {

// A Llama-like pipeline: heavier first/last stages (embedding, loss), offload
// about 0.6x a forward (PipeOffload's k < 1 regime), one host link per pair.
Problem LlamaLike(int D, int M, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(0.95, 1.05);
  Problem p;
  p.name = "llama-like-" + std::to_string(D) + "x" + std::to_string(M);
  p.devices = D;
  p.microbatches = M;
  p.stage_device = *PlaceStages("interleaved", D, 1);
  for (int s = 0; s < D; ++s) {
    const double edge = (s == 0 ? 1.15 : s == D - 1 ? 1.35 : 1.0);
    p.f.push_back(18.2 * edge * jitter(rng));
    p.b.push_back(20.6 * edge * jitter(rng));
    p.w.push_back(15.1 * edge * jitter(rng));
    p.activation.push_back(2.6 * (s == D - 1 ? 1.3 : 1.0));
    p.freed_by_b.push_back(1.0);
    p.offloadable.push_back(p.activation.back());
  }
  p.comm.assign(D - 1, 0.08);
  p.offload = std::vector<double>(D, 11.0);
  p.static_memory.assign(D, 28.0);
  for (int d = 0; d < D; d += 2)
    p.host_links.push_back(d + 1 < D ? std::vector<int>{d, d + 1} : std::vector<int>{d});
  return p;
}

// Unit costs (f = b = w = 1, activation 1), one host link per device, a round
// trip of 2 * offload per activation against 3 units of compute, and room for
// `room` activations per device.
Problem SlowLink(int D, int M, int v, double offload, double room) {
  Problem p;
  p.name = "unit-" + std::to_string(D) + "x" + std::to_string(M) + "-v" + std::to_string(v);
  p.devices = D;
  p.microbatches = M;
  p.stages_per_device = v;
  p.stage_device = *PlaceStages("interleaved", D, v);
  const int S = D * v;
  p.f.assign(S, 1.0);
  p.b.assign(S, 1.0);
  p.w.assign(S, 1.0);
  p.activation.assign(S, 1.0);
  p.freed_by_b.assign(S, 0.5);
  p.offloadable.assign(S, 1.0);
  p.comm.assign(S - 1, 0.0);
  p.offload = std::vector<double>(S, offload);
  p.static_memory.assign(D, 0.0);
  p.memory_limit = std::vector<double>(D, room);
  for (int d = 0; d < D; ++d) p.host_links.push_back({d});
  return p;
}

// A method as `optpipe schedule` runs it (auto with its SAT polish on a time grid).
double Run(const Problem& p, const std::string& m, double seconds) {
  SolveOptions o;
  o.method = m;
  o.time_limit_s = seconds;
  StatusOr<SolveResult> s = Solve(p, o);
  return s.ok() && s->has_schedule() ? s->objective : -1;
}

void Row(const char* what, double v, double ref) {
  if (v < 0) {
    std::printf("  %-34s %10s\n", what, "-");
  } else {
    std::printf("  %-34s %10.1f   x%.3f\n", what, v, v / ref);
  }
}

// How much lower auto's makespan is than PipeOffload's, and the most any
// schedule could gain: no schedule ends before the lower bound.
void VersusPipeOffload(const char* po_name, double a, double po, double lb) {
  std::printf("  auto vs %s: %.1f%% lower makespan (at most %.1f%% possible)\n", po_name,
              100 * (1 - a / po), 100 * std::max(0.0, 1 - lb / po));
}

}  // namespace
}  // namespace optpipe

int main(int argc, char** argv) {
  using namespace optpipe;
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  for (auto [D, M] : {std::pair{4, 16}, {8, 32}, {16, 64}}) {
    Problem rich = LlamaLike(D, M, 7);
    const double lb = ComputeLowerBound(rich).value;
    std::printf("%s, memory-rich (ratios to the lower bound %.1f)\n", rich.name.c_str(), lb);
    double best_published = -1;
    for (const MethodInfo& m : Methods()) {
      if (m.name == "auto" || m.name == "list") continue;
      const double v = Run(rich, m.name, seconds);
      if (v >= 0 && (best_published < 0 || v < best_published)) best_published = v;
      Row(m.name.c_str(), v, lb);
    }
    Row("list", Run(rich, "list", seconds), lb);
    const double unlimited = Run(rich, "auto", seconds);
    Row("auto", unlimited, lb);
    std::printf("  auto / best published: %.3f\n", unlimited / best_published);

    // One capacity for every device: static memory plus a share of the
    // activation memory 1F1B needs on its busiest device (device 0).
    StatusOr<Solution> one = RunMethod(rich, "1f1b");
    const double need = one->sim.peak_memory[0] - rich.static_memory[0];
    for (double share : {0.6, 0.3, -0.3}) {
      // share < 0: the same limit on a slow host link (a round trip 1.5x a
      // micro-batch's compute, PipeOffload's k > 1), shared by device pairs.
      const bool slow = share < 0;
      share = std::abs(share);
      Problem tight = rich;
      if (slow) tight.offload = std::vector<double>(D, 40.0);
      tight.memory_limit = std::vector<double>(D, rich.static_memory[0] + share * need);
      std::printf(
          "%s, limit = static + %.0f%% of 1F1B's activations, %.2f%s (ratios to auto unlimited "
          "%.1f)\n",
          rich.name.c_str(), 100 * share, share * need, slow ? ", slow host link" : "", unlimited);
      if (share * need < *std::max_element(rich.activation.begin(), rich.activation.end())) {
        std::printf("  (cannot hold one activation of the last stage: no schedule exists)\n");
        continue;
      }
      const double po_h = Run(tight, "po-h", seconds), po_f = Run(tight, "po-f", seconds);
      const double ada = Run(tight, "adaoffload", seconds), list = Run(tight, "list", seconds);
      const double a = Run(tight, "auto", seconds);
      Row("1f1b", Run(tight, "1f1b", seconds), unlimited);
      Row("po-h", po_h, unlimited);
      Row("po-f", po_f, unlimited);
      Row("adaoffload", ada, unlimited);
      Row("list", list, unlimited);
      Row("auto", a, unlimited);
      const double lb = BestLowerBound(tight);
      Row("lower bound", lb, unlimited);
      if (a > 0 && po_h > 0) VersusPipeOffload("po-h", a, po_h, lb);
      if (a > 0 && po_f > 0) VersusPipeOffload("po-f", a, po_f, lb);
    }
  }
  std::printf(
      "Slow host link (a round trip 4 units per 3 of compute), room for 3 or 5 activations per "
      "device: auto vs PipeOffload (ratios to the lower bound)\n");
  for (auto [D, M, v] : {std::tuple{4, 8, 1}, {8, 16, 1}, {8, 16, 2}, {8, 32, 2}}) {
    for (double room : {3.0, 5.0}) {
      const Problem p = SlowLink(D, M, v, 2.0, room);
      const double lb = BestLowerBound(p);
      std::printf("%s, room %.0f (lower bound %.1f)\n", p.name.c_str(), room, lb);
      const double po_h = Run(p, "po-h", seconds), po_f = Run(p, "po-f", seconds);
      const double a = Run(p, "auto", seconds);
      Row("po-h", po_h, lb);
      Row("po-f", po_f, lb);
      Row("po-keep", Run(p, "po-keep", seconds), lb);
      Row("auto", a, lb);
      const double po = po_h < 0 ? po_f : po_f < 0 ? po_h : std::min(po_h, po_f);
      if (a > 0 && po > 0) {
        VersusPipeOffload("the better PipeOffload", a, po, lb);
      } else if (a > 0) {
        std::printf("  PipeOffload does not fit; auto does\n");
      }
    }
  }
  return 0;
}
