// The bridge between schedules and the model: branching hints from a warm-start
// schedule (Hint) going in, and Decode's per-lane orders of a solution coming out.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "exact/model_internal.h"

namespace optpipe::milp {
namespace internal {

void Builder::ComputeHints() {
  hx_.assign(op_.size(), std::numeric_limits<double>::quiet_NaN());
  hoff_.assign(static_cast<std::size_t>(S_) * M_, 0);
  if (!hint_.schedule || !hint_.sim) return;
  has_hint_ = true;
  const OpSpace space = p_.op_space();
  hoff_ = OffloadedSet(p_, *hint_.schedule);
  const bool any_offload = std::find(hoff_.begin(), hoff_.end(), 1) != hoff_.end();
  for (int i = 0; i < nc_; ++i) hx_[i] = hint_.sim->start[space.Index(op_[i])];
  // Relabel each (type, stage) so micro-batch k takes the k-th start: the same
  // times, in the fixed order the model uses (valid without offload).
  if (o_.fix_microbatch_order && !any_offload) {
    for (OpType t : {OpType::kF, OpType::kB, OpType::kW}) {
      if (t == OpType::kW && !p_.split_backward) continue;
      for (int s = 0; s < S_; ++s) {
        std::vector<double> v;
        for (int m = 0; m < M_; ++m) v.push_back(hx_[Id(t, s, m)]);
        std::sort(v.begin(), v.end());
        for (int m = 0; m < M_; ++m) hx_[Id(t, s, m)] = v[m];
      }
    }
  }
}

int Builder::HintOrder(int a, int b) const {
  if (!has_hint_ || std::isnan(hx_[a]) || std::isnan(hx_[b])) return 0;
  const auto key = [&](int i) { return std::make_tuple(hx_[i], hx_[i] + T_[i], i); };
  return key(a) < key(b) ? 1 : -1;
}

}  // namespace internal

Schedule Decode(const Problem& p, const Model& m, const std::vector<double>& values,
                DecodeHolds holds) {
  Schedule s = Schedule::Empty(p, "milp");
  const OpSpace sp = p.op_space();
  if (holds != DecodeHolds::kNone) s.release.assign(sp.size(), 0.0);
  const std::vector<int> link = LinkOfDevice(p);
  double scale = 1.0;
  for (int c : m.start_col) scale = std::max(scale, std::abs(values[c]));
  const double grid = 1e-7 * scale;
  struct Key {
    double start, end;
    int rank, op;
  };
  std::vector<std::vector<Key>> compute(p.devices), copy(p.host_links.size());
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const Op& op = m.ops[i];
    const double x = std::round(values[m.start_col[i]] / grid) * grid;
    const double end = std::round((values[m.start_col[i]] + Duration(p, op)) / grid) * grid;
    const Key k{x, end, m.topo_rank[i], static_cast<int>(i)};
    if (holds == DecodeHolds::kAll || (holds == DecodeHolds::kCopies && IsCopy(op.type)))
      s.release[sp.Index(op)] = std::max(0.0, x);
    const int d = DeviceOf(p, op);
    if (IsCompute(op.type)) {
      compute[d].push_back(k);
    } else {
      const int y = m.offload_col[m.activation[i]];
      if (y >= 0 && values[y] > 0.5) copy[link[d]].push_back(k);
    }
  }
  const auto order = [&](std::vector<Key>& keys, std::vector<Op>& lane) {
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      return std::tie(a.start, a.end, a.rank) < std::tie(b.start, b.end, b.rank);
    });
    for (const Key& k : keys) lane.push_back(m.ops[k.op]);
  };
  for (int d = 0; d < p.devices; ++d) order(compute[d], s.compute[d]);
  for (std::size_t l = 0; l < copy.size(); ++l) order(copy[l], s.copy[l]);
  return s;
}

}  // namespace optpipe::milp
