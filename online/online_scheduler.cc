#include "online/online_scheduler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "core/checker.h"
#include "core/text_format.h"
#include "exact/solve.h"
#include "heuristics/auto_method.h"
#include "heuristics/method.h"
#include "online/cache.h"
#include "online/cache_key.h"

namespace optpipe {
namespace {

using Clock = std::chrono::steady_clock;

// The simulator's result is checked by the independent checker before a
// schedule may be handed out.
bool Checked(const Problem& p, const Schedule& s, const SimResult& sim) {
  return CheckSchedule(p, ToTimed(p, s, sim)).valid();
}

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// The largest relative difference between a model's and the measured
// per-stage times, and where: "stage 3 F x1.5".
struct Worst {
  double by = 0;
  std::string where;
};
void Compare(const char* kind, const std::vector<double>& model,
             const std::vector<double>& measured, Worst& worst) {
  for (std::size_t s = 0; s < model.size() && s < measured.size(); ++s) {
    const double by = std::abs(measured[s] - model[s]) / std::max(model[s], 1e-12);
    if (by > worst.by) {
      worst.by = by;
      worst.where = "stage " + std::to_string(s) + " " + kind + " x" +
                    FormatNumber(measured[s] / std::max(model[s], 1e-12), 3);
    }
  }
}

}  // namespace

StatusOr<ScheduleVersion> InitialSchedule(const Problem& p) {
  // The published schedules, each one construction and a few simulations;
  // auto's list scheduler and searches are left to the refinement. Where none
  // fits, auto's seeds (the list scheduler fits more problems).
  SearchOptions opt;
  opt.max_evaluations = 0;
  opt.threads = 1;
  std::optional<Solution> best;
  std::string winner;
  for (const MethodInfo& m : Methods()) {
    if (m.name == "auto" || m.name == "list" || m.name == "po-keep") continue;
    if (!m.applicable(p).ok()) continue;
    StatusOr<Solution> r = RunMethod(p, m.name, opt);
    if (r.ok() && (!best || r->sim.objective < best->sim.objective)) {
      best = std::move(*r);
      winner = m.name;
    }
  }
  if (!best) {
    StatusOr<AutoResult> r = RunAuto(p, opt);
    if (!r.ok()) return r.status();
    best = std::move(r->solution);
    winner = r->winner;
  }
  ScheduleVersion v;
  v.schedule = std::move(best->schedule);
  v.sim = std::move(best->sim);
  v.objective = v.sim.objective;
  v.method = "initial: " + winner;
  return v;
}

struct OnlineScheduler::State {
  OnlineOptions opt;
  Clock::time_point t0 = Clock::now();
  std::optional<ScheduleCache> cache;

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::shared_ptr<const Problem> model;  // the problem schedules are timed on now
  int problem_version = 0;
  std::shared_ptr<const ScheduleVersion> current;
  std::shared_ptr<ScheduleVersion> pending;  // the best found since, on `model`
  bool force = false;                        // adopt `pending` whatever its objective
  int next_version = 1;
  std::deque<Problem> reports;
  bool work = true;  // a refinement is due
  bool busy = false;
  bool stopping = false;
  std::atomic<bool> interrupt{false};  // the running solve's stop token
  std::thread thread;

  double Since() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
  void Log(const std::string& line) const {
    if (opt.log) opt.log("online: t=" + FormatNumber(Since(), 3) + "s " + line);
  }

