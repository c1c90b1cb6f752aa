#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "core/chrome_trace.h"
#include "core/format.h"
#include "core/gantt_svg.h"
#include "core/pytorch_csv.h"
#include "core/text_format.h"
#include "exact/milp.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {

struct Args {
  std::string problem, method = "auto", out;
  std::string svg, trace, csv;  // optional views of the result
  std::string model;            // optional: the MILP below the result, for other solvers
  SolveOptions solve;
  bool use_cache = false;  // --cache given
  std::string cache;       // its file; empty: the default (CacheFile)
};

// The schedule file and the views of it that were asked for.
int WriteOutputs(const Args& a, const Problem& p, const Schedule& s, const TimedSchedule& t) {
  const std::string text = ToJson(t);
  if (a.out.empty() || a.out == "-") {
    std::cout << text;
  } else if (Status st = WriteFile(a.out, text); !st.ok()) {
    return Fail(st);
  }
  for (const auto& [path, view] :
       {std::pair{a.svg, 0}, std::pair{a.trace, 1}, std::pair{a.csv, 2}}) {
    if (path.empty()) continue;
    StatusOr<std::string> content = view == 0   ? GanttSvg(p, t)
                                    : view == 1 ? ChromeTrace(p, t)
                                                : ToPytorchCsv(p, s);
    if (!content.ok())
      return Fail(Status(content.status().code(), "--csv: " + content.status().message()));
    if (Status st = WriteFile(path, *content); !st.ok()) return Fail(st);
  }
  if (!a.model.empty()) {
    StatusOr<MilpStats> st = WriteMilpModel(p, s, a.model);
    if (!st.ok()) return Fail(st.status());
    Progress() << "optpipe: wrote the MILP below this schedule to " << a.model << ": "
               << ModelSize(*st) << ", objective C <= " << st->horizon << "\n";
  }
  return kOk;
}

void Summary(const std::string& label, const SimResult& sim, const TimedSchedule& t) {
  Progress() << "optpipe: " << label << ": makespan " << sim.makespan << ", device_span "
             << sim.device_span << ", bound " << *t.info.bound << " (gap " << 100 * *t.info.gap
             << "%), bubble " << 100 * sim.bubble_ratio << "%, peak memory "
             << Brief(sim.peak_memory) << "\n";
}

// A hit: the row's schedule, re-timed on this problem and checked, written
// as a solve's would be. Its bound and termination hold only for the very
// problem it was solved for; otherwise the bound is core's.
int UseHit(const Args& a, const Problem& p, const CacheLookup& found, double lookup_s) {
  const CacheEntry& e = found.entry;
  Progress() << "optpipe: cache: hit (saved "
             << (e.solve_seconds ? "~" + FormatNumber(*e.solve_seconds, 2) + " s" : "a solve")
             << " of solving; stored by " << e.method << " on " << e.created << ")\n";
  TimedSchedule t = ToTimed(p, found.schedule, found.sim);
  if (found.same_problem) {
    t.info.bound = e.bound;
    if (!e.termination.empty()) t.info.termination = e.termination;
  }
  SettleBound(p, found.sim.objective, t.info);
  t.info.solve_seconds = lookup_s;
  if (int rc = WriteOutputs(a, p, found.schedule, t); rc != kOk) return rc;
  Summary("cache (" + e.method + ")", found.sim, t);
  return kOk;
}

// Near: a warm start for the methods that take one; miss: nothing.
void UseNearOrMiss(const Args& a, const CacheLookup& found, SolveOptions& solve) {
  std::ostringstream passed;
  if (found.passed_over > 0)
    passed << "; " << found.passed_over << " row(s) passed over: their orders do not fit";
  if (found.outcome == CacheOutcome::kMiss) {
    Progress() << "optpipe: cache: miss" << passed.str() << "\n";
    return;
  }
  const bool warm = a.method == "auto" || a.method == "milp";
  Progress() << "optpipe: cache: near (distance " << found.distance << "; row " << found.entry.id
             << " by " << found.entry.method << ", " << FormatNumber(found.sim.objective) << " here"
             << passed.str() << ")"
             << (warm ? ": warm start" : ", unused: " + a.method + " takes no warm start") << "\n";
  if (warm) solve.warm_start = &found.schedule;
}

// Stores a solve's schedule; a cache that went off was reported at the lookup.
void StoreResult(ScheduleCache& cache, const Problem& p, const TimedSchedule& t) {
  if (!cache.enabled()) return;
  StatusOr<CacheStored> put = cache.Store(p, t);
  if (WarnIfCacheOff(cache)) return;
  if (!put.ok()) {
    std::cerr << "optpipe: warning: cache: not stored: " << put.status().message() << "\n";
    return;
  }
  const char* what = put->outcome == StoreOutcome::kAdded      ? "stored as row "
                     : put->outcome == StoreOutcome::kReplaced ? "stored, replacing row "
                                                               : "kept the as good row ";
  Progress() << "optpipe: cache: " << what << put->id << " of " << cache.path() << "\n";
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int Run(const Args& a) {
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<Problem> p = LoadProblemFor(a.problem);
  if (!p.ok()) return Fail(p.status());
  Progress() << "optpipe: scheduling " << p->name << " (" << p->devices << " devices x "
             << p->microbatches << " micro-batches, " << p->stages() << " stages) with " << a.method
             << "\n";
  SolveOptions solve = a.solve;
  solve.log = ProgressLog();
  solve.stop = InterruptFlag();
  solve.method = a.method;
  std::optional<ScheduleCache> cache;
  CacheLookup found;
  if (a.use_cache) {
    cache = ScheduleCache::Open(CacheFile(a.cache));
    found = cache->Lookup(*p);
    if (WarnIfCacheOff(*cache)) cache.reset();  // said once; solved and not stored
    if (found.outcome == CacheOutcome::kHit) return UseHit(a, *p, found, SecondsSince(t0));
    if (cache) UseNearOrMiss(a, found, solve);
  }
  StatusOr<SolveResult> sol = Solve(*p, solve);
  if (!sol.ok()) return Fail(sol.status());
  if (!sol->has_schedule()) return FailNoSchedule(*sol);
  const TimedSchedule t = ToTimed(*p, *sol);  // with termination, bound, gap, solve time
  if (cache) StoreResult(*cache, *p, t);
  if (int rc = WriteOutputs(a, *p, sol->schedule, t); rc != kOk) return rc;
  Summary(a.method, sol->sim, t);
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
  CLI::Option* cache =
      sub->add_option(
             "--cache", args->cache,
             "Look the problem up in the schedule cache first, and store what is solved: "
             "FILE, or the default (see `optpipe cache --help`). A hit is returned without "
             "solving; a near hit warm-starts auto and milp")
          ->expected(0, 1)
          ->type_name("[FILE]");
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
      "--cache keeps solved schedules in an SQLite file shared by every run and process of\n"
      "the machine, filed by the problem's structure and its times and memory as proportions\n"
      "(4% buckets, docs/cache.md). Before solving it says on stderr: hit (the key's schedule,\n"
      "re-timed on this problem and checked, is written at once), near (the nearest key's\n"
      "schedule starts auto or milp) or miss; after solving it stores the schedule unless the\n"
      "key's is as good. A damaged cache file is reported once and ignored.\n"
      "Example: optpipe schedule tests/cases/unit-4x8.json --method 1f1b -o s.json --svg s.svg\n"
      "         optpipe schedule tests/cases/llama-8dev-offload.json --cache -o s.json");
  return {sub, [args, cache] {
            args->use_cache = cache->count() > 0;  // with or without a FILE
            return Run(*args);
          }};
}

}  // namespace optpipe::cli
