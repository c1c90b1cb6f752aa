#include <iostream>
#include <memory>

#include "core/chrome_trace.h"
#include "core/format.h"
#include "core/gantt_svg.h"
#include "core/pytorch_csv.h"
#include "exact/milp.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

struct Args {
  std::string problem, method = "auto", out;
  std::string svg, trace, csv;  // optional views of the result
  std::string model;            // optional: the MILP below the result, for other solvers
  SolveOptions solve;
};

int Run(const Args& a) {
  StatusOr<Problem> p = LoadProblemFor(a.problem);
  if (!p.ok()) return Fail(p.status());
  Progress() << "optpipe: scheduling " << p->name << " (" << p->devices << " devices x "
             << p->microbatches << " micro-batches, " << p->stages() << " stages) with " << a.method
             << "\n";
  SolveOptions solve = a.solve;
  solve.log = ProgressLog();
  solve.stop = InterruptFlag();
  solve.method = a.method;
  StatusOr<SolveResult> sol = Solve(*p, solve);
  if (!sol.ok()) return Fail(sol.status());
  if (!sol->has_schedule()) return FailNoSchedule(*sol);
  const TimedSchedule t = ToTimed(*p, *sol);  // with termination, bound, gap, solve time
  const std::string text = ToJson(t);
  if (a.out.empty() || a.out == "-") {
    std::cout << text;
  } else if (Status st = WriteFile(a.out, text); !st.ok()) {
    return Fail(st);
  }
  for (const auto& [path, view] :
       {std::pair{a.svg, 0}, std::pair{a.trace, 1}, std::pair{a.csv, 2}}) {
    if (path.empty()) continue;
    StatusOr<std::string> content = view == 0   ? GanttSvg(*p, t)
                                    : view == 1 ? ChromeTrace(*p, t)
                                                : ToPytorchCsv(*p, sol->schedule);
    if (!content.ok())
      return Fail(Status(content.status().code(), "--csv: " + content.status().message()));
    if (Status st = WriteFile(path, *content); !st.ok()) return Fail(st);
  }
  if (!a.model.empty()) {
    StatusOr<MilpStats> st = WriteMilpModel(*p, sol->schedule, a.model);
    if (!st.ok()) return Fail(st.status());
    Progress() << "optpipe: wrote the MILP below this schedule to " << a.model << ": "
               << ModelSize(*st) << ", objective C <= " << st->horizon << "\n";
  }
  Progress() << "optpipe: " << a.method << ": makespan " << sol->sim.makespan << ", device_span "
             << sol->sim.device_span << ", bound " << *t.info.bound << " (gap " << 100 * *t.info.gap
             << "%), bubble " << 100 * sol->sim.bubble_ratio << "%, peak memory "
             << Brief(sol->sim.peak_memory) << "\n";
  return Interrupted() ? kInterrupted : kOk;
}

}  // namespace

Command AddSchedule(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("schedule", "Compute a schedule for a problem and write it as JSON");
  sub->add_option("problem", args->problem, "optpipe-problem/1 JSON file")->required();
  sub->add_option("-m,--method", args->method, "Method name (see `optpipe methods`)")
      ->capture_default_str();
  sub->add_option("-o,--output", args->out,
                  "Write the optpipe-schedule/1 file here (default: stdout)");
  sub->add_option("--time-limit", args->solve.time_limit_s,
                  "Wall-clock budget in seconds for methods that search")
      ->capture_default_str()
      ->check(kPositive);
  AddSearchFlags(sub, args->solve);
  sub->add_option("--svg", args->svg,
                  "Also draw it as a Gantt chart SVG (see `optpipe draw --help`)");
  sub->add_option("--trace", args->trace,
                  "Also write it as a Chrome/Perfetto trace JSON (1 unit = 1 ms)");
  sub->add_option("--csv", args->csv,
                  "Also write it as a PyTorch CSV (_load_csv(path, format=\"compute_only\"))");
  sub->add_option("--write-model", args->model,
                  "Also write the OptPipe MILP of the problem, capped at this schedule's "
                  "objective, for any MILP solver: FILE.mps (free MPS) or else lp_solve LP "
                  "format; minimise C, its optimum is the problem's");
  sub->footer(
      "The schedule is timed by the simulator and checked before it is written; the summary\n"
      "(makespan, lower bound and gap, bubble ratio, peak memory) goes to stderr. Ctrl-C ends\n"
      "a search early: the best schedule so far is written (\"termination\": \"interrupted\"), "
      "exit\n"
      "130.\n"
      "--svg, --trace and --csv write views of the same schedule; `optpipe draw` makes them\n"
      "later from the JSON, `optpipe show` prints it as text. --write-model hands the exact\n"
      "problem to another solver (CBC, HiGHS, Gurobi): S_<op> are the start times (S_2B5:\n"
      "stage 2, B, micro-batch 5), Y_s<stage>_m<mb> the offload choices, C the objective.\n"
      "Example: optpipe schedule tests/cases/unit-4x8.json --method 1f1b -o s.json --svg s.svg");
  return {sub, [args] { return Run(*args); }};
}

}  // namespace optpipe::cli
