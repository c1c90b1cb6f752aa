#include "core/dag.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>

namespace optpipe {

std::vector<Op> AllOps(const Problem& p, const std::vector<char>& offloaded) {
  std::vector<Op> ops;
  const int S = p.stages(), M = p.microbatches;
  for (OpType t : {OpType::kF, OpType::kB, OpType::kW, OpType::kO, OpType::kR}) {
    if (t == OpType::kW && !p.split_backward) continue;
    for (int s = 0; s < S; ++s) {
      for (int m = 0; m < M; ++m) {
        if (IsCopy(t) && !offloaded[static_cast<std::size_t>(s) * M + m]) continue;
        ops.push_back(Op{t, s, m});
      }
    }
  }
  return ops;
}

Dag BuildDag(const Problem& p, const std::vector<char>& offloaded) {
  Dag g;
  g.problem_ = &p;
  g.space_ = p.op_space();
  g.ops_ = AllOps(p, offloaded);
  const int n = g.num_vertices();
  g.vertex_of_.assign(g.space_.size(), -1);
  for (int v = 0; v < n; ++v) g.vertex_of_[g.space_.Index(g.ops_[v])] = v;

  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property,
                            boost::property<boost::edge_weight_t, double>>;
  Graph bg(n);
  for (int v = 0; v < n; ++v) {
    ForEachPredecessor(p, offloaded, g.ops_[v], [&](const Op& q, double lag) {
      boost::add_edge(g.vertex_of_[g.space_.Index(q)], v, lag, bg);
    });
  }
  // Compress into CSR arrays: the hot loops of the schedulers walk these.
  const auto weight = boost::get(boost::edge_weight, bg);
  g.succ_off_.assign(1, 0);
  g.pred_off_.assign(1, 0);
  for (int v = 0; v < n; ++v) {
    for (auto [e, end] = boost::out_edges(v, bg); e != end; ++e) {
      g.succ_.push_back({static_cast<int>(boost::target(*e, bg)), weight[*e]});
    }
    for (auto [e, end] = boost::in_edges(v, bg); e != end; ++e) {
      g.pred_.push_back({static_cast<int>(boost::source(*e, bg)), weight[*e]});
    }
    g.succ_off_.push_back(static_cast<int>(g.succ_.size()));
    g.pred_off_.push_back(static_cast<int>(g.pred_.size()));
  }
  g.topo_.reserve(n);
  boost::topological_sort(bg, std::back_inserter(g.topo_));
  std::reverse(g.topo_.begin(), g.topo_.end());  // Boost emits reverse topological order
  return g;
}

std::vector<double> Dag::EarliestStarts() const {
  std::vector<double> est(ops_.size(), 0.0);
  for (int v : topo_) {
    const double end = est[v] + Duration(*problem_, ops_[v]);
    for (const Edge* e = succ_begin(v); e != succ_end(v); ++e) {
      est[e->to] = std::max(est[e->to], end + e->lag);
    }
  }
  return est;
}

double Dag::CriticalPath() const {
  const std::vector<double> est = EarliestStarts();
  double cp = 0;
  for (int v = 0; v < num_vertices(); ++v) cp = std::max(cp, est[v] + Duration(*problem_, ops_[v]));
  return cp;
}

}  // namespace optpipe
