#include "runtime/measure.h"

#include <algorithm>

namespace optpipe::runtime {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

TimedSchedule MeasuredSchedule(const Problem& p, const Schedule& s, const IterationResult& it) {
  TimedSchedule t;
  t.problem = p.name;
  t.method = s.method + " (measured)";
  for (const MeasuredOp& m : it.ops) t.ops.push_back({m.op, m.device, m.start, m.end});
  SortByStart(t.ops);
  t.makespan = it.makespan;
  t.device_span = it.device_span;
  t.objective = it.objective;
  t.peak_memory = it.peak_memory;
  return t;
}

Problem ProfileFromRun(const Problem& p, const RunResult& r) {
  const int S = p.stages();
  std::vector<std::vector<double>> f(S), b(S), w(S), copy(S);
  for (const IterationResult& it : r.iterations) {
    for (const MeasuredOp& m : it.ops) {
      const double d = m.end - m.start;
      switch (m.op.type) {
        case OpType::kF:
          f[m.op.stage].push_back(d);
          break;
        case OpType::kB:
          b[m.op.stage].push_back(d);
          break;
        case OpType::kW:
          w[m.op.stage].push_back(d);
          break;
        default:
          copy[m.op.stage].push_back(d);
          break;
      }
    }
  }
  Problem q = p;
  for (int s = 0; s < S; ++s) {
    if (!f[s].empty()) q.f[s] = Median(f[s]);
    if (!b[s].empty()) {
      const double mb = Median(b[s]);
      if (p.split_backward) {
        q.b[s] = mb;
      } else {  // B ran b + w: keep the problem's split of it
        const double sum = p.b[s] + p.w[s];
        q.b[s] = sum > 0 ? mb * p.b[s] / sum : mb;
        q.w[s] = sum > 0 ? mb * p.w[s] / sum : 0.0;
      }
    }
    if (p.split_backward && !w[s].empty()) q.w[s] = Median(w[s]);
    if (q.offload && !copy[s].empty()) (*q.offload)[s] = Median(copy[s]);
  }
  return q;
}

const IterationResult& MedianIteration(const RunResult& r) {
  std::vector<std::size_t> idx(r.iterations.size());
  for (std::size_t k = 0; k < idx.size(); ++k) idx[k] = k;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return r.iterations[a].makespan < r.iterations[b].makespan;
  });
  return r.iterations[idx[(idx.size() - 1) / 2]];
}

}  // namespace optpipe::runtime
