// optpipe plan: a transformer config + hardware -> an optpipe-problem/1 with a
// memory-aware layer partition and checkpoint choice (core/planner/).
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "core/format.h"
#include "core/planner/config.h"
#include "core/planner/plan.h"
#include "core/text_format.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

using namespace optpipe::planner;

struct Args {
  std::string model, hardware = "h100", profile, out, schedule_method, schedule_out, name;
  std::string placement = "interleaved";
  int devices = 0, stages_per_device = 1, microbatches = 0, microbatch_size = 0;
  bool no_offload = false, fused_backward = false;
  SolveOptions solve;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

StatusOr<Hardware> ResolveHardware(const std::string& arg) {
  const bool is_file =
      arg.find('/') != std::string::npos || arg.ends_with(".json") || std::filesystem::exists(arg);
  if (is_file) return LoadHardware(arg);
  StatusOr<Hardware> hw = HardwarePreset(arg);
  if (!hw.ok())
    return InvalidArgument("--hardware: '" + arg + "' is neither h100, a100 nor a file");
  return hw;
}

void Report(const ModelCosts& c, const Hardware& hw, const Plan& plan) {
  const Problem& p = plan.problem;
  std::ostream& e = Progress();
  e << "optpipe: stage device layers        l  checkpoints      F ms     B ms     W ms  "
       "act GiB/mb  transient GiB\n";
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const StagePlan& st = plan.stages[s];
    const CheckpointPlan& ck = st.checkpoints;
    e << "optpipe: " << std::setw(5) << s << " " << std::setw(6) << st.device << " " << std::left
      << std::setw(13) << LayerRange(c, st.first, st.last) << std::right << " " << std::setw(2)
      << st.in_flight << "  " << std::left << std::setw(14) << ck.Text() << std::right << " "
      << std::setw(8) << FormatFixed(ck.f, 2, true) << " " << std::setw(8)
      << FormatFixed(ck.b, 2, true) << " " << std::setw(8) << FormatFixed(ck.w, 2, true) << " "
      << std::setw(11) << FormatFixed(ck.activation / kGiB, 3, true) << " " << std::setw(14)
      << FormatFixed(ck.transient / kGiB, 3, true) << "\n";
  }
  // Estimated peak per device: static + every stage's l in-flight activations.
  std::vector<double> peak = p.static_memory;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    peak[plan.stages[s].device] += plan.stages[s].in_flight * p.activation[s];
  }
  e << "optpipe: static memory per device (GiB):";
  for (double x : p.static_memory) e << " " << FormatFixed(x, 1, true);
  e << "\noptpipe: estimated peak with l in flight (GiB):";
  for (double x : peak) e << " " << FormatFixed(x, 1, true);
  e << " of " << hw.memory_gib << "\n";
  std::string even;
  for (std::size_t s = 0; s + 1 < plan.even_first.size(); ++s) {
    int count = 0;
    for (int k = plan.even_first[s]; k < plan.even_first[s + 1]; ++k) {
      count += c.layers[k].kind == LayerKind::kTransformer ? 1 : 0;
    }
    even += (s ? "," : "") + std::to_string(count);
  }
  e << "optpipe: largest stage time (F+B+W per micro-batch): DP partition "
    << FormatFixed(plan.objective, 2, true) << " ms vs even split (" << even
    << " transformer layers) ";
  if (std::isfinite(plan.even_objective)) {
    e << FormatFixed(plan.even_objective, 2, true) << " ms ("
      << FormatFixed(100 * (plan.even_objective - plan.objective) / plan.even_objective, 1, true)
      << "% lower)\n";
  } else {
    e << "does not fit memory\n";
  }
}

int RunSchedule(const Args& a, const Problem& p) {
  Progress() << "optpipe: scheduling " << p.name << " with " << a.schedule_method << "\n";
  SolveOptions solve = a.solve;
  solve.stop = InterruptFlag();
  solve.method = a.schedule_method;
  StatusOr<SolveResult> sol = Solve(p, solve);
  if (!sol.ok()) return Fail(sol.status());
  if (!sol->has_schedule()) return FailNoSchedule(*sol);
  const TimedSchedule t = ToTimed(p, *sol);
  if (!a.schedule_out.empty()) {
    if (Status st = WriteFile(a.schedule_out, ToJson(t)); !st.ok()) return Fail(st);
  }
  Progress() << "optpipe: " << a.schedule_method << ": makespan " << sol->sim.makespan
             << " ms, bound " << *t.info.bound << " (gap "
             << FormatFixed(100 * *t.info.gap, 1, true) << "%), bubble "
             << FormatFixed(100 * sol->sim.bubble_ratio, 1, true) << "%, peak memory";
  for (double x : sol->sim.peak_memory) Progress() << " " << FormatFixed(x, 1, true);
  Progress() << " GiB\n";
  return Interrupted() ? kInterrupted : kOk;
}

