// Partition DP: cut a list of n layers into S contiguous stages so that the
// largest stage cost is minimal (Chiang et al., "Optimizing Pipeline
// Parallelism for Deep Learning with Activation Checkpointing", 2025,
// eq. 1-3):
//
//   D(i, q) = min_{i <= k < n, k in P} max(C_{S-q}(i, k), D(k+1, q-1)),
//   D(i, 1) = C_{S-1}(i, n-1),        answer D(0, S),
//
// where C_j(i, k) is the cost of layers i..k as stage j and P the boundaries
// that may be cut (eq. 3: no cut across a fast-forward / fused edge).
// The cost is any function of (stage, first, last); +infinity marks a stage
// that does not fit (memory). O(S n^2) cost calls; memoise an expensive cost.
//
//   Partition p = *PartitionLayers(n, S, splittable, [&](int s, int i, int k) {
//     return time_of(i, k);
//   });
//   // layers p.first[s] .. p.first[s+1]-1 form stage s; p.objective = max cost
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"

namespace optpipe::planner {

// Cost of layers first..last (inclusive) as stage `stage`; +inf: infeasible.
using StageCost = std::function<double(int stage, int first, int last)>;

struct Partition {
  std::vector<int> first;  // [S+1]: first layer of each stage; first[S] = n
  double objective = 0;    // the largest stage cost
};

// splittable[k] (size n-1): a stage may end after layer k. kInvalidArgument
// when fewer than S stages can be formed; kInfeasible when every partition has
// a stage of infinite cost. Of the optimal partitions it returns the most
// balanced one: the least sum of squared stage costs (a second DP, 2x the
// cost calls).
StatusOr<Partition> PartitionLayers(int layers, int stages, const std::vector<bool>& splittable,
                                    const StageCost& cost);

// The largest stage cost of a given partition (+inf when one does not fit).
double PartitionObjective(const std::vector<int>& first, const StageCost& cost);

}  // namespace optpipe::planner
