// Offload (eqs. 10-19): which activations may be offloaded, their O and R ops,
// the binaries y_a, and one copy op at a time on every host link.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "exact/model_internal.h"

namespace optpipe::milp::internal {

void Builder::ChooseOffloadCandidates() {
  cand_.assign(static_cast<std::size_t>(S_) * M_, -1);
  dev_cands_.assign(D_, {});
  m_.offload_col.assign(static_cast<std::size_t>(S_) * M_, -1);
  if (!p_.offload_allowed() || !p_.memory_limited()) return;
  const double eps = Eps();
  for (int s = 0; s < S_; ++s) {
    const double t = (*p_.offload)[s];
    if (p_.offloadable[s] <= 0) continue;
    for (int m = 0; m < M_; ++m) {
      const int f = Id(OpType::kF, s, m), b = Id(OpType::kB, s, m);
      const double es_o = es_[f] + T_[f], ls_r = ls_[b] - t;
      if (es_o + t > ls_r + eps) continue;  // no room for O then R before B
      const int a = s * M_ + m;
      cand_[a] = static_cast<int>(o_id_.size());
      const int o = AddOp(Op{OpType::kO, s, m});
      const int r = AddOp(Op{OpType::kR, s, m});
      es_.push_back(es_o);
      ls_.push_back(ls_r - t);
      es_.push_back(es_o + t);
      ls_.push_back(ls_r);
      o_id_.push_back(o);
      r_id_.push_back(r);
      dev_cands_[p_.stage_device[s]].push_back(a);
    }
  }
  if (has_hint_) {
    const OpSpace space = p_.op_space();
    hx_.resize(op_.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t k = 0; k < o_id_.size(); ++k) {
      for (int i : {o_id_[k], r_id_[k]}) {
        const double v = hint_.sim->start[space.Index(op_[i])];
        if (!std::isnan(v)) hx_[i] = v;
      }
    }
  }
}

Lit Builder::LinkBefore(int a, int b) const {
  auto it = link_before_.find({std::min(a, b), std::max(a, b)});
  if (it == link_before_.end()) return Lit::Const(-1);
  return a < b ? it->second : it->second.Not();
}

void Builder::AddOffload() {
  const std::size_t k = o_id_.size();
  if (k == 0) return;
  y_col_.resize(k);
  for (int a = 0; a < S_ * M_; ++a) {
    const int c = cand_[a];
    if (c < 0) continue;
    y_col_[c] = AddBinary(has_hint_ ? (hoff_[a] ? 1 : -1) : -1);
    m_.offload_col[a] = y_col_[c];
    ++m_.offload_binaries;
  }
  for (int a = 0; a < S_ * M_; ++a) {
    const int c = cand_[a];
    if (c < 0) continue;
    const int s = a / M_, m = a % M_;
    const Lit y = Lit::Var(y_col_[c]);
    AddPrecedence(Id(OpType::kF, s, m), o_id_[c], 0.0, {y});
    AddPrecedence(o_id_[c], r_id_[c], 0.0, {y});
    AddPrecedence(r_id_[c], Id(OpType::kB, s, m), 0.0, {y});
    link_before_[{o_id_[c], r_id_[c]}] = Lit::Const(1);
  }
  // Copy ops of each host link, one at a time.
  const std::vector<int> link = LinkOfDevice(p_);
  std::vector<std::vector<int>> lane(p_.host_links.size());
  for (int a = 0; a < S_ * M_; ++a) {
    if (cand_[a] < 0) continue;
    const int l = link[p_.stage_device[a / M_]];
    lane[l].push_back(o_id_[cand_[a]]);
    lane[l].push_back(r_id_[cand_[a]]);
  }
  for (const auto& ops : lane) {
    for (std::size_t x = 0; x < ops.size(); ++x) {
      for (std::size_t w = x + 1; w < ops.size(); ++w) {
        int i = ops[x], j = ops[w];
        if (i > j) std::swap(i, j);
        const int a = act_[i], b = act_[j];
        if (a == b) continue;  // O before R, above
        const Lit ya = Lit::Var(y_col_[cand_[a]]), yb = Lit::Var(y_col_[cand_[b]]);
        const int fa = Id(OpType::kF, a / M_, a % M_), ba = Id(OpType::kB, a / M_, a % M_);
        const int fb = Id(OpType::kF, b / M_, b % M_), bb = Id(OpType::kB, b / M_, b % M_);
        int first = 0;  // +1: i first, -1: j first
        if (Reach(ba, fb)) {
          first = 1;
        } else if (Reach(bb, fa)) {
          first = -1;
        } else if (o_.fix_microbatch_order && a / M_ == b / M_) {
          // Same stage: offloaded micro-batches keep their order on the link.
          const bool a_lower = a < b;
          const int lo = a_lower ? i : j, hi = a_lower ? j : i;
          const bool lo_o = op_[lo].type == OpType::kO, hi_o = op_[hi].type == OpType::kO;
          if (lo_o == hi_o || (lo_o && !hi_o)) first = a_lower ? 1 : -1;
        }
        if (first == 0) {
          const WindowOrder win = OrderByWindows(i, j);
          if (win == WindowOrder::kNeither) {
            // Both cannot be offloaded.
            RowBuilder rb;
            rb.Add(1.0, ya);
            rb.Add(1.0, yb);
            AddRow(rb.Finish(Sense::kLe, 1.0));
            link_before_[{i, j}] = Lit::Const(1);  // irrelevant: never both
            continue;
          }
          if (win == WindowOrder::kIFirst) first = 1;
          if (win == WindowOrder::kJFirst) first = -1;
        }
        if (first != 0) {
          const int u = first > 0 ? i : j, v = first > 0 ? j : i;
          AddPrecedence(u, v, 0.0, {ya, yb});
          link_before_[{i, j}] = Lit::Const(first > 0 ? 1 : 0);
          continue;
        }
        int hint = 0;
        if (has_hint_) hint = hoff_[a] && hoff_[b] ? HintOrder(i, j) : -1;
        const int h = AddBinary(hint);
        ++m_.copy_order_binaries;
        for (const Lit& y : {ya, yb}) AddAtMost(h, y);  // h = 1 only when both are offloaded
        const Lit hl = Lit::Var(h);
        AddPrecedence(i, j, 0.0, {hl});
        AddPrecedence(j, i, 0.0, {hl.Not(), ya, yb});
        link_before_[{i, j}] = hl;
      }
    }
  }
}

}  // namespace optpipe::milp::internal
