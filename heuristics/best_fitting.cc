#include "heuristics/best_fitting.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "heuristics/method.h"
#include "heuristics/scorer.h"

namespace optpipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Batches of 1, 2, 4, 8, then 16 candidates: the first (published default)
// alone, so a tight time limit costs one candidate; sizes do not depend on the
// number of threads, so neither do results.
constexpr int kMaxBatch = 16;

double Peak(const SimResult& r) {
  return *std::max_element(r.peak_memory.begin(), r.peak_memory.end());
}

// Candidates [0, n) in batches until `more` says stop; calls take(i, cand, score) in order.
void Scan(
    const Problem& p, int n, const std::function<std::optional<Schedule>(int)>& make, int threads,
    const std::function<bool()>& more,
    const std::function<void(int, std::optional<Schedule>&, std::optional<SimResult>&)>& take) {
  std::vector<std::optional<Schedule>> cand;
  std::vector<std::optional<SimResult>> score;
  Scorer scorer(p, threads);
  for (int first = 0, batch = 1; first < n && (first == 0 || more());
       first += batch, batch = std::min(2 * batch, kMaxBatch)) {
    const int count = std::min(batch, n - first);
    // A candidate not yet started when time is up is skipped (the first never is).
    scorer.Score(
        count, [&](int i) { return first + i == 0 || more() ? make(first + i) : std::nullopt; },
        cand, score);
    for (int i = 0; i < count; ++i) take(first + i, cand[i], score[i]);
  }
}

}  // namespace

StatusOr<Schedule> BestFitting(const Problem& p, const std::string& knob, int n,
                               const std::function<std::optional<Schedule>(int)>& make,
                               const std::function<std::string(int)>& label,
                               const SearchOptions& opt, int* chosen) {
  const ScanClock clock(opt);
  const auto more = [&] { return clock.more(); };
  std::optional<Schedule> best;
  std::pair<double, double> best_key{kInf, kInf};  // objective, peak memory
  int scanned = 0;
  Scan(p, n, make, opt.threads, more,
       [&](int i, std::optional<Schedule>& s, std::optional<SimResult>& r) {
         scanned = i + 1;
         if (!r) return;
         const std::pair key{r->objective, Peak(*r)};
         const double tol = 1e-9 * std::max(1.0, std::abs(key.first));
         if (!best || key.first < best_key.first - tol ||
             (key.first <= best_key.first + tol && key.second < best_key.second)) {
           best = std::move(s);
           best_key = key;
           if (chosen) *chosen = i;
         }
       });
  if (best) return std::move(*best);

  // None fits (or none runs): the leanest without a limit, then the least
  // uniform raise of the limit under which it runs; on the same clock (a
  // caller that gave this search a time limit waits no longer for the message).
  Problem unlimited = p;
  unlimited.memory_limit.reset();
  const std::vector<double> limit = p.memory_limit.value_or(std::vector<double>(p.devices, kInf));
  int lean = -1;
  double least = kInf;
  std::vector<double> free_peak;
  std::optional<Schedule> lean_schedule;
  int examined = 0;
  Scan(unlimited, scanned, make, opt.threads, more,
       [&](int i, std::optional<Schedule>& s, std::optional<SimResult>& r) {
         examined = i + 1;
         if (!r) return;
         double over = -kInf;
         for (int d = 0; d < p.devices; ++d) over = std::max(over, r->peak_memory[d] - limit[d]);
         if (over < least) {
           least = over;
           lean = i;
           free_peak = r->peak_memory;
           lean_schedule = std::move(s);
         }
       });
  if (!p.memory_limit) return Internal("every " + knob + " deadlocks, without a memory limit");
  if (lean < 0) {  // candidates built for the limit, none of which runs under it
    return Infeasible("does not fit the memory limit: no " + knob + " runs under memory.limit [" +
                      FormatValues(limit) + "] (" + std::to_string(scanned) + " tried)");
  }
  Problem raised = p;
  double lo = 0, hi = least;
  for (int it = 0; it < 30 && hi - lo > 1e-3 * std::max(1.0, hi) && more(); ++it) {
    const double mid = (lo + hi) / 2;
    for (int d = 0; d < p.devices; ++d) (*raised.memory_limit)[d] = limit[d] + mid;
    if (Simulate(raised, *lean_schedule).ok()) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  std::vector<double> need(p.devices);
  for (int d = 0; d < p.devices; ++d) need[d] = std::min(free_peak[d], limit[d] + hi);
  const std::string rerun = examined < scanned ? "; " + std::to_string(examined) +
                                                     " re-run without the limit in the time given"
                                               : "";
  const std::string which = scanned == 1
                                ? "it"
                                : "no " + knob + " fits (" + std::to_string(scanned) + " tried" +
                                      rerun + "); the leanest, " + label(lean) + ",";
  return Infeasible("does not fit the memory limit: " + which + " needs peak memory [" +
                    FormatValues(need) + "] against memory.limit [" + FormatValues(limit) + "]");
}

}  // namespace optpipe
