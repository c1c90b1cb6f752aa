// The op DAG: which op waits for which, and by how much (docs/FORMAT.md rules).
//
//   F(s,m) <- F(s-1,m) + comm      B(s,m) <- B(s+1,m) + comm, F(s,m)
//   W(s,m) <- B(s,m)               with offload: O(s,m) <- F(s,m),
//                                  R(s,m) <- O(s,m), B(s,m) <- R(s,m)
//
// ForEachPredecessor is the single definition of these edges; the simulator
// walks it directly and BuildDag materialises it (with Boost.Graph) for the
// analyses that need the whole graph: topological order and critical paths.
//
//   Dag dag = BuildDag(problem, OffloadedSet(problem, schedule));
//   double cp = dag.CriticalPath();
#pragma once

#include <vector>

#include "core/op.h"
#include "core/problem.h"

namespace optpipe {

// Calls fn(predecessor, lag) for every op that must end `lag` before `op` starts.
// `offloaded` is indexed by stage * M + micro-batch (see OffloadedSet).
template <typename Fn>
void ForEachPredecessor(const Problem& p, const std::vector<char>& offloaded, const Op& op,
                        Fn&& fn) {
  const int s = op.stage, m = op.microbatch;
  switch (op.type) {
    case OpType::kF:
      if (s > 0) fn(Op{OpType::kF, s - 1, m}, CommTime(p, s - 1));
      break;
    case OpType::kB:
      fn(Op{OpType::kF, s, m}, 0.0);
      if (s + 1 < p.stages()) fn(Op{OpType::kB, s + 1, m}, CommTime(p, s));
      if (offloaded[static_cast<std::size_t>(s) * p.microbatches + m]) {
        fn(Op{OpType::kR, s, m}, 0.0);
      }
      break;
    case OpType::kW:
      fn(Op{OpType::kB, s, m}, 0.0);
      break;
    case OpType::kO:
      fn(Op{OpType::kF, s, m}, 0.0);
      break;
    case OpType::kR:
      fn(Op{OpType::kO, s, m}, 0.0);
      break;
  }
}

// Every op a problem needs for the given offload choice, in OpSpace index order.
std::vector<Op> AllOps(const Problem& p, const std::vector<char>& offloaded);

// The whole DAG in compressed form (successors and predecessors with lags),
// plus a topological order computed by Boost.Graph.
class Dag {
 public:
  const Problem& problem() const { return *problem_; }
  const std::vector<Op>& ops() const { return ops_; }  // vertex id -> op
  int num_vertices() const { return static_cast<int>(ops_.size()); }
  int VertexOf(const Op& op) const { return vertex_of_[space_.Index(op)]; }
  const std::vector<int>& topological_order() const { return topo_; }

  struct Edge {
    int to;
    double lag;
  };
  const Edge* succ_begin(int v) const { return succ_.data() + succ_off_[v]; }
  const Edge* succ_end(int v) const { return succ_.data() + succ_off_[v + 1]; }
  const Edge* pred_begin(int v) const { return pred_.data() + pred_off_[v]; }
  const Edge* pred_end(int v) const { return pred_.data() + pred_off_[v + 1]; }

  // Earliest start of every vertex with unlimited resources (ASAP times).
  std::vector<double> EarliestStarts() const;
  // Longest path, op durations plus lags: a lower bound on any makespan.
  double CriticalPath() const;

 private:
  friend Dag BuildDag(const Problem& p, const std::vector<char>& offloaded);
  const Problem* problem_ = nullptr;
  OpSpace space_;
  std::vector<Op> ops_;
  std::vector<int> vertex_of_;  // OpSpace index -> vertex id, -1 if absent
  std::vector<int> succ_off_, pred_off_;
  std::vector<Edge> succ_, pred_;
  std::vector<int> topo_;
};

// The Dag keeps a pointer to `p`: keep the problem alive while using it.
Dag BuildDag(const Problem& p, const std::vector<char>& offloaded);

}  // namespace optpipe
