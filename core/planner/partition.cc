#include "core/planner/partition.h"

#include <algorithm>
#include <limits>
#include <string>

namespace optpipe::planner {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

StatusOr<Partition> PartitionLayers(int n, int S, const std::vector<bool>& splittable,
                                    const StageCost& cost) {
  if (n < 1) return InvalidArgument("layers: must be >= 1");
  if (S < 1) return InvalidArgument("stages: must be >= 1");
  if (static_cast<int>(splittable.size()) != n - 1) {
    return InvalidArgument("splittable: expected " + std::to_string(n - 1) + " boundaries, got " +
                           std::to_string(splittable.size()));
  }
  const int cuts = static_cast<int>(std::count(splittable.begin(), splittable.end(), true));
  if (cuts < S - 1) {
    return InvalidArgument("stages: " + std::to_string(S) + " stages need " +
                           std::to_string(S - 1) + " cuts, but only " + std::to_string(cuts) +
                           " of the " + std::to_string(n) + " layers' boundaries may be cut");
  }
  // best[q][i]: D(i, q) of eq. 2-3, the smallest largest cost of layers i..n-1
  // as the last q stages (stage S-q first).
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(n + 1, kInf));
  for (int i = S - 1; i < n; ++i) {
    best[1][i] = cost(S - 1, i, n - 1);
  }
  for (int q = 2; q <= S; ++q) {
    // Stage S-q starts at i >= S-q and leaves at least q-1 layers; stage 0
    // starts at layer 0.
    const int lo = q == S ? 0 : S - q, hi = q == S ? 0 : n - q;
    for (int i = lo; i <= hi; ++i) {
      for (int k = i; k <= n - q; ++k) {
        if (!splittable[k] || best[q - 1][k + 1] == kInf) continue;
        const double c = std::max(cost(S - q, i, k), best[q - 1][k + 1]);
        best[q][i] = std::min(best[q][i], c);
      }
    }
  }
  if (best[S][0] == kInf) {
    return Infeasible("no partition of the " + std::to_string(n) + " layers into " +
                      std::to_string(S) + " stages has every stage feasible");
  }
  // Among the partitions that reach the optimum, the most balanced: the least
  // sum of squared stage costs with every stage within the optimum (a second
  // DP over the same recursion, costs above the optimum excluded).
  const double limit = best[S][0];
  std::vector<std::vector<double>> sq(S + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> cut(S + 1, std::vector<int>(n + 1, -1));
  for (int i = S - 1; i < n; ++i) {
    const double c = cost(S - 1, i, n - 1);
    if (c <= limit) sq[1][i] = c * c, cut[1][i] = n - 1;
  }
  for (int q = 2; q <= S; ++q) {
    const int lo = q == S ? 0 : S - q, hi = q == S ? 0 : n - q;
    for (int i = lo; i <= hi; ++i) {
      for (int k = i; k <= n - q; ++k) {
        if (!splittable[k] || sq[q - 1][k + 1] == kInf) continue;
        const double c = cost(S - q, i, k);
        if (c > limit) continue;
        if (c * c + sq[q - 1][k + 1] < sq[q][i]) {
          sq[q][i] = c * c + sq[q - 1][k + 1];
          cut[q][i] = k;
        }
      }
    }
  }
  Partition p;
  p.objective = limit;
  for (int q = S, i = 0; q >= 1; --q) {
    p.first.push_back(i);
    i = cut[q][i] + 1;
  }
  p.first.push_back(n);
  return p;
}

double PartitionObjective(const std::vector<int>& first, const StageCost& cost) {
  double worst = 0;
  for (std::size_t s = 0; s + 1 < first.size(); ++s) {
    worst = std::max(worst, cost(static_cast<int>(s), first[s], first[s + 1] - 1));
  }
  return worst;
}

}  // namespace optpipe::planner
