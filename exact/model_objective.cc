// The objective rows (makespan, or device_span from each device's start) and
// the cuts on the order literals: load cuts and triangle cuts (section 4.1.2).
#include <cstdint>

#include "exact/model_internal.h"

namespace optpipe::milp::internal {

void Builder::AddSpanStarts() {
  sigma_col_.assign(D_, -1);
  if (p_.objective != Objective::kDeviceSpan || HeadsExact(p_)) return;
  // The span of d starts at its first op: no later than any F of its lowest stage.
  for (int d = 0; d < D_; ++d) {
    int lowest = -1;
    for (int s = S_ - 1; s >= 0; --s) {
      if (p_.stage_device[s] == d) lowest = s;
    }
    if (lowest < 0) continue;
    sigma_col_[d] = AddCol(head_[d], deadline_[d], false);
    for (int m = 0; m < M_; ++m) {
      RowBuilder rb;
      rb.Add(1.0, x_col_[Id(OpType::kF, lowest, m)]);
      rb.Add(-1.0, sigma_col_[d]);
      AddRow(rb.Finish(Sense::kGe, 0.0));
    }
  }
}

void Builder::AddObjective() {
  const bool span = p_.objective == Objective::kDeviceSpan;
  const int C = m_.objective_col;
  for (int i = 0; i < nc_; ++i) {
    const int d = dev_[i];
    bool last = true;
    if (span) {
      for (int j : dev_ops_[d]) {
        if (j != i && Reach(i, j)) {
          last = false;
          break;
        }
      }
    } else {
      for (std::size_t w = 0; w < words_; ++w) {
        if (reach_[i * words_ + w]) {
          last = false;
          break;
        }
      }
    }
    if (!last) continue;
    RowBuilder rb;
    rb.Add(1.0, C);
    rb.Add(-1.0, x_col_[i]);
    AddRow(rb.Finish(Sense::kGe, T_[i] - Sigma(rb, d)));
  }
  if (!o_.load_cuts) return;
  for (int i = 0; i < nc_; ++i) {
    const int d = dev_[i];
    RowBuilder after, before;
    after.Add(1.0, C);
    after.Add(-1.0, x_col_[i]);
    before.Add(1.0, x_col_[i]);
    bool var_after = false, var_before = false;
    for (int j : dev_ops_[d]) {
      if (j == i || T_[j] == 0) continue;
      const Lit ij = Before(i, j);
      after.Add(-T_[j], ij);
      before.Add(-T_[j], ij.Not());
      var_after |= !ij.is_const();
      var_before |= !ij.is_const();
    }
    if (var_after) AddRow(after.Finish(Sense::kGe, T_[i] + tail_min_[d] - Sigma(after, d)));
    if (var_before) AddRow(before.Finish(Sense::kGe, head_[d]));
  }
}

void Builder::AddTriangleCuts() {
  if (!o_.triangle_cuts) return;
  for (int d = 0; d < D_; ++d) {
    const auto& ops = dev_ops_[d];
    const std::size_t n = ops.size();
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = a + 1; b < n; ++b) {
        const Lit ab = before_[d][a * n + b];
        for (std::size_t c = b + 1; c < n; ++c) {
          const Lit bc = before_[d][b * n + c], ac = before_[d][a * n + c];
          const int vars = !ab.is_const() + !bc.is_const() + !ac.is_const();
          if (vars < 2) continue;
          // No cycle a->b->c->a, and none a->c->b->a.
          for (int orient = 0; orient < 2; ++orient) {
            if (m_.triangle_cuts >= o_.max_triangle_cuts) return;
            RowBuilder rb;
            if (orient == 0) {
              rb.Add(1.0, ab);
              rb.Add(1.0, bc);
              rb.Add(-1.0, ac);
            } else {
              rb.Add(-1.0, ab);
              rb.Add(-1.0, bc);
              rb.Add(1.0, ac);
            }
            const double rhs = orient == 0 ? 1.0 : 0.0;
            if (rb.constant() + rb.MaxVariablePart() <= rhs + 1e-9) continue;
            AddRow(rb.Finish(Sense::kLe, rhs));
            ++m_.triangle_cuts;
          }
        }
      }
    }
  }
}

}  // namespace optpipe::milp::internal