  // A schedule found for problem version `pv`: kept when it is valid, still
  // for the current model and better than what would be adopted now.
  void Offer(const Problem& q, int pv, const Schedule& s, const SimResult& sim,
             const std::string& method) {
    if (!Checked(q, s, sim)) {
      Log(method + ": a schedule failed the checker and is dropped");
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (pv != problem_version) return;  // found for a model since replaced
    const double best = pending ? pending->objective : current->objective;
    if (!(sim.objective < best - kTimeTolerance * std::max(1.0, best))) return;
    auto v = std::make_shared<ScheduleVersion>();
    v->method = method;
    v->problem_version = pv;
    v->model = model;
    v->schedule = s;
    v->sim = sim;
    v->objective = sim.objective;
    v->found_s = Since();
    pending = std::move(v);
    Log(method + " found " + FormatNumber(sim.objective) + " (waits for the next boundary)");
  }

  // One refinement of `q` from `from`: every method in turn within the budget.
  void Refine(const Problem& q, int pv, Schedule from, double from_objective) {
    const Clock::time_point start = Clock::now();
    Schedule best = from;
    double best_objective = from_objective;
    for (std::size_t i = 0; i < opt.methods.size(); ++i) {
      const std::string& method = opt.methods[i];
      const double left =
          opt.refine_seconds - std::chrono::duration<double>(Clock::now() - start).count();
      if (left <= 0 || interrupt) break;
      SolveOptions so;
      so.method = method;
      so.time_limit_s = left / double(opt.methods.size() - i);  // the rest, shared
      so.threads = opt.threads;
      so.stop = &interrupt;
      so.warm_start = &best;
      so.on_improvement = [&](const Schedule& s, const SimResult& sim) {
        Offer(q, pv, s, sim, method);
      };
      StatusOr<SolveResult> r = Solve(q, so);
      if (!r.ok() || !r->has_schedule()) {
        Log(method + ": " + (r.ok() ? r->message : r.status().message()));
        continue;
      }
      Offer(q, pv, r->schedule, r->sim, method);
      if (r->objective < best_objective) {
        best = r->schedule;
        best_objective = r->objective;
      }
      Log(method + " ended: " + FormatNumber(r->objective) + ", bound " + FormatNumber(r->bound) +
          " (" + ToString(r->termination) + ")");
      if (r->termination == Termination::kOptimal) break;
    }
    if (cache && !interrupt) {
      StatusOr<SimResult> sim = Simulate(q, best);
      if (sim.ok()) {
        TimedSchedule t = ToTimed(q, best, *sim);
        if (StatusOr<CacheStored> st = cache->Store(q, t); !st.ok()) {
          Log("cache: not stored: " + st.status().message());
        }
      }
      if (std::optional<std::string> w = cache->TakeWarning()) Log("cache: " + *w);
    }
  }

  void Loop() {
    for (;;) {
      Problem q;
      int pv = 0;
      Schedule from;
      double from_objective = 0;
      {
        std::unique_lock<std::mutex> lock(mu);
        busy = false;
        cv.notify_all();
        cv.wait(lock, [&] { return work || stopping; });
        if (stopping) return;
        work = false;
        busy = true;
        interrupt = false;
        q = *model;
        pv = problem_version;
        const ScheduleVersion& base = pending ? *pending : *current;
        from = base.schedule;
        from_objective = base.objective;
      }
      Log("refining " + q.name + " from " + FormatNumber(from_objective));
      Refine(q, pv, std::move(from), from_objective);
    }
  }

  // The model rebuilt from the reports' medians, if it drifted (under `mu`).
  std::optional<Problem> Drifted() const {
    if (static_cast<int>(reports.size()) < opt.drift_window) return std::nullopt;
    Problem q = *model;
    const int S = q.stages();
    const auto medians = [&](auto field) {
      std::vector<double> out(S);
      for (int s = 0; s < S; ++s) {
        std::vector<double> xs;
        for (const Problem& r : reports) xs.push_back((r.*field)[s]);
        out[s] = Median(std::move(xs));
      }
      return out;
    };
    q.f = medians(&Problem::f);
    q.b = medians(&Problem::b);
    q.w = medians(&Problem::w);
    Worst worst;
    Compare("F", model->f, q.f, worst);
    Compare("B", model->b, q.b, worst);
    if (q.split_backward) Compare("W", model->w, q.w, worst);
    if (q.offload && std::all_of(reports.begin(), reports.end(),
                                 [](const Problem& r) { return r.offload.has_value(); })) {
      std::vector<double> off(S);
      for (int s = 0; s < S; ++s) {
        std::vector<double> xs;
        for (const Problem& r : reports) xs.push_back((*r.offload)[s]);
        off[s] = Median(std::move(xs));
      }
      Compare("offload", *model->offload, off, worst);
      q.offload = off;
    }
    if (worst.by <= opt.drift_threshold) return std::nullopt;
    Log("drift: " + worst.where + " (medians of " + std::to_string(reports.size()) +
        " iterations)");
    return q;
  }

  // The schedule in use on the drifted model `q`: its orders re-timed, or
  // the fast heuristics' schedule where those no longer fit.
  std::shared_ptr<ScheduleVersion> OnNewModel(std::shared_ptr<const Problem> q, int pv) const {
    auto v = std::make_shared<ScheduleVersion>();
    const Problem& old = *current->model;
    StatusOr<Retimed> r =
        Retime(*q, ToTimed(old, current->schedule, current->sim), LargestStageTime(old));
    if (r.ok()) {
      v->method = current->method + " (re-timed)";
      v->schedule = std::move(r->schedule);
      v->sim = std::move(r->sim);
    } else {
      StatusOr<ScheduleVersion> init = InitialSchedule(*q);
      if (!init.ok()) return nullptr;
      *v = std::move(*init);
    }
    v->objective = v->sim.objective;
    v->problem_version = pv;
    v->model = std::move(q);
    v->found_s = Since();
    return v;
  }
};

OnlineScheduler::OnlineScheduler(std::unique_ptr<State> state) : s_(std::move(state)) {}

StatusOr<std::unique_ptr<OnlineScheduler>> OnlineScheduler::Start(const Problem& estimate,
                                                                  OnlineOptions opt) {
  if (Status st = Validate(estimate); !st.ok()) return st;
  if (opt.methods.empty()) opt.methods = {"auto"};
  auto state = std::make_unique<State>();
  state->opt = std::move(opt);
  state->model = std::make_shared<const Problem>(estimate);
  std::optional<ScheduleVersion> first;
  if (!state->opt.cache_path.empty()) {
    state->cache.emplace(ScheduleCache::Open(state->opt.cache_path));
    CacheLookup found = state->cache->Lookup(estimate);
    if (std::optional<std::string> w = state->cache->TakeWarning()) state->Log("cache: " + *w);
    state->Log(std::string("cache: ") + ToString(found.outcome));
    if (found.outcome != CacheOutcome::kMiss) {
      first.emplace();
      first->method = "cache: " + found.entry.method;
      first->schedule = std::move(found.schedule);
      first->sim = std::move(found.sim);
      first->objective = first->sim.objective;
    }
  }
  StatusOr<ScheduleVersion> init = InitialSchedule(estimate);
  if (!init.ok() && !first) return init.status();
  if (!first || (init.ok() && init->objective < first->objective)) first = std::move(*init);
  first->found_s = state->Since();
  first->model = state->model;
  state->Log("start on " + first->method + ": " + FormatNumber(first->objective));
  state->current = std::make_shared<const ScheduleVersion>(std::move(*first));
  State* raw = state.get();
  state->thread = std::thread([raw] { raw->Loop(); });
  return std::unique_ptr<OnlineScheduler>(new OnlineScheduler(std::move(state)));
}

OnlineScheduler::~OnlineScheduler() { Stop(); }

void OnlineScheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stopping = true;
    s_->interrupt = true;
  }
  s_->cv.notify_all();
  if (s_->thread.joinable()) s_->thread.join();
}

