// ComputeLowerBound: a provably valid lower bound on a problem's objective.
//
// Memory limits and offload only ever delay ops, so the bound ignores them.
// With t0 the first start of the iteration (always an F of stage 0):
//
//  * device bound (makespan): device d runs work_d = sum over its stages of
//    M * (f + b + w) on one lane. Its first op is an F of its lowest stage
//    s_min(d), which cannot start before head_d = the F chain of stages
//    0..s_min(d)-1 plus comms (t0 + ASAP start). With a fused backward its
//    last op is a B of s_min(d) (every other op on d has a descendant B of a
//    lower stage on d), after which tail_d = the B chain of stages below
//    s_min(d) plus comms must still run; with split backward a W can end the
//    device, tail_d = 0. So makespan >= head_d + work_d + tail_d.
//  * critical path (makespan): one micro-batch through every stage and back.
//  * device_span: span_d >= work_d, and >= for each stage s on d the chain
//    F(s,m) -> ... -> F(S-1,m) -> B(S-1,m) -> ... -> B(s,m) [-> W(s,m)].
//
//   LowerBound lb = ComputeLowerBound(problem);   // lb.value
#pragma once

#include "core/problem.h"

namespace optpipe {

struct LowerBound {
  double value = 0;          // bound on the problem's objective
  double device_bound = 0;   // the per-device work bound (see above)
  double critical_path = 0;  // the per-micro-batch chain bound
  int binding_device = 0;    // device attaining device_bound
};

LowerBound ComputeLowerBound(const Problem& p);

}  // namespace optpipe
