// ComputeLowerBound: a provably valid lower bound on a problem's objective.
//
// With t0 the first start of the iteration (always an F of stage 0):
//
//  * device bound (makespan): device d runs work_d = sum over its stages of
//    M * (f + b + w) on one lane. Its first op is an F of its lowest stage
//    s_min(d), which cannot start before head_d = the F chain of stages
//    0..s_min(d)-1 plus comms (t0 + ASAP start). With a fused backward its
//    last op is a B of s_min(d) (every other op on d has a descendant B of a
//    lower stage on d), after which tail_d = the B chain of stages below
//    s_min(d) plus comms must still run; with split backward a W can end the
//    device, but after its last B, of a stage s, only W's are left on it:
//    that B's own and, under a memory limit, those whose remains (a -
//    freed_by_b each) fit beside its whole activation in the room (W time by
//    a fractional knapsack), while its micro-batch still runs the B chain
//    below s and W(0): tail_d = the least over d's stages of that chain less
//    that W time (zero-bubble drains need room). So makespan >= head_d +
//    work_d + tail_d. Without
//    offload, a device with one stage also idles until its first B can
//    start, less the n f of the n = room / a forwards it can hold meanwhile.
//  * critical path (makespan): one micro-batch through every stage and back.
//  * device_span: span_d >= work_d, and >= for each stage s on d the chain
//    F(s,m) -> ... -> F(S-1,m) -> B(S-1,m) -> ... -> B(s,m) [-> W(s,m)].
//  * memory (under memory.limit; both objectives): device d holds at most
//    C_d = limit_d - static_d of activations at any instant, so the memory-
//    time of its activations is at most C_d times its span (<= makespan). An
//    activation a of stage s lives at least from F(s,m)'s start to B(s,m)'s
//    end, life_s = f_s + the F chain above s + the B chain back + b_s (comms
//    twice), and its part a - freed_by_b another w_s until W ends: keep_s =
//    a life_s + (a - freed_by_b) w_s. Offloaded, its offloadable part o is
//    resident only from F's start to O's end and from R's start to B's end,
//    at least f_s + 2 t_s + b_s, for 2 t_s of its host link's time:
//    off_s = o (f_s + 2 t_s + b_s) + (a - o) life_s + (a - freed_by_b) w_s.
//    The link runs its copies one at a time within the span too, and for the
//    makespan none before the first forward of its stages can end (the F
//    chain up to s plus f_s) nor after the last reload but b_s and what must
//    follow a B(s) (its W, or the B chain below s): T less those two edges.
//    So makespan >= the least T for which the devices of each link can
//    offload enough to bring their memory-time under C_d T with at most
//    T - edges of link time (whole activations per stage: for each device a
//    small covering knapsack, searched best saving per link time first under
//    its fractional bound, which it falls back to past 20,000 nodes); for
//    device_span, each device alone with its own copies, within its span.
//    Weighted: an activation counts w(x) per unit of time while it holds
//    amount x (whole a, a - freed_by_b waiting for W, a - offloadable on the
//    host), with any amounts that fit in C_d together weighing at most 1, and
//    the span holds at most 1 at a time. Tried: w(x) = x / (the most the
//    amounts fill of C_d); whole activations only, over the most of them that
//    fit (room for 1.5 holds one: their lives are then disjoint); and the best
//    weights of a small LP (one row per most that fits together) for all
//    kept and for all offloaded. For the makespan, device d holds nothing
//    before its head (the F chain up to its lowest stage) and, counting whole
//    activations only, nothing after its tail (the least over its stages of
//    max(w_s if split, the B chain below s)).
//  * value: the largest of these, raised to the next multiple of the time
//    grain (AtGrain in core/problem.h: the least objective is such a multiple).
//
//   LowerBound lb = ComputeLowerBound(problem);   // lb.value
#pragma once

#include "core/problem.h"

namespace optpipe {

struct LowerBound {
  double value = 0;          // bound on the problem's objective (at the time grain)
  double device_bound = 0;   // the per-device work bound (see above)
  double critical_path = 0;  // the per-micro-batch chain bound
  double memory_bound = 0;   // the memory-time bound (0 without memory.limit)
  int binding_device = 0;    // device attaining device_bound
};

LowerBound ComputeLowerBound(const Problem& p);

}  // namespace optpipe
