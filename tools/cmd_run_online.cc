// optpipe run --online: the OptPipe loop on the stage runtime. Every
// iteration runs the schedule in use (OnlineScheduler::Current), measures it
// and reports the measured op times; between iterations the scheduler adopts
// the best schedule its background refinement has found. --drift slows one
// stage's kernels from an iteration on, to show a re-solve.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>

#include "core/format.h"
#include "core/simulator.h"
#include "core/version.h"
#include "online/online_scheduler.h"
#include "runtime/cpu_backend.h"
#include "runtime/executor.h"
#include "runtime/measure.h"
#include "runtime/synthetic_kernel.h"
#include "tools/cli.h"
#include "tools/cmd_run.h"

namespace optpipe::cli {
namespace {

struct DriftSpec {
  int stage = 0;
  double factor = 1;
  int from = 1;  // 1-based iteration
};

StatusOr<std::optional<DriftSpec>> ParseDrift(const std::string& text, const Problem& p) {
  if (text.empty()) return std::optional<DriftSpec>();
  static const std::regex form(R"(^(\d+):([0-9.eE+-]+)@(\d+)$)");
  std::smatch m;
  DriftSpec d;
  try {
    if (!std::regex_match(text, m, form)) throw std::invalid_argument("form");
    d.stage = std::stoi(m[1]);
    d.factor = std::stod(m[2]);
    d.from = std::stoi(m[3]);
  } catch (const std::exception&) {
    return InvalidArgument("--drift: '" + text + "' is not STAGE:FACTOR@ITERATION (e.g. 3:1.5@8)");
  }
  if (d.stage >= p.stages() || !(d.factor > 0) || d.from < 1) {
    return InvalidArgument("--drift: stage must be below " + std::to_string(p.stages()) +
                           ", factor > 0 and iteration >= 1 in '" + text + "'");
  }
  return std::optional<DriftSpec>(d);
}

nlohmann::json VersionJson(const ScheduleVersion& v) {
  return {{"version", v.version},
          {"method", v.method},
          {"model", v.problem_version},
          {"objective", v.objective},
          {"found_s", v.found_s}};
}

}  // namespace

int RunOnline(const RunArgs& a) {
  StatusOr<Problem> p = LoadProblemFor(a.problem);
  if (!p.ok()) return Fail(p.status());
  if (!a.schedule.empty()) {
    return Fail(InvalidArgument("schedule: --online chooses its own schedules; give none"));
  }
  StatusOr<std::optional<DriftSpec>> drift = ParseDrift(a.drift, *p);
  if (!drift.ok()) return Fail(drift.status());
  StatusOr<std::unique_ptr<runtime::Peers>> joined = JoinRanks(a, *p);
  if (!joined.ok()) return Fail(joined.status());
  std::unique_ptr<runtime::Peers> peers = std::move(*joined);
  const bool leader = !peers || peers->rank() == 0;  // decides, prints and writes
  StatusOr<std::unique_ptr<runtime::Backend>> backend = MakeBackend(a);
  if (!backend.ok()) return Fail(backend.status());

  // The kernels' true times: the problem's, and one stage slower after the drift.
  Problem drifted = *p;
  if (*drift) {
    const int s = (*drift)->stage;
    for (std::vector<double>* v : {&drifted.f, &drifted.b, &drifted.w}) (*v)[s] *= (*drift)->factor;
  }
  runtime::ExecutorOptions eo = ExecutorOptionsFor(a, *p, peers.get());
  eo.iterations = 1;  // one at a time, the scheduler between them
  runtime::SyntheticKernel steady(*p, eo.time_scale), slowed(drifted, eo.time_scale);

  OnlineOptions oo;
  oo.refine_seconds = a.refine_seconds;
  oo.methods = SplitList(a.methods);
  oo.drift_threshold = a.drift_threshold;
  oo.log = ProgressLog();
  if (a.use_cache) oo.cache_path = CacheFile(a.cache);
  std::unique_ptr<OnlineScheduler> online;  // rank 0's
  if (leader) {
    StatusOr<std::unique_ptr<OnlineScheduler>> started = OnlineScheduler::Start(*p, oo);
    if (!started.ok()) return Fail(started.status());
    online = std::move(*started);
  }
  Progress() << "optpipe: running " << p->name << " online on the " << a.backend
             << " backend: " << a.iterations
             << " iteration(s), 1 time unit = " << eo.time_scale * 1e3 << " ms, refining with "
             << a.methods << " for " << a.refine_seconds << " s\n";

  nlohmann::json records = nlohmann::json::array(), swaps = nlohmann::json::array();
  if (leader) swaps.push_back(VersionJson(*online->Current()));
  for (int it = 1; it <= a.iterations; ++it) {
    // Rank 0 decides at the boundary: the schedule in use and its model, or
    // (empty) stop; every rank runs what it says.
    bool swapped = false;
    std::shared_ptr<const ScheduleVersion> cur;
    std::string plan;
    if (leader && !Interrupted()) {
      swapped = it > 1 && online->Advance();
      cur = online->Current();
      if (swapped) swaps.push_back(VersionJson(*cur));
      plan = ToJson(*cur->model) + '\0' + ToJson(ToTimed(*cur->model, cur->schedule, cur->sim));
    }
    if (peers) {
      if (Status st = peers->Broadcast(plan); !st.ok()) return Fail(st);
    }
    if (plan.empty()) break;
    const std::size_t cut = plan.find('\0');
    StatusOr<Problem> model = ParseProblem(plan.substr(0, cut));
    StatusOr<TimedSchedule> timed = ParseTimedSchedule(plan.substr(cut + 1));
    StatusOr<Schedule> schedule = timed.ok() ? OrdersOf(*model, *timed) : timed.status();
    if (!model.ok() || !schedule.ok()) {
      return Fail(Internal("rank 0's plan: " +
                           (model.ok() ? schedule.status() : model.status()).message()));
    }
    const bool slow = *drift && it >= (*drift)->from;
    // The kernels take the true times; the executor orders memory as the
    // schedule's model predicts (a schedule of another model may not fit).
    runtime::Executor ex(*model, **backend, slow ? slowed : steady, eo);
    StatusOr<runtime::RunResult> r = ex.Run(*schedule);
    if (!r.ok()) return Interrupted() ? kInterrupted : Fail(r.status());
    if (!leader) continue;
    const double measured = r->iterations[0].makespan;
    online->Report(runtime::ProfileFromRun(*model, *r));
    records.push_back({{"iteration", it},
                       {"schedule", {{"version", cur->version}, {"method", cur->method}}},
                       {"model", cur->problem_version},
                       {"objective", cur->objective},
                       {"measured", measured},
                       {"swapped", swapped}});
    if (!a.json) {
      const int width = static_cast<int>(std::to_string(a.iterations).size());
      std::printf("iteration %*d: v%d %-24s objective %-10.6g measured %.6g%s\n", width, it,
                  cur->version, ("(" + cur->method + ")").c_str(), cur->objective, measured,
                  swapped ? "  <- adopted" : "");
    }
  }
  if (peers) peers->Finalize();
  if (!leader) return kOk;
  online->Stop();
  if (a.json) {
    std::cout << nlohmann::json{{"format", "optpipe-online-run/1"},
                                {"generator", Generator()},
                                {"problem", p->name},
                                {"iterations", records},
                                {"swaps", swaps}}
                     .dump(1)
              << "\n";
  } else {
    // One line per model: the first and last iteration run on it.
    for (std::size_t i = 0; i < records.size();) {
      std::size_t j = i;
      while (j + 1 < records.size() && records[j + 1]["model"] == records[i]["model"]) ++j;
      std::printf("model %d: objective %.6g -> %.6g, measured %.6g -> %.6g (iterations %d-%d)\n",
                  records[i]["model"].get<int>(), records[i]["objective"].get<double>(),
                  records[j]["objective"].get<double>(), records[i]["measured"].get<double>(),
                  records[j]["measured"].get<double>(), records[i]["iteration"].get<int>(),
                  records[j]["iteration"].get<int>());
      i = j + 1;
    }
  }
  return Interrupted() ? kInterrupted : kOk;
}

}  // namespace optpipe::cli
