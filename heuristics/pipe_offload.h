// PipeOffload's building blocks (heuristics/pipe_offload.cc), shared with
// AdaOffload (heuristics/adaoffload.cc), which reuses PipeOffload's orders
// and copy planning after densifying the fill phase.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/status.h"

namespace optpipe::pipe_offload {

// Group sizes worth simulating: all from the smallest to d when `search`,
// else the published (smallest) one.
std::vector<int> GroupSizes(const Problem& p, bool search);
// Compute orders of the building block: groups of g micro-batches (GIS), or
// one micro-batch per block with chunk spacing g (PipeOffload). No copies.
Schedule BlockOrders(const Problem& p, int g, bool per_microbatch);
// Stages whose activations PipeOffload offloads: all, or the longest-lived half.
std::vector<char> OffloadedStages(const Problem& p, bool all);
// Plans O and R of the chosen stages on the host links into s.copy. As
// published (§4.2, §4.4): only round trips that the link hides behind compute,
// so no backward waits for a reload. `keep_all`: every activation of the
// chosen stages that lives at least a round trip (compute-only times) is
// offloaded, even where reloads then delay backwards, and a reload waits
// behind an offload of its device when the device has no room for it; what
// PipeOffload's implementation does when the link is slower than the compute
// (k > 1), the baseline OptPipe measures in its memory-limited runs (Table 1).
Status PlaceCopies(const Problem& p, Schedule& s, const std::vector<char>& stages,
                   bool keep_all = false);

}  // namespace optpipe::pipe_offload
