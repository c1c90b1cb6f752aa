// BuildModel's assembly (the order of the steps) and the problem-level helpers
// of exact/model.h: heads, horizons, the time grain, the model's objective.
#include "exact/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/dag.h"
#include "exact/model_internal.h"

namespace optpipe::milp {
namespace internal {
namespace {

// Earliest start of every op of a DAG without resources, from one source at 0.
std::vector<double> DagEarliest(const Problem& p) {
  const std::vector<char> none(static_cast<std::size_t>(p.stages()) * p.microbatches, 0);
  const Dag dag = BuildDag(p, none);
  const std::vector<double> est = dag.EarliestStarts();
  std::vector<double> out(p.op_space().size(), 0.0);
  for (int v = 0; v < dag.num_vertices(); ++v) out[p.op_space().Index(dag.ops()[v])] = est[v];
  return out;
}

}  // namespace

std::vector<double> Heads(const Problem& p) {
  const std::vector<double> est = DagEarliest(p);
  std::vector<double> head(p.devices, kInf);
  const OpSpace space = p.op_space();
  for (int s = 0; s < p.stages(); ++s) {
    for (int m = 0; m < p.microbatches; ++m) {
      const int d = p.stage_device[s];
      head[d] = std::min(head[d], est[space.Index(OpType::kF, s, m)]);
    }
  }
  for (double& h : head) {
    if (h == kInf) h = 0;
  }
  return head;
}

Model Builder::Build() {
  ComputeGraph();
  ComputeHints();
  m_.objective_col =
      AddCol(std::max(0.0, o_.lower_bound), o_.horizon + 1e-9 * std::max(1.0, o_.horizon), false);
  if (o_.lower_bound > o_.horizon + 1e-9 * std::max(1.0, o_.horizon)) {
    Infeasible("the lower bound exceeds the horizon");
  }
  if (!FixOrders()) return std::move(m_);
  ChooseOffloadCandidates();
  x_col_.resize(op_.size());
  for (std::size_t i = 0; i < op_.size(); ++i) {
    x_col_[i] = AddCol(es_[i], std::max(es_[i], ls_[i]), false);
  }
  AddSpanStarts();
  for (const Edge& e : edges_) AddPrecedence(e.from, e.to, e.lag, {});
  AddOrderColumns();
  AddOffload();
  AddMemory();
  AddObjective();
  AddTriangleCuts();

  m_.ops = op_;
  m_.start_col = x_col_;
  m_.activation = act_;
  m_.topo_rank.assign(op_.size(), 0);
  for (std::size_t k = 0; k < topo_.size(); ++k) m_.topo_rank[topo_[k]] = static_cast<int>(k);
  for (std::size_t c = 0; c < o_id_.size(); ++c) {
    m_.topo_rank[o_id_[c]] = static_cast<int>(topo_.size() + 2 * c);
    m_.topo_rank[r_id_[c]] = static_cast<int>(topo_.size() + 2 * c + 1);
  }
  return std::move(m_);
}

}  // namespace internal

bool HeadsExact(const Problem& p) {
  // The lowest stages of the devices must be exactly 0..k-1: then the F chain
  // of micro-batch 0 up to any device's lowest stage runs on devices that
  // start with it, and nothing delays it.
  std::vector<int> lowest(p.devices, -1);
  for (int s = p.stages() - 1; s >= 0; --s) lowest[p.stage_device[s]] = s;
  std::vector<char> is_lowest(p.stages(), 0);
  int k = 0;
  for (int l : lowest) {
    if (l >= 0) {
      is_lowest[l] = 1;
      ++k;
    }
  }
  for (int s = 0; s < k; ++s) {
    if (!is_lowest[s]) return false;
  }
  return true;
}

double SerialHorizon(const Problem& p) {
  double h = 0;
  for (int s = 0; s < p.stages(); ++s) {
    h += p.microbatches * (p.f[s] + p.b[s] + p.w[s]);
    if (p.offload) h += 2 * p.microbatches * (*p.offload)[s];
  }
  for (int s = 0; s + 1 < p.stages(); ++s) h += 2 * p.microbatches * CommTime(p, s);
  return h;
}

std::int64_t Model::nonzeros() const {
  std::int64_t n = 0;
  for (const Row& r : rows) n += static_cast<std::int64_t>(r.terms.size());
  return n;
}

Model BuildModel(const Problem& p, const BuildOptions& opt, const Hint& hint) {
  return internal::Builder(p, opt, hint).Build();
}

double ModelObjective(const Problem& p, const SimResult& sim) {
  if (p.objective == Objective::kMakespan) return sim.makespan;
  if (!HeadsExact(p)) return sim.objective;
  const std::vector<double> head = internal::Heads(p);
  std::vector<double> last(p.devices, -internal::kInf);
  const OpSpace space = p.op_space();
  for (int i = 0; i < space.size(); ++i) {
    if (std::isnan(sim.end[i])) continue;
    const int d = DeviceOf(p, space.At(i));
    last[d] = std::max(last[d], sim.end[i]);
  }
  double obj = 0;
  for (int d = 0; d < p.devices; ++d) {
    if (last[d] > -internal::kInf) obj = std::max(obj, last[d] - head[d]);
  }
  return std::max(obj, sim.objective);
}

}  // namespace optpipe::milp
