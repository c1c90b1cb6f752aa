// optpipe: the command-line front end. Exit codes, the same for every
// subcommand: 0 success, 1 a checked thing is invalid, 2 unreadable or
// malformed input, 3 method not applicable or infeasible for this problem.
#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/checker.h"
#include "core/format.h"
#include "core/lower_bound.h"
#include "heuristics/method.h"

namespace optpipe {
namespace {

using json = nlohmann::json;

enum Exit { kOk = 0, kInvalid = 1, kBadInput = 2, kNotApplicable = 3 };

int ExitFor(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk: return kOk;
    case StatusCode::kNotApplicable:
    case StatusCode::kInfeasible: return kNotApplicable;
    case StatusCode::kInternal: return kInvalid;
    default: return kBadInput;
  }
}

int Fail(const Status& st) {
  std::cerr << "optpipe: " << st.message() << "\n";
  return ExitFor(st);
}

std::string Vec(const std::vector<double>& v) { return json(v).dump(); }

int CmdSchedule(const std::string& problem_path, const std::string& method, const std::string& out) {
  StatusOr<Problem> p = LoadProblem(problem_path);
  if (!p.ok()) return Fail(p.status());
  if (!FindMethod(method)) {
    return Fail(InvalidArgument("--method: unknown method '" + method + "'; `optpipe methods` lists them"));
  }
  std::cerr << "optpipe: scheduling " << p->name << " (" << p->devices << " devices x "
            << p->microbatches << " micro-batches, " << p->stages() << " stages) with " << method << "\n";
  StatusOr<Solution> sol = RunMethod(*p, method);
  if (!sol.ok()) return Fail(sol.status());
  TimedSchedule t = ToTimed(*p, sol->schedule, sol->sim);
  const double bound = ComputeLowerBound(*p).value;
  t.info.bound = bound;
  t.info.gap = sol->sim.objective > 0 ? (sol->sim.objective - bound) / sol->sim.objective : 0.0;
  const std::string text = ToJson(t);
  if (out.empty() || out == "-") {
    std::cout << text;
  } else if (Status st = WriteFile(out, text); !st.ok()) {
    return Fail(st);
  }
  std::cerr << "optpipe: " << method << ": makespan " << sol->sim.makespan << ", device_span "
            << sol->sim.device_span << ", bound " << bound << " (gap " << 100 * *t.info.gap
            << "%), bubble " << 100 * sol->sim.bubble_ratio << "%, peak memory "
            << Vec(sol->sim.peak_memory) << "\n";
  return kOk;
}

int CmdValidate(const std::string& problem_path, const std::string& sched_path, bool as_json) {
  StatusOr<Problem> p = LoadProblem(problem_path);
  if (!p.ok()) return Fail(p.status());
  StatusOr<TimedSchedule> t = LoadTimedSchedule(sched_path);
  if (!t.ok()) return Fail(t.status());
  const CheckReport rep = CheckSchedule(*p, *t);
  if (as_json) {
    std::cout << json{{"valid", rep.valid()}, {"makespan", rep.makespan},
                      {"device_span", rep.device_span}, {"objective", rep.objective},
                      {"peak_memory", rep.peak_memory}, {"errors", rep.errors}}
                     .dump(1)
              << "\n";
  } else {
    for (const std::string& e : rep.errors) std::cout << "invalid: " << e << "\n";
    std::cout << (rep.valid() ? "valid" : std::to_string(rep.errors.size()) + " violation(s)")
              << ": makespan " << rep.makespan << ", device_span " << rep.device_span
              << ", peak memory " << Vec(rep.peak_memory) << "\n";
  }
  return rep.valid() ? kOk : kInvalid;
}

int CmdBound(const std::string& problem_path, bool as_json) {
  StatusOr<Problem> p = LoadProblem(problem_path);
  if (!p.ok()) return Fail(p.status());
  const LowerBound lb = ComputeLowerBound(*p);
  if (as_json) {
    std::cout << json{{"bound", lb.value}, {"device_bound", lb.device_bound},
                      {"critical_path", lb.critical_path}, {"binding_device", lb.binding_device}}
                     .dump(1)
              << "\n";
  } else {
    std::cout << "lower bound " << lb.value << " (device bound " << lb.device_bound << " on device "
              << lb.binding_device << ", critical path " << lb.critical_path << ")\n";
  }
  return kOk;
}

int CmdMethods(const std::string& problem_path) {
  std::optional<Problem> p;
  if (!problem_path.empty()) {
    StatusOr<Problem> loaded = LoadProblem(problem_path);
    if (!loaded.ok()) return Fail(loaded.status());
    p = *loaded;
  }
  for (const MethodInfo& m : Methods()) {
    std::cout << m.name << std::string(m.name.size() < 10 ? 10 - m.name.size() : 1, ' ') << m.summary;
    if (p) {
      const Status st = m.applicable(*p);
      std::cout << (st.ok() ? "  [applies]" : "  [not applicable: " + st.message() + "]");
    }
    std::cout << "\n";
  }
  return kOk;
}

}  // namespace
}  // namespace optpipe

int main(int argc, char** argv) {
  using namespace optpipe;
  CLI::App app{
      "optpipe: pipeline-parallel training schedules (F/B/W per stage and micro-batch, optional\n"
      "activation offload) that respect device memory. Exit codes: 0 ok, 1 invalid, 2 bad input,\n"
      "3 method not applicable or infeasible."};
  app.require_subcommand(1);

  std::string problem, schedule, method = "1f1b", out;
  bool as_json = false;

  auto* sched = app.add_subcommand("schedule", "Compute a schedule for a problem and write it as JSON");
  sched->add_option("problem", problem, "optpipe-problem/1 JSON file")->required();
  sched->add_option("-m,--method", method, "Method name (see `optpipe methods`)")->capture_default_str();
  sched->add_option("-o,--output", out, "Write the optpipe-schedule/1 file here (default: stdout)");
  sched->footer("Example: optpipe schedule tests/cases/unit-4x8.json --method 1f1b -o s.json");

  auto* val = app.add_subcommand("validate", "Check a timed schedule against its problem");
  val->add_option("problem", problem, "optpipe-problem/1 JSON file")->required();
  val->add_option("schedule", schedule, "optpipe-schedule/1 JSON file")->required();
  val->add_flag("--json", as_json, "Print {valid, makespan, device_span, peak_memory, errors}");
  val->footer("Exit 0 when valid, 1 listing every violation, 2 when a file cannot be read.");

  auto* bound = app.add_subcommand("bound", "Print a provable lower bound on the problem's objective");
  bound->add_option("problem", problem, "optpipe-problem/1 JSON file")->required();
  bound->add_flag("--json", as_json, "Print {bound, device_bound, critical_path, binding_device}");

  auto* methods = app.add_subcommand("methods", "List the scheduling methods (and whether they apply)");
  methods->add_option("problem", problem, "Optional problem: say which methods apply to it");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (*sched) return CmdSchedule(problem, method, out);
  if (*val) return CmdValidate(problem, schedule, as_json);
  if (*bound) return CmdBound(problem, as_json);
  if (*methods) return CmdMethods(problem);
  return 2;
}
