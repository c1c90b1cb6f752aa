// Checkpoint DP: for one stage, which layers keep their activations and which
// are recomputed in the backward pass, so that the stage's time is minimal
// while its activations fit the memory left to them (Chiang et al.,
// "Optimizing Pipeline Parallelism for Deep Learning with Activation
// Checkpointing", 2025, eq. 4-9).
//
// Every layer of the stage is in one of three modes:
//   K  keep: F saves the layer's whole activation (LayerCost::activation).
//   R  checkpoint: F saves only the layer's input; the layer and the r layers
//      after it are recomputed from it, as one block, right before their
//      backward (PyTorch checkpoint of a block; the paper's segment between
//      two checkpoints).
//   r  recomputed in the block of the nearest R before it.
// A recomputed layer costs its forward time again, inside B (eq. 4), and while
// one micro-batch's block is recomputed its activations are live: the
// block's transient, s(i, j) of eq. 6.
//
// Memory of a stage with l micro-batches in flight (l F's saved before the
// first B frees, 1F1B's warm-up depth):
//   stored  = sum_K activation + sum_{R,r} held + sum_R input   (per micro-batch)
//   need    = l * stored + max over blocks of sum (activation - held)
// where `held` = what a recomputed layer holds from B until W: its
// retained_for_w with a split backward (booked from F on, the format's only
// allocation point), 0 with a fused one. The plan minimises the recompute
// time, then `need`, subject to need <= budget.
//
// Fast-forward edges (Chiang et al., eq. 7-9): a block may start only at a
// boundary that may be cut (`splittable`), i.e. no recomputed block starts
// with a skip connection crossing its input; PyTorch would otherwise add the
// edge's source as an extra checkpoint. The paper bounds a segment's transient
// by the memory left after the checkpoints before it (eq. 6); here it is
// bounded by what every checkpoint of the l micro-batches leaves, which is
// never smaller: the plan may recompute a little more than the paper's but
// its memory estimate is an upper bound.
//
// The search is exact: for every distinct block transient t it computes the
// Pareto front (stored memory, kept forward time) of each suffix, blocks
// limited to t, and keeps the best plan whose need fits.
//
//   CheckpointOptions o;  o.in_flight = 4;  o.budget = 40e9;
//   CheckpointSearch r = SearchCheckpoints(layers, splittable, o);
//   if (r.best) use(r.best->b, r.best->activation);  // else r.min_need > budget
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/planner/cost_model.h"
#include "core/status.h"

namespace optpipe::planner {

enum class LayerMode : char { kKeep = 'K', kCheckpoint = 'R', kRecompute = 'r' };

struct CheckpointOptions {
  int in_flight = 1;  // l: micro-batches whose activations a stage holds at once
  double budget = std::numeric_limits<double>::infinity();  // bytes for `need`
  bool split_backward = true;
};

// One stage's choice and what it gives the problem (per micro-batch; times in
// the layers' unit, memory in bytes).
struct CheckpointPlan {
  std::vector<LayerMode> modes;
  double f = 0, b = 0, w = 0;  // b includes the recomputation
  double recompute = 0;        // forward time repeated in B
  double activation = 0;       // stored: the problem's memory.activation
  double freed_by_b = 0;       // the problem's memory.freed_by_b
  double transient = 0;        // the largest block's live activations
  double need = 0;             // in_flight * activation + transient
  std::string Text() const;    // "KKRrr"
};

// The plan's times and memory; kInvalidArgument for modes that break a rule
// (an r without a block, an R at a boundary that may not be cut, wrong size).
// Feasibility (need <= budget) is not checked.
StatusOr<CheckpointPlan> EvaluateCheckpoints(const std::vector<LayerCost>& layers,
                                             const std::vector<bool>& splittable,
                                             const std::vector<LayerMode>& modes,
                                             const CheckpointOptions& opt);

struct CheckpointSearch {
  std::optional<CheckpointPlan> best;  // none when nothing fits the budget
  double min_need = 0;                 // the smallest need of any plan
};

// `splittable` has layers.size() - 1 entries (boundary after layer k).
CheckpointSearch SearchCheckpoints(const std::vector<LayerCost>& layers,
                                   const std::vector<bool>& splittable,
                                   const CheckpointOptions& opt);

// Tolerance of need <= budget: sums in a different order must not flip it.
bool FitsBudget(double need, double budget);

}  // namespace optpipe::planner
