// PyTorch pipelining CSV: the per-rank action table that
// torch.distributed.pipelining reads with
// `_PipelineScheduleRuntime._load_csv(path, format="compute_only")` and writes
// with `_dump_csv(path, format="compute_only")`.
//
// What PyTorch does (torch/distributed/pipelining/schedules.py): it reads the
// file with Python's csv.reader; row r (0-based, every line counts, blank
// lines too) is rank r's actions in execution order. Each cell goes through
// `_Action.from_str`: surrounding whitespace is stripped, an empty cell is
// None (an idle step, dropped when the schedule is lowered to communication),
// anything else must match `(\d+)(F|I|B|W|...)(\d*)` = stage, action,
// micro-batch. The stage is the global stage index. For compute_only, only
// F (forward), I (backward for the input, our split B), W (backward for the
// weights) and B (the full backward: input and weights together, our fused B)
// are allowed. `_validate_schedule` then requires: one row per rank; every
// stage on one rank only; per stage and micro-batch, F before I or B, and I
// before W; per stage M distinct F, as many I as W, and B + I = M.
//
// Export writes one row per device with no idle cells (times are the
// simulator's business): split problems use I and W, fused ones B. Offload (O,
// R) has no PyTorch action: a schedule that offloads is refused. Import is stricter than PyTorch
// (no trailing text after the micro-batch, no duplicates, every op of the
// problem present) and checks the cells against the problem's placement; every
// error names the row (rank) and column, 1-based as in a spreadsheet. A `B`
// in a split problem becomes our B immediately followed by W. The result has
// no times: simulate it (core/simulator.h).
//
//   StatusOr<std::string> csv = ToPytorchCsv(problem, schedule);  // "0F0,0F1,0I0,0W0,...\n..."
//   StatusOr<Schedule> s = FromPytorchCsv(problem, csv);
//   if (s.ok()) StatusOr<SimResult> r = Simulate(problem, *s);
#pragma once

#include <string>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/status.h"

namespace optpipe {

// kNotApplicable, saying how many O/R ops there are, for a schedule that
// offloads: PyTorch has no action for them, and dropping them would give a
// schedule that does not fit memory.
StatusOr<std::string> ToPytorchCsv(const Problem& p, const Schedule& s);

// kInvalidArgument naming row and column for anything PyTorch or the problem rejects.
StatusOr<Schedule> FromPytorchCsv(const Problem& p, const std::string& text);

}  // namespace optpipe
