// The scheduling MILP as plain data (columns, rows), built from a Problem; no
// solver types. exact/lp_solve_backend.cc hands it to lp_solve.
//
// Formulation (OptPipe Appendix C, eqs. 2-19, tightened):
//
//  * x_i >= 0: start of every compute op (F, B, W) and of the O and R of every
//    activation that may be offloaded; end = x_i + T_i. C: the objective.
//  * DAG precedences x_j >= x_i + T_i + comm (eqs. 5, 6, 8).
//  * One compute op at a time per device (eq. 7): a binary z_ij per pair of
//    ops of one device whose order is not implied. Implied orders come from
//    the transitive closure of the DAG plus the fixed micro-batch order of
//    each (type, stage) (section 4.1.1), and from time windows: with the
//    objective capped at the horizon H, every op has an earliest start ES and
//    a latest start LS; if i cannot start after j ends (ES_j + T_j > LS_i),
//    i precedes j. Fixing repeats until nothing changes. Big-M of a pair is
//    LS_i + T_i - ES_j, never a global constant.
//  * Memory precedences: with micro-batches in order, a limit that holds k
//    live activations of stage s forces B(s, j-k-1) (and, when it frees less,
//    W) to end before F(s, j) starts; these become fixed edges too.
//  * Offload (eqs. 10-19): y_a per activation a = (s, m) that may be offloaded
//    (offload allowed, a memory limit, offloadable > 0, and O, R fit the
//    windows); O_a >= end F_a, R_a >= end O_a, B_a >= end R_a, all relaxed when
//    y_a = 0; a binary per undecided pair of copy ops of one host link (groups
//    of devices share one), conditional on both activations being offloaded.
//  * Memory (eq. 9, exactly as docs/FORMAT.md): checked at every allocation (F start,
//    R start). static + allocations started by then - frees ended by then
//    <= limit, frees first at one instant. Within a lane the order literals
//    say what has started / ended; across lanes (an F against an R or O, an R
//    against a B or W) an indicator binary with a one-sided big-M does, chosen
//    so that the only wrong value is the conservative one.
//  * Objective: makespan C >= end of every op without successors; device_span
//    C >= end_i - head_d for ops of device d, where head_d is the earliest any
//    op of d can start (the simulator starts the first op of d there).
//  * Load cuts: C >= x_i + T_i + sum_j T_j [i before j] + tail_d, and
//    x_i >= head_d + sum_j T_j [j before i], over the ops j of i's device.
//  * Optional triangle cuts on the ordering literals of each device (4.1.2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"

namespace optpipe::milp {

struct Term {
  int col;
  double coef;
};

enum class Sense { kLe, kGe };

struct Row {
  std::vector<Term> terms;
  Sense sense = Sense::kGe;
  double rhs = 0;
};

struct Column {
  double lb = 0, ub = 0;
  bool integer = false;
  int hint = 0;  // binaries: +1 branch up first, -1 down first, 0 solver default
};

struct BuildOptions {
  double horizon = 0;      // cap on the objective; every window derives from it
  double lower_bound = 0;  // a valid bound on the objective (core's)
  bool load_cuts = true;
  bool triangle_cuts = false;
  std::int64_t max_triangle_cuts = 200000;
  bool fix_microbatch_order = true;
};

// A simulated schedule whose orders and times become branching hints.
struct Hint {
  const Schedule* schedule = nullptr;
  const SimResult* sim = nullptr;
};

struct Model {
  std::vector<Column> cols;
  std::vector<Row> rows;
  int objective_col = -1;
  // Infeasible before solving (windows or a memory row that cannot hold).
  bool infeasible = false;
  std::string infeasible_reason;

  // For decoding: every op the model times.
  std::vector<Op> ops;
  std::vector<int> start_col;    // per op
  std::vector<int> activation;   // per op: stage * M + micro-batch
  std::vector<int> topo_rank;    // per op: a topological rank for ties
  std::vector<int> offload_col;  // per activation: y column, or -1

  // Sizes (see MilpStats).
  int order_binaries = 0, pairs_fixed = 0, offload_binaries = 0, copy_order_binaries = 0;
  int memory_binaries = 0, triangle_cuts = 0;
  std::int64_t nonzeros() const;
};

Model BuildModel(const Problem& p, const BuildOptions& opt, const Hint& hint);

// Per-lane orders of a solution: ops sorted by start (ties by topological rank),
// activations with y = 1 on their host link. Holds (Schedule::release) at the
// solution's start times on no op, on the copies, or on every op.
enum class DecodeHolds { kNone, kCopies, kAll };
Schedule Decode(const Problem& p, const Model& m, const std::vector<double>& values,
                DecodeHolds holds = DecodeHolds::kNone);

// True when every device's first op can start at head_d in the simulator (the
// devices' lowest stages are 0..k-1, as with interleaved and V placements);
// the device_span objective then measures from the constant head_d, otherwise
// from the start of the device's first op (a column).
bool HeadsExact(const Problem& p);

// A horizon no simulated schedule exceeds: every op and every comm in series
// (the simulator always has an op running or a transfer under way).
double SerialHorizon(const Problem& p);

// The model's objective of a simulated schedule: makespan, or for device_span
// the largest (last end - head_d); never below the simulator's objective.
double ModelObjective(const Problem& p, const SimResult& sim);

}  // namespace optpipe::milp