std::shared_ptr<const ScheduleVersion> OnlineScheduler::Current() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return s_->current;
}

bool OnlineScheduler::Advance() {
  std::lock_guard<std::mutex> lock(s_->mu);
  if (!s_->pending) return false;
  if (!s_->force && !(s_->pending->objective < s_->current->objective)) return false;
  s_->pending->version = s_->next_version++;
  s_->Log("adopted v" + std::to_string(s_->pending->version) + " (" + s_->pending->method +
          "): " + FormatNumber(s_->pending->objective));
  s_->current = std::move(s_->pending);
  s_->pending.reset();
  s_->force = false;
  return true;
}

void OnlineScheduler::Report(const Problem& measured) {
  std::unique_lock<std::mutex> lock(s_->mu);
  if (measured.stages() != s_->model->stages()) return;  // another problem's profile
  s_->reports.push_back(measured);
  while (static_cast<int>(s_->reports.size()) > s_->opt.drift_window) s_->reports.pop_front();
  std::optional<Problem> q = s_->Drifted();
  if (!q) return;
  const int pv = s_->problem_version + 1;
  auto model = std::make_shared<const Problem>(std::move(*q));
  std::shared_ptr<ScheduleVersion> now = s_->OnNewModel(model, pv);
  if (!now) {
    s_->Log("drift: no schedule fits the measured times; keeping the model");
    s_->reports.clear();
    return;
  }
  s_->Log("drift beyond " + FormatNumber(100 * s_->opt.drift_threshold) +
          "%: new model, the schedule in use takes " + FormatNumber(now->objective) +
          " on it; refining again");
  s_->model = std::move(model);
  s_->problem_version = pv;
  s_->pending = std::move(now);
  s_->force = true;
  s_->reports.clear();
  s_->work = true;
  s_->interrupt = true;  // the running refinement is for the old model
  lock.unlock();
  s_->cv.notify_all();
}

Problem OnlineScheduler::model() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return *s_->model;
}

bool OnlineScheduler::refining() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  return (s_->busy || s_->work) && !s_->stopping;
}

bool OnlineScheduler::WaitIdle(double seconds) const {
  std::unique_lock<std::mutex> lock(s_->mu);
  return s_->cv.wait_for(lock, std::chrono::duration<double>(seconds),
                         [&] { return (!s_->busy && !s_->work) || s_->stopping; });
}

}  // namespace optpipe
