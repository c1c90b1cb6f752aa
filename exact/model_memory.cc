// Memory (eq. 9, exactly as docs/FORMAT.md): a row at every allocation (F start, R
// start) counting what has been allocated and freed by then, with indicators
// where neither the graph nor the windows decide an order.
#include <map>
#include <string>
#include <utility>

#include "exact/model_internal.h"

namespace optpipe::milp::internal {

// Whether op `op` has ended by the time op `at` starts, as the literal that
// weighs what `op` frees in the memory row of `at`. `graph` is +1 when the
// precedence graph says it has ended, -1 when it cannot have (it ends after
// `at` starts), 0 when the graph does not say; then the windows decide, and
// failing those an indicator g <= guard that, when 1, forces `op` to end
// first. The indicator is one-sided: g = 0 only understates the frees, the
// conservative value. Returns 0, `ended` (what "has ended" weighs) or g.
Lit Builder::EndedBy(int op, int at, int graph, const Lit& ended, const Lit& guard, int a) {
  const double eps = Eps();
  if (graph > 0) return ended;
  if (graph < 0 || es_[op] + T_[op] > ls_[at] + eps) return Lit::Const(0);
  if (ls_[op] + T_[op] <= es_[at] - eps) return ended;
  int hint = 0;
  if (has_hint_) hint = hoff_[a] && hx_[op] + T_[op] <= hx_[at] + eps ? 1 : -1;
  const int g = AddBinary(hint);
  ++m_.memory_binaries;
  AddAtMost(g, guard);
  AddPrecedence(op, at, 0.0, {Lit::Var(g)});
  return Lit::Var(g);
}

void Builder::AddMemory() {
  if (!p_.memory_limited()) return;
  const double eps = Eps();
  // "R of candidate c has started by the start of F i": what F i's row counts.
  // kind 0: never (F first), 1: whenever c is offloaded, 2: the column `col`.
  struct Started {
    int kind;
    int col;
  };
  std::map<std::pair<int, int>, Started> started;  // (F id, candidate)

  for (int d = 0; d < D_; ++d) {
    const double limit = (*p_.memory_limit)[d];
    const double base = p_.static_memory[d];
    // Rows at every F start.
    for (int e : dev_ops_[d]) {
      if (op_[e].type != OpType::kF) continue;
      RowBuilder rb;
      rb.AddConstant(base + Allocates(p_, op_[e]));
      for (int k : dev_ops_[d]) {
        if (k == e) continue;
        const double alloc = Allocates(p_, op_[k]), fr = Frees(p_, op_[k]);
        if (alloc > 0) rb.Add(alloc, Before(k, e));
        if (fr > 0) rb.Add(-fr, Before(k, e));
      }
      for (int a : dev_cands_[d]) {
        const int c = cand_[a];
        const int fa = Id(OpType::kF, a / M_, a % M_), ba = Id(OpType::kB, a / M_, a % M_);
        const int o = o_id_[c], r = r_id_[c];
        const double off = p_.offloadable[a / M_];
        const Lit y = Lit::Var(y_col_[c]);
        // R started by x_e (counts its reload).
        Started st{2, -1};
        if (Reach(ba, e)) {
          st.kind = 1;
        } else if ((Precedes(e, fa) && T_[e] > 0) || es_[r] > ls_[e] + eps) {
          st.kind = 0;
        } else if (ls_[r] < es_[e] - eps) {
          st.kind = 1;
        } else {
          int hint = 0;
          if (has_hint_) hint = hoff_[a] && hx_[r] <= hx_[e] ? 1 : -1;
          st.col = AddBinary(hint);
          ++m_.memory_binaries;
          AddAtMost(st.col, y);
          const Lit u = Lit::Var(st.col);
          AddPrecedence(r, e, -T_[r], {u});           // u = 1: x_R <= x_F
          AddPrecedence(e, r, -T_[e], {u.Not(), y});  // u = 0: x_F <= x_R
        }
        started[{e, c}] = st;
        if (st.kind == 1) rb.Add(off, y);
        if (st.kind == 2) rb.Add(off, st.col);
        // O ended by x_e (counts its offload); never when e is F_a or comes before it.
        const int graph = Reach(ba, e) ? 1 : (Precedes(e, fa) && T_[e] + T_[o] > 0) ? -1 : 0;
        rb.Add(-off, EndedBy(o, e, graph, y, y, a));
      }
      if (rb.empty()) {
        if (rb.constant() > limit + eps) {
          Infeasible("memory on device " + std::to_string(d) + " exceeds its limit when " +
                     ToString(op_[e]) + " starts in every schedule");
        }
        continue;
      }
      if (rb.constant() + rb.MaxVariablePart() <= limit + eps) continue;  // never binding
      AddRow(rb.Finish(Sense::kLe, limit));
    }
    // Rows at every R start, relaxed when the activation stays on the device.
    for (int a : dev_cands_[d]) {
      const int c = cand_[a];
      const int fa = Id(OpType::kF, a / M_, a % M_), ba = Id(OpType::kB, a / M_, a % M_);
      const int r = r_id_[c];
      const Lit ya = Lit::Var(y_col_[c]);
      RowBuilder rb;
      rb.AddConstant(base);  // its own offload (-offloadable) and reload (+offloadable) cancel
      for (int k : dev_ops_[d]) {
        if (op_[k].type == OpType::kF) {
          const Started st = started.at({k, c});
          const double alloc = Allocates(p_, op_[k]);
          if (st.kind == 0) rb.Add(alloc, Lit::Const(1));
          if (st.kind == 2) rb.Add(alloc, Lit::Var(st.col, true));
          continue;
        }
        const double fr = Frees(p_, op_[k]);
        if (fr <= 0) continue;
        // k freed by the reload's start; never when k comes after B_a, which follows R.
        const int graph = Reach(k, fa) ? 1 : Precedes(ba, k) ? -1 : 0;
        rb.Add(-fr, EndedBy(k, r, graph, Lit::Const(1), ya, a));
      }
      for (int b : dev_cands_[d]) {
        if (b == a) continue;
        const int cb = cand_[b];
        const Lit yb = Lit::Var(y_col_[cb]);
        const double off_b = p_.offloadable[b / M_];
        // Other reloads started by now (same link: the link order says).
        const Lit rb_first = LinkBefore(r_id_[cb], r);
        if (rb_first.is_const()) {
          if (rb_first.value == 1) rb.Add(off_b, yb);
        } else if (!rb_first.neg) {
          rb.Add(off_b, rb_first);  // the column is <= y_b
        } else {
          // w >= y_b - h: R_b counts when offloaded and not after R_a.
          const int w = AddCol(0, 1, false);
          RowBuilder rb2;
          rb2.Add(1.0, w);
          rb2.Add(-1.0, yb);
          rb2.Add(1.0, Lit::Var(rb_first.col));
          AddRow(rb2.Finish(Sense::kGe, 0.0));
          rb.Add(off_b, w);
        }
        // Other offloads ended by now.
        const Lit ob_first = LinkBefore(o_id_[cb], r);
        if (ob_first.is_const()) {
          if (ob_first.value == 1) rb.Add(-off_b, yb);
        } else if (!ob_first.neg) {
          rb.Add(-off_b, ob_first);
        } else {
          // g <= 1 - h and g <= y_b: the offload ended first and happened.
          const int g = AddCol(0, 1, false);
          RowBuilder rb2;
          rb2.Add(1.0, g);
          rb2.Add(1.0, Lit::Var(ob_first.col));
          AddRow(rb2.Finish(Sense::kLe, 1.0));
          AddAtMost(g, yb);
          rb.Add(-off_b, g);
        }
      }
      const double big = rb.constant() + rb.MaxVariablePart() - limit;
      if (big <= eps) continue;
      if (rb.empty() && rb.constant() <= limit + eps) continue;
      // sum <= limit + big * (1 - y_a)
      rb.Add(big, ya);
      AddRow(rb.Finish(Sense::kLe, limit + big));
    }
  }
}

}  // namespace optpipe::milp::internal
