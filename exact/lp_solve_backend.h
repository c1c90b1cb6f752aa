// Hands a milp::Model to lp_solve 5.5 (the only file that sees lp_solve is
// lp_solve_backend.cc: its macros stay out of every header).
//
//   LpOutcome out = SolveWithLpSolve(model, params);
//   if (out.has_solution) Decode(problem, model, out.values);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exact/model.h"

namespace optpipe::milp {

struct LpParams {
  // Polled by lp_solve between nodes and simplex iterations; true stops the search.
  std::function<bool()> should_stop;
  // Every new incumbent: column values and objective.
  std::function<void(const std::vector<double>&, double)> on_incumbent;
  // Called once with the root LP relaxation's objective.
  std::function<void(double)> on_root_bound;
  // lp_solve's absolute MIP gap. It prunes more than the nodes that cannot
  // beat the incumbent by this much (0.75 of a time grain lost a better
  // schedule): proofs keep the default (exact/milp.cc).
  double absolute_gap = 1e-9;
  double relative_gap = 1e-9;
};

struct LpOutcome {
  enum class Code { kOptimal, kStopped, kInfeasible, kError };
  Code code = Code::kError;
  bool has_solution = false;
  std::vector<double> values;  // per model column
  double objective = 0;
  std::int64_t nodes = 0;
  std::string error;  // kError: what lp_solve said
};

LpOutcome SolveWithLpSolve(const Model& model, const LpParams& params);

// Writes the model for other solvers: free MPS when `path` ends in ".mps",
// else lp_solve's LP format. Minimises C; integer columns are 0/1.
Status WriteModelFile(const Model& model, const std::string& path);

}  // namespace optpipe::milp
