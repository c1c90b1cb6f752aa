// The method registry: every schedule generator optpipe offers, by CLI name.
//
// RunMethod builds a method's orders and passes them through the core
// simulator and the checker before returning: a Solution is always valid.
// A method whose preconditions fail returns kNotApplicable saying why; one
// whose schedule cannot fit memory.limit returns kInfeasible with the memory
// it would need.
//
//   StatusOr<Solution> s = RunMethod(problem, "1f1b");
//   if (s.ok()) std::cout << s->sim.makespan;
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/status.h"
#include "heuristics/local_search.h"

namespace optpipe {

struct Solution {
  Schedule schedule;
  SimResult sim;
};

struct MethodInfo {
  std::string name;
  std::string summary;  // one line, with the paper behind it
  // OK when the method applies to the problem; kNotApplicable saying why otherwise.
  std::function<Status(const Problem&)> applicable;
  std::function<StatusOr<Schedule>(const Problem&)> build;
  // Methods that search take a budget; when set, RunMethod calls this instead.
  std::function<StatusOr<Schedule>(const Problem&, const SearchOptions&)> search = nullptr;
};

const std::vector<MethodInfo>& Methods();

// "1, 2.5, 3": values for messages (peak memory against memory.limit).
std::string FormatValues(const std::vector<double>& v);

// Times `s` with the simulator and validates it with the independent checker:
// the last step of every method. A method name prefixes any error.
StatusOr<Solution> Certify(const Problem& p, Schedule s, const std::string& method);
const MethodInfo* FindMethod(const std::string& name);

// `opt` reaches methods that search (auto); the others ignore it.
StatusOr<Solution> RunMethod(const Problem& p, const std::string& name,
                             const SearchOptions& opt = SearchOptions{});

// Generators, one file per family. A builder may simulate candidate settings
// of its knobs (warm-up depth, group size, offloaded stages) to pick the best
// that fits memory (heuristics/best_fitting.h); it returns kInfeasible, with
// the memory it would need, when none does. Those with many candidates take
// SearchOptions: its time limit and stop token cut the knob search short.
StatusOr<Schedule> BuildGPipe(const Problem& p);
StatusOr<Schedule> BuildOneFOneB(const Problem& p);
// heuristics/interleaved_1f1b.cc
Status Interleaved1F1BApplies(const Problem& p);
StatusOr<Schedule> BuildInterleaved1F1B(const Problem& p, const SearchOptions& opt = {});
// heuristics/zero_bubble.cc (ZB-V shares the capped scheduler of ZB-H1/H2)
Status ZeroBubbleApplies(const Problem& p);
StatusOr<Schedule> BuildZBH1(const Problem& p);
StatusOr<Schedule> BuildZBH2(const Problem& p, const SearchOptions& opt = {});
StatusOr<Schedule> BuildZBV(const Problem& p);
// heuristics/v_schedules.cc
Status VShapeApplies(const Problem& p);
StatusOr<Schedule> BuildVHalf(const Problem& p);
StatusOr<Schedule> BuildVMin(const Problem& p);
// heuristics/pipe_offload.cc
Status GisApplies(const Problem& p);
Status PipeOffloadApplies(const Problem& p);
StatusOr<Schedule> BuildGIS(const Problem& p);
StatusOr<Schedule> BuildGISH(const Problem& p, const SearchOptions& opt = {});
StatusOr<Schedule> BuildPOH(const Problem& p, const SearchOptions& opt = {});
StatusOr<Schedule> BuildPOF(const Problem& p, const SearchOptions& opt = {});
// PO-Keep: PO-F's orders and copy planning, with the activations that stay on
// the device chosen by search (hill climbing, one activation at a time, each
// candidate simulated): a link too slow to carry every activation does better
// keeping some of them, where memory allows (OptPipe's point against
// PipeOffload). Needs what PO-F needs and a memory limit.
Status PoKeepApplies(const Problem& p);
StatusOr<Schedule> BuildPOKeep(const Problem& p, const SearchOptions& opt = {});
// heuristics/adaoffload.cc
Status AdaOffloadApplies(const Problem& p);
StatusOr<Schedule> BuildAdaOffload(const Problem& p, const SearchOptions& opt = {});

}  // namespace optpipe
