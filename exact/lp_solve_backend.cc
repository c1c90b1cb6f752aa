// lp_solve 5.5 wrapper. lp_lib.h defines thousands of macros (TRUE, REAL, LE,
// OPTIMAL, ...): it is included here and nowhere else.
#include "exact/lp_solve_backend.h"

#include <lpsolve/lp_lib.h>

#include <exception>
#include <string>
#include <vector>

#include "core/format.h"
#include "exact/milp.h"

namespace optpipe::milp {
namespace {

struct Context {
  const LpParams* params = nullptr;
  int columns = 0;
  bool root_reported = false;
  bool has_incumbent = false;
  std::vector<double> incumbent;
  double incumbent_objective = 0;
};

int __WINAPI AbortCallback(lprec*, void* handle) {
  auto* ctx = static_cast<Context*>(handle);
  try {
    return ctx->params->should_stop && ctx->params->should_stop() ? TRUE : FALSE;
  } catch (...) {
    return TRUE;
  }
}

void __WINAPI MessageCallback(lprec* lp, void* handle, int msg) {
  auto* ctx = static_cast<Context*>(handle);
  try {
    if (msg == MSG_LPOPTIMAL) {
      // The first LP solved in branch and bound is the root relaxation.
      if (!ctx->root_reported && ctx->params->on_root_bound)
        ctx->params->on_root_bound(lp->solution[0]);
      ctx->root_reported = true;
      return;
    }
    if (msg != MSG_MILPFEASIBLE && msg != MSG_MILPBETTER) return;
    // Presolve is off, so best_solution is [objective, rows..., columns...].
    const REAL* best = lp->best_solution;
    const double obj = best[0];
    if (ctx->has_incumbent && obj >= ctx->incumbent_objective) return;
    ctx->incumbent.assign(best + lp->rows + 1, best + lp->rows + 1 + ctx->columns);
    ctx->incumbent_objective = obj;
    ctx->has_incumbent = true;
    if (ctx->params->on_incumbent) ctx->params->on_incumbent(ctx->incumbent, obj);
  } catch (...) {
    // Nothing may cross lp_solve's C frames; the final read-out still happens.
  }
}

std::string CodeName(int ret) {
  switch (ret) {
    case NOMEMORY:
      return "out of memory";
    case UNBOUNDED:
      return "unbounded";
    case DEGENERATE:
      return "degenerate";
    case NUMFAILURE:
      return "numerical failure";
    case PROCFAIL:
      return "branch and bound failed";
    default:
      return "return code " + std::to_string(ret);
  }
}

// The model as an lp_solve problem (columns 1..n, rows 1..m in order,
// minimise the objective column), or null when lp_solve refuses it. Built
// column by column, lp_solve's native layout: its row entry mode spent 20.7 s
// on the 376,494 rows of a 32x256 model, this 0.36 s.
lprec* MakeLp(const Model& model) {
  const int ncols = static_cast<int>(model.cols.size());
  const int nrows = static_cast<int>(model.rows.size());
  // The rows' terms by column (counting sort).
  std::vector<int> start(ncols + 1, 0);
  for (const Row& row : model.rows) {
    for (const Term& t : row.terms) ++start[t.col + 1];
  }
  for (int j = 0; j < ncols; ++j) start[j + 1] += start[j];
  std::vector<int> row_of(start[ncols]);
  std::vector<REAL> coef(start[ncols]);
  std::vector<int> next(start.begin(), start.end() - 1);
  for (int r = 0; r < nrows; ++r) {
    for (const Term& t : model.rows[r].terms) {
      row_of[next[t.col]] = r + 1;
      coef[next[t.col]++] = t.coef;
    }
  }
  lprec* lp = make_lp(nrows, 0);
  if (!lp) return nullptr;
  set_verbose(lp, NEUTRAL);
  set_outputfile(lp, const_cast<char*>(""));  // "" silences every print
  bool ok = true;
  for (int r = 0; ok && r < nrows; ++r) {
    ok = set_constr_type(lp, r + 1, model.rows[r].sense == Sense::kLe ? LE : GE) == TRUE &&
         set_rh(lp, r + 1, model.rows[r].rhs) == TRUE;
  }
  for (int j = 0; ok && j < ncols; ++j) {
    ok = add_columnex(lp, start[j + 1] - start[j], coef.data() + start[j],
                      row_of.data() + start[j]) == TRUE;
    const Column& col = model.cols[j];
    if (ok) ok = set_bounds(lp, j + 1, col.lb, col.ub) == TRUE;
    if (ok && col.integer) ok = set_int(lp, j + 1, TRUE) == TRUE;
  }
  if (ok) ok = set_obj(lp, model.objective_col + 1, 1.0) == TRUE;
  set_minim(lp);
  if (!ok) {
    delete_lp(lp);
    return nullptr;
  }
  return lp;
}

}  // namespace

LpOutcome SolveWithLpSolve(const Model& model, const LpParams& params) {
  LpOutcome out;
  const int ncols = static_cast<int>(model.cols.size());
  lprec* lp = MakeLp(model);
  if (!lp) {
    out.error = "lp_solve: building the model failed";
    return out;
  }
  for (int j = 0; j < ncols; ++j) {
    const int hint = model.cols[j].hint;
    if (hint != 0) set_var_branch(lp, j + 1, hint > 0 ? BRANCH_CEILING : BRANCH_FLOOR);
  }
  set_presolve(lp, PRESOLVE_NONE, get_presolveloops(lp));
  // Pseudo-cost selection of the branching column (ties: fewest non-integers)
  // found and proved more optima than lowest-index selection on 4x8 and 8x16
  // instances; the per-column hints still steer the first dive.
  set_bb_rule(lp, NODE_PSEUDONONINTSELECT);
  set_mip_gap(lp, TRUE, params.absolute_gap);
  set_mip_gap(lp, FALSE, params.relative_gap);

  Context ctx;
  ctx.params = &params;
  ctx.columns = ncols;
  put_abortfunc(lp, AbortCallback, &ctx);
  put_msgfunc(lp, MessageCallback, &ctx, MSG_LPOPTIMAL | MSG_MILPFEASIBLE | MSG_MILPBETTER);

  const int ret = solve(lp);
  out.nodes = static_cast<std::int64_t>(get_total_nodes(lp));
  const auto read_final = [&] {
    std::vector<REAL> v(ncols);
    if (get_variables(lp, v.data()) == TRUE) {
      out.values.assign(v.begin(), v.end());
      out.objective = get_objective(lp);
      out.has_solution = true;
    }
  };
  switch (ret) {
    case OPTIMAL:
    case PRESOLVED:
      out.code = LpOutcome::Code::kOptimal;
      read_final();
      break;
    case SUBOPTIMAL:
      out.code = LpOutcome::Code::kStopped;
      read_final();
      break;
    case USERABORT:
    case TIMEOUT:
      out.code = LpOutcome::Code::kStopped;
      break;
    case INFEASIBLE:
      out.code = LpOutcome::Code::kInfeasible;
      break;
    default:
      out.code = LpOutcome::Code::kError;
      out.error = "lp_solve: " + CodeName(ret);
      break;
  }
  // The callback's copy covers stops that leave no final solution to read.
  if (!out.has_solution && ctx.has_incumbent && out.code != LpOutcome::Code::kInfeasible) {
    out.values = ctx.incumbent;
    out.objective = ctx.incumbent_objective;
    out.has_solution = true;
  }
  delete_lp(lp);
  return out;
}

Status WriteModelFile(const Model& model, const std::string& path) {
  lprec* lp = MakeLp(model);
  if (!lp) return Internal("lp_solve: building the model failed");
  // Names a reader can follow: C the objective, S_<op> the starts (S_2B5: stage 2,
  // B, micro-batch 5), Y_s<stage>_m<mb> the offload choices. The other columns
  // (orders, indicators, helpers) keep lp_solve's C<index>: naming every one
  // grows its name table quadratically (61 s instead of 1 s for the 103,873
  // columns of a 16x24 offload model).
  const auto name = [&](int col, const std::string& n) {
    set_col_name(lp, col + 1, const_cast<char*>(n.c_str()));
  };
  name(model.objective_col, "C");
  for (std::size_t i = 0; i < model.ops.size(); ++i) {
    const Op& op = model.ops[i];
    name(model.start_col[i], "S_" + ToString(op));
    if (op.type == OpType::kO) {
      name(model.offload_col[model.activation[i]],
           "Y_s" + std::to_string(op.stage) + "_m" + std::to_string(op.microbatch));
    }
  }
  const bool mps = path.ends_with(".mps");
  const Status written = WriteFileWith(path, [&](const std::string& to) {
    return (mps ? write_freemps(lp, const_cast<char*>(to.c_str()))
                : write_lp(lp, const_cast<char*>(to.c_str()))) == TRUE;
  });
  delete_lp(lp);
  return written;
}

}  // namespace optpipe::milp

namespace optpipe {
bool MilpAvailable() { return true; }  // built only with lp_solve (OPTPIPE_WITH_EXACT)
}  // namespace optpipe
