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
// Plans O and R of the chosen stages on the host links into s.copy.
Status PlaceCopies(const Problem& p, Schedule& s, const std::vector<char>& stages);

}  // namespace optpipe::pipe_offload
