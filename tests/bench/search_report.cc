// Local-search improvement over time: from the list scheduler's schedule, the
// incumbent after 0.1, 0.25, 0.5, 1, 2 and 4 s of LocalSearch (as a ratio to
// the lower bound, the device search bound included), and evaluations per
// second on one thread and on all.
// Run: build/bin/optpipe_search_report [seconds, default 4] [problem.json...]
// (default: some tight-memory problems of tests/bench/problems).
#include <tbb/info.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/format.h"
#include "core/text_format.h"
#include "exact/device_search_bound.h"
#include "heuristics/list_scheduler.h"
#include "heuristics/local_search.h"

namespace optpipe {
namespace {

struct Trace {
  std::vector<std::pair<double, double>> points;  // (seconds, objective), improving
  double evals_per_s = 0;
};

Trace Search(const Problem& p, const Schedule& start, double seconds, int threads) {
  Trace tr;
  const auto t0 = std::chrono::steady_clock::now();
  SearchOptions opt;
  opt.time_limit_s = seconds;
  opt.threads = threads;
  opt.on_improvement = [&](const Schedule&, const SimResult& r) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    tr.points.push_back({t, r.objective});
  };
  StatusOr<SearchResult> r = LocalSearch(p, start, opt);
  if (r.ok() && r->seconds > 0) tr.evals_per_s = r->evaluations / r->seconds;
  return tr;
}

// The incumbent at time t: the last improvement at or before t, else the start.
double At(const Trace& tr, double t, double start) {
  double v = start;
  for (const auto& [when, obj] : tr.points) {
    if (when <= t) v = obj;
  }
  return v;
}

}  // namespace
}  // namespace optpipe

int main(int argc, char** argv) {
  using namespace optpipe;
  const double seconds = argc > 1 ? std::atof(argv[1]) : 4.0;
  std::vector<std::string> files(argv + std::min(argc, 2), argv + argc);
  if (files.empty()) {
    for (const char* name :
         {"r48-6s", "hetoff-4s", "u48-r2-o2", "hetmem8x16-1f", "fz8x16v1-L3", "fz8x16v2-L5"}) {
      files.push_back(std::string(OPTPIPE_SOURCE_DIR) + "/tests/bench/problems/" + name + ".json");
    }
  }
  const std::vector<double> marks = {0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32};
  std::printf("| problem | bound | list |");
  for (double m : marks) {
    if (m <= seconds) std::printf(" %gs |", m);
  }
  std::printf(" evals/s, 1 thread | evals/s, %d threads |\n|---|---:|---:|",
              tbb::info::default_concurrency());
  for (double m : marks) {
    if (m <= seconds) std::printf("---:|");
  }
  std::printf("---:|---:|\n");
  for (const std::string& f : files) {
    StatusOr<Problem> p = LoadProblem(f);
    if (!p.ok()) {
      std::fprintf(stderr, "%s: %s\n", f.c_str(), p.status().message().c_str());
      return 2;
    }
    StatusOr<Schedule> start = BuildList(*p);
    StatusOr<SimResult> s0 =
        start.ok() ? Simulate(*p, *start) : StatusOr<SimResult>(start.status());
    if (!s0.ok()) {
      std::printf("| %s | list: %s |\n", p->name.c_str(), s0.status().message().c_str());
      continue;
    }
    const double lb = BestLowerBound(*p);
    const Trace one = Search(*p, *start, std::min(seconds, 1.0), 1);
    const Trace all = Search(*p, *start, seconds, 0);
    std::printf("| %s | %s | x%.3f |", p->name.c_str(), FormatNumber(lb).c_str(),
                s0->objective / lb);
    for (double m : marks) {
      if (m <= seconds) std::printf(" x%.3f |", At(all, m, s0->objective) / lb);
    }
    std::printf(" %.0f | %.0f |\n", one.evals_per_s, all.evals_per_s);
  }
  return 0;
}
