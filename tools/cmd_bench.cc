// optpipe bench: every (problem, method) pair solved, re-checked and timed,
// one row each. Metrics:
//   objective  the problem's objective (makespan or device_span) of the schedule
//   ratio      objective / the best objective any listed method reached on the problem
//   bound      the best lower bound known for the problem: core's ComputeLowerBound and
//              DeviceSearchBound, and every bound a method proved in this run (the MILP's)
//   gap        (objective - bound) / objective
//   invalid    the checker's violations of the written schedule (0 unless it is wrong)
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "core/checker.h"
#include "core/format.h"
#include "core/text_format.h"
#include "exact/device_search_bound.h"
#include "tools/bench_report.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

struct Args {
  std::vector<std::string> problems;
  std::string methods = "all";
  double time_limit_s = 10.0;
  std::string format = "md";
  std::string report_dir;  // writes report.md and report.svg there when set
  bool verbose = false;
  SolveOptions search;  // --threads, --seed, --evaluations
};

int Run(const Args& a) {
  if (a.format != "md" && a.format != "csv" && a.format != "json") {
    return Fail(InvalidArgument("--format: expected md, csv or json, got '" + a.format + "'"));
  }
  std::vector<std::string> methods;
  if (a.methods == "all") {
    for (const MethodLine& m : ListMethods(nullptr)) methods.push_back(m.name);
  } else {
    methods = SplitList(a.methods);
    for (const std::string& m : methods) {
      const std::vector<MethodLine> known = ListMethods(nullptr);
      if (std::none_of(known.begin(), known.end(),
                       [&](const MethodLine& l) { return l.name == m; })) {
        return Fail(
            InvalidArgument("--methods: unknown method '" + m + "'; `optpipe methods` lists them"));
      }
    }
  }
  // Every file is read before any method runs: a bad one fails at once.
  std::vector<Problem> problems;
  for (const std::string& path : a.problems) {
    StatusOr<Problem> p = LoadProblemFor(path);
    if (!p.ok()) return Fail(p.status());
    problems.push_back(std::move(*p));
  }
  std::vector<BenchRow> rows;
  int invalid = 0;
  const auto started = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < problems.size(); ++k) {
    const Problem& problem = problems[k];
    if (Interrupted()) break;  // the rows so far are printed
    const std::size_t first = rows.size();
    // One device search a problem, which every method's bound starts from:
    // the methods' budget, and at least the default clock.
    SolveOptions base = a.search;
    base.time_limit_s = a.time_limit_s;
    base.stop = InterruptFlag();
    DeviceSearchOptions so = CoreSearchOptions(problem, base);
    so.time_limit_s = std::max(so.time_limit_s, DeviceSearchOptions{}.time_limit_s);
    const DeviceSearchBound devices = ComputeDeviceSearchBound(problem, so);
    double bound = BestLowerBound(problem, devices);
    for (const std::string& m : methods) {
      if (Interrupted()) break;
      Progress()
          << "optpipe: bench [problem " << k + 1 << " of " << problems.size() << ", "
          << FormatFixed(
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                 1, true)
          << " s] " << problem.name << " (" << problem.devices << "x" << problem.microbatches
          << ") " << m << "\n";
      BenchRow row;
      row.problem = problem.name;
      row.method = m;
      SolveOptions opt = base;
      opt.devices = &devices;
      if (a.verbose) opt.log = ProgressLog();
      const auto t0 = std::chrono::steady_clock::now();
      opt.method = m;
      StatusOr<SolveResult> s = Solve(problem, opt);
      row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!s.ok() || !s->has_schedule()) {
        row.status = !s.ok()                                      ? "error: " + s.status().message()
                     : s->termination == Termination::kInfeasible ? "infeasible"
                                                                  : "not applicable";
        row.reason = s.ok() ? s->message : s.status().message();
        rows.push_back(std::move(row));
        continue;
      }
      const SimResult& sim = s->sim;
      const CheckReport rep = CheckSchedule(problem, ToTimed(problem, s->schedule, sim));
      row.status = "ok";
      row.termination = ToString(s->termination);
      row.invalid = static_cast<int>(rep.errors.size());
      invalid += row.invalid;
      row.objective = sim.objective;
      row.makespan = sim.makespan;
      row.device_span = sim.device_span;
      row.peak = sim.peak_memory.empty()
                     ? 0.0
                     : *std::max_element(sim.peak_memory.begin(), sim.peak_memory.end());
      if (rep.valid()) bound = std::max(bound, s->bound);
      rows.push_back(std::move(row));
    }
    double best = 0;
    bool any = false;
    for (std::size_t i = first; i < rows.size(); ++i) {
      if (!rows[i].has_numbers() || rows[i].invalid) continue;
      best = any ? std::min(best, rows[i].objective) : rows[i].objective;
      any = true;
    }
    for (std::size_t i = first; i < rows.size(); ++i) {
      BenchRow& r = rows[i];
      if (!r.has_numbers()) continue;
      r.ratio = any && best > 0 ? r.objective / best : 1.0;
      r.bound = bound;
      r.gap = r.objective > 0 ? std::max(0.0, (r.objective - bound) / r.objective) : 0.0;
    }
  }
  std::cout << BenchTable(rows, a.format);
  if (!a.report_dir.empty()) {
    const std::filesystem::path dir = a.report_dir;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      return Fail(InvalidArgument("--report: cannot create " + dir.string() + ": " + ec.message()));
    const std::string md = (dir / "report.md").string(), svg = (dir / "report.svg").string();
    if (Status st = WriteFile(md, BenchReportMarkdown(rows, "report.svg")); !st.ok())
      return Fail(st);
    if (Status st = WriteFile(svg, BenchReportSvg(rows)); !st.ok()) return Fail(st);
    Progress() << "optpipe: wrote " << md << " and " << svg << "\n";
  }
  return invalid ? kInvalid : Interrupted() ? kInterrupted : kOk;
}

}  // namespace

Command AddBench(CLI::App& app) {
  auto args = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("bench", "Run methods on problems; one checked, timed row per pair");
  sub->add_option("problems", args->problems, "optpipe-problem/1 JSON files")->required();
  sub->add_option("--methods", args->methods, "Comma-separated method names, or all")
      ->capture_default_str();
  sub->add_option("--time-limit", args->time_limit_s,
                  "Wall-clock budget in seconds per (problem, method)")
      ->capture_default_str()
      ->check(kNonNegative);
  AddSearchFlags(sub, args->search);
  sub->add_option("--format", args->format, "md, csv or json")->capture_default_str();
  sub->add_option("--report", args->report_dir,
                  "Also write DIR/report.md (objective / bound per problem and method, every run) "
                  "and DIR/report.svg (a bar chart of the same)");
  sub->add_flag("-v,--verbose", args->verbose, "Progress lines of searching methods on stderr");
  sub->footer(
      "Columns: objective (the problem's), makespan, device_span, peak_memory (largest device),\n"
      "ratio (to the best method on the problem), bound (core lower bound and any bound a method\n"
      "proved), gap = (objective - bound) / objective, time_s (wall), invalid (checker\n"
      "violations; 0 unless a schedule is wrong). A method that does not apply or does not fit\n"
      "memory shows why instead of numbers. Exit 1 if any schedule is invalid.\n"
      "Example: optpipe bench tests/cases/*.json --methods 1f1b,milp --time-limit 10\n"
      "         optpipe bench tests/cases/*.json --time-limit 1 --report bench-report");
  return {sub, [args] { return Run(*args); }};
}

}  // namespace optpipe::cli
