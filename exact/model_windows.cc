// The model's ops and everything implied before any column exists: DAG edges,
// memory precedences, the transitive closure, time windows and the fixing of
// device orders the windows decide (exact/model.h, "Implied orders").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "core/dag.h"
#include "exact/model_internal.h"

namespace optpipe::milp::internal {

// Orders the memory limit forces whatever the other stages do. With micro-
// batches in order, when F(s,j) starts, F(s,0..j) have started and the B (W)
// that have ended are a prefix. Each live activation of s holds at least
// r = activation - offloadable (offload allowed) and F(s,j) holds all of its
// own, so static + activation + (j - b) r <= limit needs b >= j - cap B's
// ended: B(s, j-cap-1) precedes F(s,j). After its B an activation keeps
// activation - freed_by_b until its W (it cannot be offloaded any more), which
// bounds the W that must have ended the same way when that is the smaller part.
void Builder::AddMemoryPrecedences() {
  for (int s = 0; s < S_; ++s) {
    const int d = p_.stage_device[s];
    const double act = p_.activation[s];
    const double room = (*p_.memory_limit)[d] - p_.static_memory[d] - act;
    if (room < -1e-9 * std::max(1.0, act)) continue;  // the memory rows report it
    const double offl = p_.offload_allowed() ? p_.offloadable[s] : 0.0;
    const double r = act - offl;
    const auto add = [&](OpType t, double per) {
      const int cap = static_cast<int>(std::min<double>(M_, std::floor(room / per + 1e-9)));
      for (int j = cap + 1; j < M_; ++j)
        edges_.push_back({Id(t, s, j - cap - 1), Id(OpType::kF, s, j), 0.0});
    };
    if (r > 1e-12) add(OpType::kB, r);
    const double rest = act - p_.freed_by_b[s];
    if (p_.split_backward && rest > 1e-12 && r >= rest - 1e-12) add(OpType::kW, rest);
  }
}

void Builder::ComputeGraph() {
  const OpSpace space = p_.op_space();
  id_of_.assign(space.size(), -1);
  for (OpType t : {OpType::kF, OpType::kB, OpType::kW}) {
    if (t == OpType::kW && !p_.split_backward) continue;
    for (int s = 0; s < S_; ++s) {
      for (int m = 0; m < M_; ++m) AddOp(Op{t, s, m});
    }
  }
  nc_ = static_cast<int>(op_.size());
  const std::vector<char> none(static_cast<std::size_t>(S_) * M_, 0);
  for (int j = 0; j < nc_; ++j) {
    ForEachPredecessor(p_, none, op_[j], [&](const Op& q, double lag) {
      edges_.push_back({id_of_[space.Index(q)], j, lag});
    });
  }
  if (o_.fix_microbatch_order) {
    for (int j = 0; j < nc_; ++j) {
      if (op_[j].microbatch > 0) {
        edges_.push_back({Id(op_[j].type, op_[j].stage, op_[j].microbatch - 1), j, 0.0});
      }
    }
  }
  if (o_.fix_microbatch_order && p_.memory_limited()) AddMemoryPrecedences();
  dev_ops_.assign(D_, {});
  pos_.assign(nc_, -1);
  for (int i = 0; i < nc_; ++i) {
    pos_[i] = static_cast<int>(dev_ops_[dev_[i]].size());
    dev_ops_[dev_[i]].push_back(i);
  }
  before_.resize(D_);
  for (int d = 0; d < D_; ++d) {
    const std::size_t n = dev_ops_[d].size();
    before_[d].assign(n * n, Lit::Const(-1));
  }
  load_before_.assign(nc_, 0.0);
  load_after_.assign(nc_, 0.0);
  head_ = Heads(p_);
  deadline_.assign(D_, o_.horizon);
  if (p_.objective == Objective::kDeviceSpan) {
    const bool exact = HeadsExact(p_);
    for (int d = 0; d < D_; ++d) deadline_[d] = exact ? head_[d] + o_.horizon : SerialHorizon(p_);
  }
}

// Topological order, closure, earliest and latest starts under the current
// edges and fixed pairs (with the load of a device's fixed predecessors and
// successors folded into the windows).
void Builder::ComputeWindows() {
  // Edges by source and by target (counting sort; the buffers live on).
  succ_start_.assign(nc_ + 1, 0);
  pred_start_.assign(nc_ + 1, 0);
  for (const Edge& e : edges_) {
    ++succ_start_[e.from + 1];
    ++pred_start_[e.to + 1];
  }
  for (int i = 0; i < nc_; ++i) {
    succ_start_[i + 1] += succ_start_[i];
    pred_start_[i + 1] += pred_start_[i];
  }
  succ_.resize(edges_.size());
  pred_.resize(edges_.size());
  indeg_.assign(nc_, 0);
  for (const Edge& e : edges_) {
    succ_[succ_start_[e.from] + indeg_[e.from]++] = {e.to, e.lag};
  }
  indeg_.assign(nc_, 0);
  for (const Edge& e : edges_) {
    pred_[pred_start_[e.to] + indeg_[e.to]++] = {e.from, e.lag};
  }
  const auto succ = [&](int i) {
    return std::span(succ_.data() + succ_start_[i], succ_.data() + succ_start_[i + 1]);
  };
  const auto pred = [&](int i) {
    return std::span(pred_.data() + pred_start_[i], pred_.data() + pred_start_[i + 1]);
  };
  topo_.clear();
  for (int i = 0; i < nc_; ++i) {
    if (indeg_[i] == 0) topo_.push_back(i);
  }
  for (std::size_t k = 0; k < topo_.size(); ++k) {
    for (auto [j, lag] : succ(topo_[k])) {
      if (--indeg_[j] == 0) topo_.push_back(j);
    }
  }
  words_ = (nc_ + 63) / 64;
  reach_.assign(nc_ * words_, 0);
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    const int i = *it;
    std::uint64_t* row = &reach_[i * words_];
    for (auto [j, lag] : succ(i)) {
      row[j >> 6] |= std::uint64_t{1} << (j & 63);
      const std::uint64_t* from = &reach_[j * words_];
      for (std::size_t w = 0; w < words_; ++w) row[w] |= from[w];
    }
  }
  // Tails: the longest path from an op's end to the end of the iteration.
  tail_.assign(nc_, 0.0);
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    for (auto [j, lag] : succ(*it)) tail_[*it] = std::max(tail_[*it], lag + T_[j] + tail_[j]);
  }
  tail_min_.assign(D_, 0.0);
  if (p_.objective == Objective::kMakespan) {
    for (int d = 0; d < D_; ++d) {
      double t = kInf;
      for (int i : dev_ops_[d]) t = std::min(t, tail_[i]);
      tail_min_[d] = dev_ops_[d].empty() ? 0.0 : t;
    }
  }
  es_.assign(nc_, 0.0);
  for (int i : topo_) {
    double e = std::max(0.0, head_[dev_[i]] + load_before_[i]);
    for (auto [q, lag] : pred(i)) e = std::max(e, es_[q] + T_[q] + lag);
    es_[i] = e;
  }
  ls_.assign(nc_, 0.0);
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    const int i = *it;
    const int d = dev_[i];
    double l = deadline_[d] - T_[i] - load_after_[i] - tail_min_[d];
    if (p_.objective == Objective::kMakespan) l = std::min(l, o_.horizon - T_[i] - tail_[i]);
    for (auto [j, lag] : succ(i)) l = std::min(l, ls_[j] - lag - T_[i]);
    ls_[i] = l;
  }
}

