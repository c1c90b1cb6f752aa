// One compute op at a time per device (eq. 7): the conditional precedence row
// every disjunction uses, with a per-pair big-M, and the order binaries z_ij.
#include <algorithm>

#include "exact/model_internal.h"

namespace optpipe::milp::internal {

void Builder::AddPrecedence(int i, int j, double lag, const std::vector<Lit>& conds) {
  const double big = ls_[i] + T_[i] + lag - es_[j];
  if (big <= 0) return;  // holds for every start in the windows
  RowBuilder rb;
  rb.Add(1.0, x_col_[j]);
  rb.Add(-1.0, x_col_[i]);
  for (const Lit& l : conds) {
    if (l.is_const()) {
      if (l.value < 0.5) return;  // the condition never holds
      continue;
    }
    rb.AddConstant(big);
    rb.Add(-big, l);
  }
  AddRow(rb.Finish(Sense::kGe, T_[i] + lag));
}

Lit Builder::Before(int a, int b) const {
  const int d = dev_[a];
  const std::size_t n = dev_ops_[d].size();
  return before_[d][pos_[a] * n + pos_[b]];
}

void Builder::AddOrderColumns() {
  // Open pairs, created in order of their earliest start so that a depth-first
  // search decides early ops first.
  struct Open {
    int d;
    std::size_t a, b;
    double key;
  };
  std::vector<Open> open;
  for (int d = 0; d < D_; ++d) {
    const auto& ops = dev_ops_[d];
    const std::size_t n = ops.size();
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = a + 1; b < n; ++b) {
        const Lit& l = before_[d][a * n + b];
        if (l.is_const() && l.value >= 0) {
          ++m_.pairs_fixed;
        } else {
          open.push_back({d, a, b, std::min(es_[ops[a]], es_[ops[b]])});
        }
      }
    }
  }
  std::stable_sort(open.begin(), open.end(),
                   [](const Open& x, const Open& y) { return x.key < y.key; });
  for (const Open& o : open) {
    const auto& ops = dev_ops_[o.d];
    const std::size_t n = ops.size();
    const int i = ops[o.a], j = ops[o.b];
    const int col = AddBinary(HintOrder(i, j));
    ++m_.order_binaries;
    before_[o.d][o.a * n + o.b] = Lit::Var(col);
    before_[o.d][o.b * n + o.a] = Lit::Var(col, true);
  }
  // Disjunctions: i before j, or j before i.
  for (const Open& o : open) {
    const auto& ops = dev_ops_[o.d];
    const int i = ops[o.a], j = ops[o.b];
    const Lit z = Before(i, j);
    AddPrecedence(i, j, 0.0, {z});
    AddPrecedence(j, i, 0.0, {z.Not()});
  }
}

}  // namespace optpipe::milp::internal