int Run(const Args& a) {
  StatusOr<ModelConfig> m = LoadModelConfig(a.model);
  if (!m.ok()) return Fail(m.status());
  if (a.microbatch_size > 0) m->microbatch_size = a.microbatch_size;
  StatusOr<Hardware> hw = ResolveHardware(a.hardware);
  if (!hw.ok()) return Fail(hw.status());
  std::optional<LayerProfile> profile;
  if (!a.profile.empty()) {
    StatusOr<LayerProfile> prof = LoadLayerProfile(a.profile, *m);
    if (!prof.ok()) return Fail(prof.status());
    profile = *prof;
  }
  const ModelCosts costs = BuildCosts(*m, *hw, profile ? &*profile : nullptr);
  PlanOptions o;
  o.devices = a.devices;
  o.stages_per_device = a.stages_per_device;
  o.microbatches = a.microbatches;
  o.placement = a.placement;
  o.split_backward = !a.fused_backward;
  o.allow_offload = !a.no_offload;
  o.name = a.name;
  Progress() << "optpipe: planning " << m->name << " (" << m->layers << " layers, "
             << FormatFixed(TotalParams(*m) / 1e9, 2, true) << "B parameters, micro-batch "
             << m->microbatch_size << " x " << m->sequence << " tokens) on " << a.devices << " x "
             << hw->name << " (" << hw->peak_tflops << " TFLOP/s x " << hw->efficiency << ", "
             << hw->memory_gib << " GiB), " << std::int64_t{a.devices} * a.stages_per_device
             << " stages, " << a.microbatches << " micro-batches"
             << (profile ? ", measured layer times" : "") << "\n";
  StatusOr<Plan> plan = BuildPlan(costs, *hw, o);
  if (!plan.ok()) return Fail(plan.status());
  Report(costs, *hw, *plan);
  const std::string text = ToJson(plan->problem);
  if (a.out.empty() || a.out == "-") {
    std::cout << text;
  } else {
    if (Status st = WriteFile(a.out, text); !st.ok()) return Fail(st);
    Progress() << "optpipe: wrote " << a.out << " (times in ms, memory in GiB)\n";
  }
  if (!a.schedule_method.empty()) {
    if (Status st = CheckSize(plan->problem, ProblemSizeLimit()); !st.ok()) return Fail(st);
    return RunSchedule(a, plan->problem);
  }
  return kOk;
}

}  // namespace

Command AddPlan(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "plan",
      "Build a problem from a transformer config and hardware (layer partition + checkpoints)");
  sub->add_option("model", args->model, "optpipe-model/1 JSON file (tests/cases/models/)")
      ->required();
  sub->add_option("-d,--devices", args->devices, "Pipeline devices D")
      ->required()
      ->check(kPositive);
  sub->add_option("-v,--stages-per-device", args->stages_per_device, "Model chunks per device v")
      ->capture_default_str()
      ->check(kPositive);
  sub->add_option("-m,--microbatches", args->microbatches, "Micro-batches M per iteration")
      ->required()
      ->check(kPositive);
  sub->add_option("--hardware", args->hardware, "h100, a100 or an optpipe-hardware/1 file")
      ->capture_default_str();
  sub->add_option("-b,--microbatch-size", args->microbatch_size,
                  "Sequences per micro-batch (default: the model file's)")
      ->check(kPositive);
  sub->add_option("--placement", args->placement, "Stage placement")
      ->capture_default_str()
      ->check(CLI::IsMember({"interleaved", "vshape"}));
  sub->add_option("--profile", args->profile,
                  "Measured layer times: optpipe-layer-profile/1 or an optpipe-problem/1 "
                  "(core/planner/config.h)");
  sub->add_flag("--no-offload", args->no_offload, "Do not allow activation offload");
  sub->add_flag("--fused-backward", args->fused_backward, "One fused B (B + W) per stage");
  sub->add_option("--name", args->name, "Problem name (default: <model>-<D>x<v>-m<M>)");
  sub->add_option("-o,--output", args->out, "Write the optpipe-problem/1 here (default: stdout)");
  sub->add_option("--schedule", args->schedule_method,
                  "Also schedule the problem with this method (e.g. auto)");
  sub->add_option("--time-limit", args->solve.time_limit_s,
                  "Wall-clock budget in seconds for methods that search")
      ->capture_default_str()
      ->check(kPositive);
  sub->add_option("-O,--schedule-output", args->schedule_out,
                  "Write the optpipe-schedule/1 of --schedule here");
  sub->footer(
      "Stages come from a DP that minimises the largest stage time (F+B+W of one micro-batch,\n"
      "with recomputation) over contiguous layer splits; each stage keeps or recomputes layer\n"
      "activations so that l in-flight micro-batches fit the device memory (l = 1F1B's warm-up\n"
      "depth). Times are in ms, memory in GiB. Exit 3 when no partition fits, with what the\n"
      "closest one needs.\n"
      "Example: optpipe plan tests/cases/models/gpt-10.5b.json --devices 8 --microbatches 16 "
      "-o p.json");
  return {sub, [args] { return Run(*args); }};
}

}  // namespace optpipe::cli
