#include "heuristics/method.h"

#include <sstream>

#include "core/checker.h"
#include "heuristics/auto_method.h"
#include "heuristics/list_scheduler.h"

namespace optpipe {
namespace {

Status Always(const Problem&) { return OkStatus(); }

Status OneStagePerDevice(const Problem& p) {
  if (p.stages_per_device == 1) return OkStatus();
  return NotApplicable("needs stages_per_device = 1 (got " + std::to_string(p.stages_per_device) +
                       ")");
}

}  // namespace

std::string FormatValues(const std::vector<double>& v) {
  std::ostringstream os;
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os.str();
}

const std::vector<MethodInfo>& Methods() {
  static const std::vector<MethodInfo> kMethods = {
      {"auto", "best of every applicable method, improved by parallel local search (--time-limit)",
       Always, nullptr,
       [](const Problem& p, const SearchOptions& o) -> StatusOr<Schedule> {
         StatusOr<AutoResult> r = RunAuto(p, o);
         if (!r.ok()) return r.status();
         return std::move(r->solution.schedule);
       }},
      {"gpipe", "GPipe: all forwards, then all backwards (Huang et al. 2019); peak M activations",
       Always, BuildGPipe},
      {"1f1b",
       "1F1B / PipeDream-Flush: warm-up, one forward one backward, drain (Narayanan et al. 2021)",
       OneStagePerDevice, BuildOneFOneB},
      {"1f1b-i", "interleaved 1F1B, v chunks per device, group size g (Narayanan et al. 2021)",
       Interleaved1F1BApplies, nullptr, BuildInterleaved1F1B},
      {"zb-h1", "Zero Bubble H1: W fills the drain bubbles at 1F1B memory (Qi et al. 2024)",
       ZeroBubbleApplies, BuildZBH1},
      {"zb-h2", "Zero Bubble H2: deeper warm-up, zero bubble per device (Qi et al. 2024)",
       ZeroBubbleApplies, nullptr, BuildZBH2},
      {"zb-v", "ZB-V: two chunks in a V, zero bubble at 1F1B memory (Qi et al. 2024)",
       VShapeApplies, BuildZBV},
      {"v-half", "V-Half: V-shape at half of 1F1B's activation memory (Qi et al. 2024)",
       VShapeApplies, BuildVHalf},
      {"v-min", "V-Min: V-shape at a third of 1F1B's activation memory (Qi et al. 2024)",
       VShapeApplies, BuildVMin},
      {"gis", "GIS: interleaved schedule of uniform memory, the PipeOffload base (Wan et al. 2025)",
       GisApplies, BuildGIS},
      {"gis-h", "GIS-H: GIS with a shortened warm-up, lower peak (Wan et al. 2025)", GisApplies,
       nullptr, BuildGISH},
      {"po-h", "PipeOffload PO-H: offload the long-lived activations of GIS-H (Wan et al. 2025)",
       PipeOffloadApplies, nullptr, BuildPOH},
      {"po-f", "PipeOffload PO-F: offload every activation, minimal memory (Wan et al. 2025)",
       PipeOffloadApplies, nullptr, BuildPOF},
      {"po-keep",
       "PO-F with the activations that stay on the device searched: a slow link carries fewer",
       PoKeepApplies, nullptr, BuildPOKeep},
      {"list", "memory- and offload-aware list scheduler, best of a few warm-up/W/offload settings",
       Always, nullptr, BuildList},
      {"adaoffload",
       "AdaOffload: densest warm-up memory allows, PipeOffload rules after (OptPipe App. D)",
       AdaOffloadApplies, nullptr, BuildAdaOffload},
  };
  return kMethods;
}

const MethodInfo* FindMethod(const std::string& name) {
  for (const MethodInfo& m : Methods()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

StatusOr<Solution> RunMethod(const Problem& p, const std::string& name, const SearchOptions& opt) {
  const MethodInfo* method = FindMethod(name);
  if (!method) return NotFound("unknown method '" + name + "' (optpipe methods lists them)");
  if (Status st = method->applicable(p); !st.ok()) {
    return Status(st.code(), name + " is not applicable: " + st.message());
  }
  StatusOr<Schedule> sched = method->search ? method->search(p, opt) : method->build(p);
  if (!sched.ok()) return Status(sched.status().code(), name + ": " + sched.status().message());
  return Certify(p, std::move(*sched), name);
}

StatusOr<Solution> Certify(const Problem& p, Schedule sched, const std::string& name) {
  sched.method = name;
  StatusOr<SimResult> sim = Simulate(p, sched);
  if (!sim.ok()) {
    if (sim.status().code() != StatusCode::kInfeasible || !p.memory_limit) {
      return Status(sim.status().code(), name + ": " + sim.status().message());
    }
    // Say how much memory the schedule would need: simulate it unlimited.
    Problem unlimited = p;
    unlimited.memory_limit.reset();
    StatusOr<SimResult> free_run = Simulate(unlimited, sched);
    std::string need;
    if (free_run.ok()) {
      need = "; it needs peak memory [" + FormatValues(free_run->peak_memory) +
             "] against memory.limit [" + FormatValues(*p.memory_limit) + "]";
    }
    return Infeasible(name + " does not fit the memory limit: " + sim.status().message() + need);
  }
  Solution sol{std::move(sched), std::move(*sim)};
  // The checker is independent of the simulator: a disagreement is our bug.
  const CheckReport rep = CheckSchedule(p, ToTimed(p, sol.schedule, sol.sim));
  if (!rep.valid()) return Internal(name + " produced an invalid schedule: " + rep.errors.front());
  return sol;
}

}  // namespace optpipe
