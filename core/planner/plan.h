// Problem builder: a model's layer costs, a hardware description and the
// pipeline shape (D devices, v stages per device, M micro-batches) give an
// optpipe-problem/1 whose stages come from the partition DP (partition.h)
// and whose per-stage times and memory reflect the checkpoint DP
// (checkpoint.h).
//
//   ModelCosts c = BuildCosts(model, hw);
//   PlanOptions o;  o.devices = 8;  o.microbatches = 16;
//   StatusOr<Plan> plan = BuildPlan(c, hw, o);
//   if (plan.ok()) WriteFile("p.json", ToJson(plan->problem));
//
// Stage cost (Chiang et al. 2025, eq. 1 and 4): F + B + W of one micro-batch, B with the
// recomputation the checkpoint DP chose under the stage's memory; a stage
// whose parameters or least activation memory do not fit costs +infinity.
// Communication (s*b*h*t / device bandwidth) is the same at every cut, so it
// is left out of the objective as in the paper, and given to the problem.
//
// Memory per device, in GiB in the problem (times in ms):
//   memory.limit  = hardware memory_gib
//   memory.static = reserved_gib + sum over its stages of
//                   (params * bytes_per_param + the stage's recompute transient)
//   each of the device's v stages gets (memory_gib - reserved_gib) / v and
//   must hold its static part plus l activations, l = InFlight(...).
// Offload (when allowed): offload_time = the stage's activation / host
// bandwidth, offloadable = activation; host_links group gpus_per_host_link
// consecutive devices.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "core/planner/checkpoint.h"
#include "core/planner/cost_model.h"
#include "core/problem.h"
#include "core/status.h"

namespace optpipe::planner {

struct PlanOptions {
  int devices = 1;                        // D
  int stages_per_device = 1;              // v
  int microbatches = 1;                   // M
  std::string placement = "interleaved";  // or "vshape"
  bool split_backward = true;
  bool allow_offload = true;
  std::string name;  // problem name; empty: "<model>-<D>x<v>-m<M>"
};

struct StagePlan {
  int first = 0, last = 0;  // layers (indices into ModelCosts::layers), inclusive
  int device = 0;
  int in_flight = 1;        // l of the checkpoint DP
  double params = 0;        // parameter count
  double static_bytes = 0;  // params * bytes_per_param
  double budget = 0;        // bytes left for l micro-batches' activations + transient
  CheckpointPlan checkpoints;
  double time() const { return checkpoints.f + checkpoints.b + checkpoints.w; }
};

struct Plan {
  Problem problem;
  std::vector<StagePlan> stages;
  double objective = 0;  // the DP partition's largest stage time (ms)
  // The even split (transformer layers as even as possible, the extra ones on
  // the first stages; embedding first, head last) and its largest stage time,
  // +inf when one of its stages does not fit.
  std::vector<int> even_first;
  double even_objective = std::numeric_limits<double>::infinity();
};

// Micro-batches a stage holds at once under the schedule the plan sizes
// memory for: 1F1B's min(M, S - s) when v = 1; with v > 1, Megatron-LM's
// interleaved warm-up (Narayanan et al. 2021) on the stage's device d,
// min(M v, 2 (D - d - 1) + (v - 1) D + 1) chunk activations, shared by its v
// stages (rounded up).
int InFlight(const Problem& shape, int stage);

// kInvalidArgument for a bad shape (the message names the option);
// kInfeasible when no partition fits, saying what the closest one needs.
StatusOr<Plan> BuildPlan(const ModelCosts& costs, const Hardware& hw, const PlanOptions& opt);

// "emb+L0-L4", "L5-L9", "L35-L37+head": a stage's layers in model terms.
std::string LayerRange(const ModelCosts& costs, int first, int last);

}  // namespace optpipe::planner
