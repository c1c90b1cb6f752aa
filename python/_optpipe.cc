// optpipe._optpipe: the C++ side of the Python module. It passes problems
// and schedules as optpipe's JSON texts (docs/FORMAT.md) and results as
// dicts; optpipe/__init__.py turns them into typed Python objects.
// Solves run on a worker thread with the GIL released, while the calling
// thread polls for signals: Ctrl-C stops the search and raises KeyboardInterrupt.
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/checker.h"
#include "core/format.h"
#include "core/pytorch_csv.h"
#include "core/simulator.h"
#include "core/version.h"
#include "exact/solve.h"
#include "online/online_scheduler.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace optpipe {
namespace {

// optpipe.NotApplicableError (a ValueError): the thing asked for does not
// apply to this problem or schedule; the message says why and what would.
struct NotApplicableError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A Status error as the Python exception a caller expects.
[[noreturn]] void Raise(const Status& st) {
  switch (st.code()) {
    case StatusCode::kNotApplicable:
    case StatusCode::kInfeasible:
      throw NotApplicableError(st.message());
    case StatusCode::kInvalidArgument:
      throw nb::value_error(st.message().c_str());
    case StatusCode::kNotFound:
      PyErr_SetString(PyExc_FileNotFoundError, st.message().c_str());
      throw nb::python_error();
    case StatusCode::kCancelled:
      throw std::runtime_error("cancelled: " + st.message());
    default:
      throw std::runtime_error(st.message());
  }
}
template <typename T>
T Take(StatusOr<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(*r);
}

// Runs `work` on a worker thread without the GIL; every 50 ms the calling
// thread takes the GIL to check for signals. A signal's exception (Ctrl-C:
// KeyboardInterrupt) sets `stop`, waits for the work to end and is raised.
void RunInterruptible(const std::function<void()>& work, std::atomic<bool>& stop) {
  std::optional<nb::python_error> signal;
  {
    nb::gil_scoped_release release;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr failure;
    std::thread worker([&] {
      try {
        work();
      } catch (...) {
        failure = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) {
      if (signal) continue;
      lock.unlock();
      {
        nb::gil_scoped_acquire gil;
        if (PyErr_CheckSignals() != 0) {
          signal.emplace();  // fetches and clears the error: the work may call Python still
          stop = true;
        }
      }
      lock.lock();
    }
    lock.unlock();
    worker.join();
    if (failure && !signal) std::rethrow_exception(failure);
  }
  if (signal) throw std::move(*signal);
}

// A dict from (name, value) pairs: nanobind's dict takes no keywords.
nb::dict Dict(std::initializer_list<std::pair<const char*, nb::object>> items) {
  nb::dict d;
  for (const auto& [key, value] : items) d[key] = value;
  return d;
}
template <typename T>
nb::object Or(const std::optional<T>& x) {
  return x ? nb::cast(*x) : nb::none();
}

std::optional<Schedule> ScheduleOf(const Problem& p, const std::optional<std::string>& json) {
  if (!json) return std::nullopt;
  const TimedSchedule t = Take(ParseTimedSchedule(*json));
  return Take(OrdersOf(p, t));
}

nb::dict SolvePy(const Problem& p, const std::string& method, double time_limit,
                 std::optional<std::int64_t> evaluations, int threads, std::uint64_t seed,
                 std::optional<std::string> warm_start, nb::object on_improvement) {
  std::atomic<bool> stop{false};
  SolveOptions opt;
  opt.method = method;
  opt.time_limit_s = time_limit;
  opt.evaluations = evaluations;
  opt.threads = threads;
  opt.seed = seed;
  opt.stop = &stop;
  const std::optional<Schedule> warm = ScheduleOf(p, warm_start);
  if (warm) opt.warm_start = &*warm;
  std::optional<nb::python_error> callback_error;
  if (!on_improvement.is_none()) {
    // The callback's exception ends the search and is raised by solve().
    opt.on_improvement = [&](const Schedule& s, const SimResult& sim) {
      const std::string json = ToJson(ToTimed(p, s, sim));
      nb::gil_scoped_acquire gil;
      if (callback_error) return;
      try {
        on_improvement(sim.objective, json);
      } catch (nb::python_error& e) {
        callback_error.emplace(std::move(e));
        stop = true;
      }
    };
  }
  std::optional<StatusOr<SolveResult>> solved;
  RunInterruptible([&] { solved.emplace(Solve(p, opt)); }, stop);
  if (callback_error) throw std::move(*callback_error);
  SolveResult r = Take(std::move(*solved));
  nb::dict d;
  d["termination"] = ToString(r.termination);
  d["message"] = r.message;
  d["schedule"] = r.has_schedule() ? nb::cast(ToJson(ToTimed(p, r))) : nb::none();
  d["objective"] = r.objective;
  d["bound"] = r.bound;
  d["gap"] = r.gap;
  d["wall_s"] = r.stats.wall_s;
  d["found_by"] = r.stats.found_by;
  d["evaluations"] = r.stats.evaluations;
  d["nodes"] = r.stats.nodes;
  return d;
}

nb::dict ValidatePy(const Problem& p, const std::string& schedule) {
  const CheckReport rep = CheckSchedule(p, Take(ParseTimedSchedule(schedule)));
  nb::list violations;
  for (const Violation& v : rep.violations) {
    violations.append(Dict({{"kind", nb::cast(v.kind)},
                            {"op", v.op ? nb::cast(ToString(*v.op)) : nb::none()},
                            {"device", v.device >= 0 ? nb::cast(v.device) : nb::none()},
                            {"time", Or(v.time)},
                            {"detail", nb::cast(v.detail)}}));
  }
  return Dict({{"valid", nb::cast(rep.valid())},
               {"makespan", nb::cast(rep.makespan)},
               {"device_span", nb::cast(rep.device_span)},
               {"objective", nb::cast(rep.objective)},
               {"peak_memory", nb::cast(rep.peak_memory)},
               {"violations", violations}});
}

nb::dict BoundPy(const Problem& p, double search_seconds, std::optional<std::string> schedule) {
  std::atomic<bool> stop{false};
  BoundOptions opt;
  opt.search_seconds = search_seconds;
  opt.stop = &stop;
  const std::optional<Schedule> given = ScheduleOf(p, schedule);
  if (given) opt.schedule = &*given;
  std::optional<StatusOr<BoundResult>> proved;
  RunInterruptible([&] { proved.emplace(ProveBound(p, opt)); }, stop);
  const BoundResult r = Take(std::move(*proved));
  return Dict({{"bound", nb::cast(r.bound)},
               {"device_bound", nb::cast(r.core.device_bound)},
               {"critical_path", nb::cast(r.core.critical_path)},
               {"memory_bound", nb::cast(r.core.memory_bound)},
               {"device_search_bound", nb::cast(r.device_search.value)},
               {"order_search_bound", r.order ? nb::cast(r.order->bound) : nb::none()},
               {"sat_search_bound", r.sat ? nb::cast(r.sat->bound) : nb::none()},
               {"schedule_objective", Or(r.schedule_objective)},
               {"schedule_gap", Or(r.schedule_gap)}});
}

// The schedule as torch.distributed.pipelining's compute actions, one list a
// rank (core/pytorch_csv.h); kNotApplicable for a schedule that offloads.
nb::list PytorchActionsPy(const Problem& p, const std::string& schedule) {
  const Schedule s = Take(OrdersOf(p, Take(ParseTimedSchedule(schedule))));
  const std::string csv = Take(ToPytorchCsv(p, s));
  nb::list ranks;
  std::size_t line = 0;
  while (line < csv.size()) {
    const std::size_t end = csv.find('\n', line);
    nb::list row;
    const std::string text = csv.substr(line, end - line);
    for (std::size_t cell = 0; cell <= text.size();) {
      const std::size_t comma = std::min(text.find(',', cell), text.size());
      if (comma > cell) row.append(text.substr(cell, comma - cell));
      cell = comma + 1;
    }
    ranks.append(row);
    line = end == std::string::npos ? csv.size() : end + 1;
  }
  return ranks;
}

// The schedule run in its orders alone, every op as soon as it can start
// (as PyTorch runs an action list): its objective, and how many ops the
// schedule holds back beyond that start.
nb::dict OrderOnlyPy(const Problem& p, const std::string& schedule) {
  const TimedSchedule t = Take(ParseTimedSchedule(schedule));
  Schedule s = Take(OrdersOf(p, t));
  s.release.clear();
  const SimResult asap = Take(Simulate(p, s));
  const OpSpace sp = p.op_space();
  int held = 0;
  for (const TimedOp& o : t.ops) {
    if (o.start > asap.start[sp.Index(o.op)] + kTimeTolerance) ++held;
  }
  return Dict({{"objective", nb::cast(asap.objective)}, {"held", nb::cast(held)}});
}

// The online scheduler for Python: its log lines wait in a queue that
// Python drains (the background thread never takes the GIL, so stopping it
// from Python cannot deadlock).
struct OnlinePy {
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
  std::unique_ptr<OnlineScheduler> s;
};

std::unique_ptr<OnlinePy> OnlineStartPy(const Problem& p, double refine_seconds,
                                        std::vector<std::string> methods, int threads,
                                        std::optional<std::string> cache, double drift_threshold,
                                        int drift_window) {
  auto out = std::make_unique<OnlinePy>();
  OnlineOptions o;
  o.refine_seconds = refine_seconds;
  o.methods = std::move(methods);
  o.threads = threads;
  o.cache_path = cache.value_or("");
  o.drift_threshold = drift_threshold;
  o.drift_window = drift_window;
  o.log = [mu = out->mu, lines = out->lines](const std::string& line) {
    std::lock_guard<std::mutex> lock(*mu);
    lines->push_back(line);
  };
  std::optional<StatusOr<std::unique_ptr<OnlineScheduler>>> s;
  {
    nb::gil_scoped_release release;
    s.emplace(OnlineScheduler::Start(p, o));
  }
  out->s = Take(std::move(*s));
  return out;
}

nb::dict VersionPy(const ScheduleVersion& v) {
  return Dict({{"version", nb::cast(v.version)},
               {"method", nb::cast(v.method)},
               {"model", nb::cast(v.problem_version)},
               {"objective", nb::cast(v.objective)},
               {"found_s", nb::cast(v.found_s)},
               {"schedule", nb::cast(ToJson(ToTimed(*v.model, v.schedule, v.sim)))}});
}

nb::list MethodsPy(const Problem* p) {
  nb::list out;
  for (const MethodLine& m : ListMethods(p)) {
    out.append(nb::make_tuple(m.name, m.summary, m.applies.ok(), m.applies.message()));
  }
  return out;
}

}  // namespace
}  // namespace optpipe

NB_MODULE(_optpipe, m) {
  using namespace optpipe;
  m.doc() = "optpipe's C++ core; use the optpipe package, which wraps it.";
  m.attr("__version__") = Version();
  nb::exception<NotApplicableError>(m, "NotApplicableError", PyExc_ValueError);

  nb::class_<Problem>(m, "Problem")
      .def_static(
          "from_json", [](const std::string& text) { return Take(ParseProblem(text)); }, "text"_a,
          "A problem from its optpipe-problem/1 JSON text (ValueError names a bad field).")
      .def_static(
          "from_file", [](const std::string& path) { return Take(LoadProblem(path)); }, "path"_a,
          "A problem from an optpipe-problem/1 JSON file.")
      .def(
          "to_json", [](const Problem& p) { return ToJson(p); }, "Its optpipe-problem/1 JSON.")
      .def_ro("name", &Problem::name)
      .def_ro("devices", &Problem::devices)
      .def_ro("microbatches", &Problem::microbatches)
      .def_ro("stages_per_device", &Problem::stages_per_device)
      .def_prop_ro("stages", &Problem::stages)
      .def_ro("split_backward", &Problem::split_backward)
      .def_ro("stage_device", &Problem::stage_device)
      .def_prop_ro("offload_allowed", &Problem::offload_allowed)
      .def_prop_ro("memory_limited", &Problem::memory_limited);

  m.def("solve", &SolvePy, "problem"_a, "method"_a, "time_limit"_a, "evaluations"_a.none(),
        "threads"_a, "seed"_a, "warm_start"_a.none(), "on_improvement"_a.none());
  m.def("validate", &ValidatePy, "problem"_a, "schedule"_a);
  m.def("bound", &BoundPy, "problem"_a, "search_seconds"_a, "schedule"_a.none());
  nb::class_<OnlinePy>(m, "OnlineScheduler")
      .def("current", [](OnlinePy& o) { return VersionPy(*o.s->Current()); })
      .def("advance", [](OnlinePy& o) { return o.s->Advance(); })
      .def(
          "report", [](OnlinePy& o, const Problem& measured) { o.s->Report(measured); },
          "measured"_a)
      .def("model", [](OnlinePy& o) { return o.s->model(); })
      .def("refining", [](OnlinePy& o) { return o.s->refining(); })
      .def(
          "wait_idle", [](OnlinePy& o, double seconds) { return o.s->WaitIdle(seconds); },
          "seconds"_a, nb::call_guard<nb::gil_scoped_release>())
      .def(
          "stop", [](OnlinePy& o) { o.s->Stop(); }, nb::call_guard<nb::gil_scoped_release>())
      .def("drain_log", [](OnlinePy& o) {
        std::lock_guard<std::mutex> lock(*o.mu);
        std::vector<std::string> out;
        out.swap(*o.lines);
        return out;
      });
  m.def("online_start", &OnlineStartPy, "problem"_a, "refine_seconds"_a, "methods"_a, "threads"_a,
        "cache"_a.none(), "drift_threshold"_a, "drift_window"_a);
  m.def("pytorch_actions", &PytorchActionsPy, "problem"_a, "schedule"_a);
  m.def("order_only", &OrderOnlyPy, "problem"_a, "schedule"_a);
  m.def("methods", &MethodsPy, "problem"_a.none());
}
