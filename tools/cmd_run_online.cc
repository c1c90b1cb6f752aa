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
  StatusOr<std::unique_ptr<runtime::Backend>> backend = MakeBackend(a);
  if (!backend.ok()) return Fail(backend.status());

  // The kernels' true times: the problem's, and one stage slower after the drift.
  Problem drifted = *p;
  if (*drift) {
    const int s = (*drift)->stage;
    for (std::vector<double>* v : {&drifted.f, &drifted.b, &drifted.w}) (*v)[s] *= (*drift)->factor;
  }
  runtime::ExecutorOptions eo;
  eo.time_scale = a.time_scale > 0 ? a.time_scale : runtime::TimeScaleFor(*p, 0.01);
  eo.bytes_per_unit = a.bytes_per_unit;
  eo.watchdog_s = a.watchdog_s;
  eo.iterations = 1;
  eo.stop = InterruptFlag();
  runtime::SyntheticKernel steady(*p, eo.time_scale), slowed(drifted, eo.time_scale);

  OnlineOptions oo;
  oo.refine_seconds = a.refine_seconds;
  oo.methods = SplitList(a.methods);
  oo.log = ProgressLog();
  if (a.use_cache) oo.cache_path = CacheFile(a.cache);
  StatusOr<std::unique_ptr<OnlineScheduler>> online = OnlineScheduler::Start(*p, oo);
  if (!online.ok()) return Fail(online.status());
  Progress() << "optpipe: running " << p->name << " online on the " << a.backend
             << " backend: " << a.iterations
             << " iteration(s), 1 time unit = " << eo.time_scale * 1e3 << " ms, refining with "
             << a.methods << " for " << a.refine_seconds << " s\n";

  nlohmann::json records = nlohmann::json::array(), swaps = nlohmann::json::array();
  swaps.push_back(VersionJson(*(*online)->Current()));
  for (int it = 1; it <= a.iterations && !Interrupted(); ++it) {
    const bool swapped = it > 1 && (*online)->Advance();
    const std::shared_ptr<const ScheduleVersion> cur = (*online)->Current();
    if (swapped) swaps.push_back(VersionJson(*cur));
    const bool slow = *drift && it >= (*drift)->from;
    // The kernels take the true times; the executor orders memory as the
    // schedule's model predicts (a schedule of another model may not fit).
    const Problem& model = *cur->model;
    runtime::Executor ex(model, **backend, slow ? slowed : steady, eo);
    StatusOr<runtime::RunResult> r = ex.Run(cur->schedule);
    if (!r.ok()) return Interrupted() ? kInterrupted : Fail(r.status());
    const double measured = r->iterations[0].makespan;
    (*online)->Report(runtime::ProfileFromRun(model, *r));
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
  (*online)->Stop();
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