void Builder::SetOrder(int d, std::size_t a, std::size_t b, bool a_first) {
  const std::size_t n = dev_ops_[d].size();
  before_[d][a * n + b] = Lit::Const(a_first ? 1 : 0);
  before_[d][b * n + a] = Lit::Const(a_first ? 0 : 1);
  const int first = dev_ops_[d][a_first ? a : b], second = dev_ops_[d][a_first ? b : a];
  load_after_[first] += T_[second];
  load_before_[second] += T_[first];
}

void Builder::Unorder(int d, std::size_t a, std::size_t b) {
  const std::size_t n = dev_ops_[d].size();
  Lit& ab = before_[d][a * n + b];
  if (!ab.is_const() || ab.value < 0) return;
  const bool a_first = ab.value == 1;
  const int first = dev_ops_[d][a_first ? a : b], second = dev_ops_[d][a_first ? b : a];
  load_after_[first] -= T_[second];
  load_before_[second] -= T_[first];
  ab = Lit::Const(-1);
  before_[d][b * n + a] = Lit::Const(-1);
}

Builder::WindowOrder Builder::OrderByWindows(int i, int j) const {
  const double eps = Eps();
  const bool i_after_j = es_[j] + T_[j] <= ls_[i] + eps;
  const bool j_after_i = es_[i] + T_[i] <= ls_[j] + eps;
  if (!i_after_j && !j_after_i) return WindowOrder::kNeither;
  if (!i_after_j) return WindowOrder::kIFirst;
  if (!j_after_i) return WindowOrder::kJFirst;
  return WindowOrder::kEither;
}

bool Builder::FixOrders() {
  const double eps = Eps();
  for (int pass = 0; pass < 64; ++pass) {
    ComputeWindows();
    for (int i = 0; i < nc_; ++i) {
      if (es_[i] > ls_[i] + eps) {
        Infeasible("op " + ToString(op_[i]) + " has no start time within the horizon");
        return false;
      }
    }
    bool changed = false;
    for (int d = 0; d < D_; ++d) {
      const auto& ops = dev_ops_[d];
      const std::size_t n = ops.size();
      for (std::size_t a = 0; a < n; ++a) {
        for (std::size_t b = a + 1; b < n; ++b) {
          Lit& ab = before_[d][a * n + b];
          if (ab.is_const() && ab.value >= 0) continue;
          const int i = ops[a], j = ops[b];
          bool i_first = false, j_first = false;
          if (Reach(i, j)) {
            i_first = true;
          } else if (Reach(j, i)) {
            j_first = true;
          } else {
            switch (OrderByWindows(i, j)) {
              case WindowOrder::kNeither:
                Infeasible("ops " + ToString(op_[i]) + " and " + ToString(op_[j]) +
                           " cannot both run within the horizon");
                return false;
              case WindowOrder::kIFirst:
                i_first = true;
                edges_.push_back({i, j, 0.0});
                break;
              case WindowOrder::kJFirst:
                j_first = true;
                edges_.push_back({j, i, 0.0});
                break;
              case WindowOrder::kEither:
                break;
            }
          }
          if (i_first || j_first) {
            SetOrder(d, a, b, i_first);
            changed = true;
          }
        }
      }
    }
    if (!changed) return true;
  }
  ComputeWindows();
  return true;
}

}  // namespace optpipe::milp::internal
