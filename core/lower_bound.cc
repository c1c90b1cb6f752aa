#include "core/lower_bound.h"

#include <algorithm>
#include <limits>

#include "core/dag.h"

namespace optpipe {

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
    lb.value = std::max(lb.device_bound, lb.critical_path);
    return lb;
  }
  // device_span: the longest F(s)..B(s)[..W(s)] round trip of a stage on d.
  double best = 0;
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
  }
  lb.value = best;
  return lb;
}

}  // namespace optpipe
