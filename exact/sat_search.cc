#include "exact/sat_search.h"

#include <algorithm>
#include <cadical.hpp>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "core/lower_bound.h"
#include "core/text_format.h"
#include "exact/sat_encoding.h"

namespace optpipe {
namespace {

using Clock = std::chrono::steady_clock;
using sat::Encoding;
using sat::Grains;
using sat::MemoryGrain;

constexpr int kMaxRoomGrains = 1000;

// Ends a solve at a deadline, on the caller's stop, or once another solver
// of the same probe has decided it.
class Deadline : public CaDiCaL::Terminator {
 public:
  Deadline(Clock::time_point at, const std::atomic<bool>* stop, const std::atomic<bool>* decided)
      : at_(at), stop_(stop), decided_(decided) {}
  bool terminate() override {
    return (stop_ && stop_->load()) || decided_->load() || Clock::now() >= at_;
  }

 private:
  Clock::time_point at_;
  const std::atomic<bool>* stop_;
  const std::atomic<bool>* decided_;
};

}  // namespace

bool SatSearchIsLarge(const Problem& p) {
  return p.stages() * p.microbatches * (p.split_backward ? 3 : 2) >= 256;
}

bool SatSearchApplies(const Problem& p) {
  if (p.objective != Objective::kMakespan || TimeGrain(p) <= 0) return false;
  for (int s = 0; s < p.stages(); ++s) {
    if (p.f[s] <= 0 || Duration(p, {OpType::kB, s, 0}) <= 0) return false;
    if (p.split_backward && p.w[s] <= 0) return false;
    if (p.offload && (*p.offload)[s] <= 0) return false;
  }
  if (!p.memory_limit) return true;
  const double q = MemoryGrain(p);
  if (q <= 0) return false;
  for (int d = 0; d < p.devices; ++d) {
    if ((*p.memory_limit)[d] - p.static_memory[d] > kMaxRoomGrains * q) return false;
  }
  return true;
}

namespace {

// One of the racing solvers with its encoding, built once at the first
// probe's horizon; every later probe (below it) assumes a cap.
// Its grains: the problem's time grain, the memory grain where memory is
// limited.
struct Racer {
  Racer(const Problem& p, int horizon)
      : enc(p, horizon, TimeGrain(p), p.memory_limit ? MemoryGrain(p) : 1.0, solver) {
    // CaDiCaL's "sat" configuration (stable mode only, target phases): the
    // probes that find schedules get far quicker and those that prove none no
    // slower (docs/exact.md has the measurement).
    solver.configure("sat");
    solver.set("quiet", 1);
  }
  // Encodes with its own seed, until `end` or the caller's stop.
  void Build(int seed, const SatSearchOptions& opt, Clock::time_point end) {
    solver.set("seed", seed);
    built = enc.Build(opt.max_literals,
                      [&] { return (opt.stop && opt.stop->load()) || Clock::now() >= end; });
  }
  CaDiCaL::Solver solver;
  Encoding enc;
  Encoding::Built built = Encoding::Built::kOk;
};

// r with its micro-batches relabelled so that stage 0's forwards start in
// micro-batch order, as the encoding has them (micro-batches are
// interchangeable: every cost is per stage).
SimResult InForwardOrder(const Problem& p, const SimResult& r) {
  const OpSpace space = p.op_space();
  std::vector<int> old(p.microbatches);  // old[k]: the micro-batch that becomes k
  std::iota(old.begin(), old.end(), 0);
  std::stable_sort(old.begin(), old.end(), [&](int a, int b) {
    return r.start[space.Index(OpType::kF, 0, a)] < r.start[space.Index(OpType::kF, 0, b)];
  });
  SimResult out = r;
  for (int i = 0; i < space.size(); ++i) {
    const Op op = space.At(i);
    const int from = space.Index(op.type, op.stage, old[op.microbatch]);
    out.start[i] = r.start[from];
    out.end[i] = r.end[from];
  }
  return out;
}

// The best schedule a large neighbourhood search knows, shared by its solvers.
struct Incumbent {
  std::mutex mu;
  double objective = 0;
  SimResult hint;  // its times, in forward order (InForwardOrder)
  std::optional<Schedule> schedule;
  std::optional<SimResult> sim;
  int version = 0;  // schedules found so far
  // The search stops once it has found nothing for `patience` (since its
  // start or its last find).
  Clock::time_point last;
  Clock::duration patience = Clock::duration::max();
  // SatSearchOptions::on_schedule, or null.
  const std::function<void(const Schedule&, const SimResult&)>* on_schedule = nullptr;

  bool Going(Clock::time_point end) {
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(mu);
    return now < end && now - last < patience;
  }

  // Takes s, simulated as `run`, where it beats the best.
  void Offer(const Problem& p, Schedule&& s, SimResult&& run) {
    std::lock_guard<std::mutex> lock(mu);
    if (run.objective >= objective - 1e-9 * std::max(1.0, objective)) return;
    objective = run.objective;
    hint = InForwardOrder(p, run);
    schedule = std::move(s);
    sim = std::move(run);
    ++version;
    last = Clock::now();
    if (on_schedule && *on_schedule) (*on_schedule)(*schedule, *sim);
  }
};

// A neighbourhood step's time: a fiftieth of the search left until `end`,
// between 0.1 and 1 s.
double StepSeconds(Clock::time_point end) {
  return std::clamp(std::chrono::duration<double>(end - Clock::now()).count() / 50, 0.1, 1.0);
}

// One solver's neighbourhoods until `end`: "a schedule a grain better than
// the best, keeping its orders and offloads outside [lo, lo + width)", or,
// every other step, "... with two micro-batches taken out and put back
// anywhere": their ops free, their offloads too, the other ops in the best's
// order among themselves. A time window frees only what runs close
// together; the reinsertion can, say, keep a micro-batch's activations and
// run its chain at once, which needs its forwards and backwards, far apart,
// to move together; on the slow-link 8x16 problems it found schedules that
// windows alone did not. Not on a fine grid, where a micro-batch's ops have
// thousands of columns each to go to and the windows alone found more.
void NeighbourhoodWorker(const Problem& p, double g, Racer& r, std::uint64_t seed, Incumbent& inc,
                         Clock::time_point end, const std::atomic<bool>* stop, bool reinsertion) {
  const OpSpace space = p.op_space();
  Simulator simulator(p);
  std::mt19937_64 rng(seed);
  const std::atomic<bool> alone{false};
  const double step = StepSeconds(end);
  int version = -1, cap = 0;
  double best = 0, width = 0;
  SimResult hint;
  while (inc.Going(end) && !(stop && stop->load())) {
    {
      std::lock_guard<std::mutex> lock(inc.mu);
      if (inc.version != version) {
        version = inc.version;
        best = inc.objective;
        hint = inc.hint;
        cap = r.enc.Cap(Grains(best, g) - 1);
        if (width == 0) width = best / 4;
      }
    }
    const bool reinsert =
        reinsertion && p.microbatches > 2 && std::bernoulli_distribution(0.5)(rng);
    // Two distinct micro-batches (the same one twice frees only one), in
    // every step: adapting their number (one to three: fewer after a step
    // cut short, more after one proven empty) found fewer schedules.
    int m1 = -1, m2 = -1;
    if (reinsert) {
      m1 = std::uniform_int_distribution<int>(0, p.microbatches - 1)(rng);
      m2 = (m1 + 1 + std::uniform_int_distribution<int>(0, p.microbatches - 2)(rng)) %
           p.microbatches;
    }
    const double lo = std::uniform_real_distribution<double>(-width / 2, best - width / 2)(rng);
    const double hi = lo + width;
    const auto within = [&](OpType t, int s, int m) {
      const double at = hint.start[space.Index(t, s, m)];
      return at >= lo && at < hi;  // false for NaN: an op the best does not run
    };
    const auto free = [&](int i) {
      const Op op = space.At(i);
      if (reinsert) return op.microbatch == m1 || op.microbatch == m2;
      if (op.type == OpType::kO || op.type == OpType::kR) {
        return within(OpType::kF, op.stage, op.microbatch) ||
               within(OpType::kB, op.stage, op.microbatch);
      }
      return within(op.type, op.stage, op.microbatch);
    };
    r.enc.Phases(hint);
    for (int lit : r.enc.Keep(hint, free, /*loose=*/reinsert)) r.solver.assume(lit);
    r.solver.assume(cap);
    Deadline deadline(std::min(end, Clock::now() + std::chrono::microseconds(
                                                       static_cast<std::int64_t>(step * 1e6))),
                      stop, &alone);
    r.solver.connect_terminator(&deadline);
    const int code = r.solver.solve();
    r.solver.disconnect_terminator();
    if (!reinsert && code == 20) width = std::min(2 * best, width * 1.1);  // look wider
    if (!reinsert && code == 0) width = std::max(4 * g, width / 1.25);     // too hard: narrower
    if (code != 10) continue;
    StatusOr<Schedule> s = OrdersOf(p, r.enc.Decode());
    StatusOr<SimResult> sim = s.ok() ? simulator.Run(*s) : StatusOr<SimResult>(s.status());
    if (sim.ok()) inc.Offer(p, std::move(*s), std::move(*sim));  // the simulator has the last word
  }
}

// Where the whole problem is too large to encode (fine grains, long
// horizons: O(ops * H) variables), neighbourhoods that encode only what they
// free, a fresh solver each: "a schedule ending a grain before the best,
// whose ops that start before [lo, lo + width) keep their times, those that
// start after it start a grain earlier, and those within it (and the copies
// of any activation that may go to the host and back within it) start
// anywhere in it". The window's width grows after a window proves empty and
// shrinks after one is cut short. A schedule found is replayed as soon as its
// orders allow where that is valid and better (the ops after the window may
// then move up by more than the grain), else at its times.
void WindowWorker(const Problem& p, double g, std::uint64_t seed, Incumbent& inc,
                  Clock::time_point end, const SatSearchOptions& opt) {
  const OpSpace space = p.op_space();
  Simulator simulator(p);
  std::mt19937_64 rng(seed);
  const std::atomic<bool> alone{false};
  const double step = StepSeconds(end);
  double width = 0;
  while (inc.Going(end) && !(opt.stop && opt.stop->load())) {
    double best;
    SimResult hint;
    {
      std::lock_guard<std::mutex> lock(inc.mu);
      best = inc.objective;
      hint = inc.hint;
    }
    if (width == 0) width = best / 8;
    const double lo = std::uniform_real_distribution<double>(-width / 2, best - width / 2)(rng);
    const double hi = lo + width;
    const int first = std::max(0, static_cast<int>(std::floor(lo / g))),
              last = static_cast<int>(std::ceil(hi / g));
    std::vector<std::pair<int, int>> starts(space.size(), {first, last});
    for (int i = 0; i < space.size(); ++i) {
      const double at = hint.start[i];
      if (std::isnan(at)) continue;  // a copy the best does not run: free within the window
      const int t = Grains(at, g);
      if (at < lo) starts[i] = {t, t};
      if (at >= hi) starts[i] = {t - 1, t - 1};
    }
    Racer r(p, Grains(best, g) - 1);
    r.enc.Limit(std::move(starts));
    r.Build(static_cast<int>(seed), opt, end);
    int code = r.built == Encoding::Built::kEmpty ? 20 : 0;
    if (r.built == Encoding::Built::kOk) {
      r.enc.Phases(hint);
      Deadline deadline(std::min(end, Clock::now() + std::chrono::microseconds(
                                                         static_cast<std::int64_t>(step * 1e6))),
                        opt.stop, &alone);
      r.solver.connect_terminator(&deadline);
      code = r.solver.solve();
      r.solver.disconnect_terminator();
    }
    if (code == 20) width = std::min(best, width * 1.1);   // nothing there: look wider
    if (code == 0) width = std::max(4 * g, width / 1.25);  // too hard or large: narrower
    if (code != 10) continue;
    StatusOr<Schedule> s = OrdersOf(p, r.enc.Decode());
    if (!s.ok()) continue;
    StatusOr<SimResult> sim = simulator.Run(*s);
    Schedule asap = *s;
    asap.release.clear();
    if (StatusOr<SimResult> a = simulator.Run(asap);
        a.ok() && (!sim.ok() || a->objective < sim->objective)) {
      s = std::move(asap);
      sim = std::move(a);
    }
    if (sim.ok()) inc.Offer(p, std::move(*s), std::move(*sim));  // the simulator has the last word
  }
}

// The solvers' neighbourhoods around `best` for `seconds`, one thread each; a
// better schedule found becomes res's. `bound`: a lower bound (whether the
// grid is fine).
void Neighbourhoods(const Problem& p, double g, std::vector<std::unique_ptr<Racer>>& racers,
                    const SimResult& best, double bound, double seconds,
                    const SatSearchOptions& opt, SatSearchResult& res, double patience = 1) {
  const bool fine = Grains(res.best - bound, g) > kFineSteps;
  const Clock::time_point t0 = Clock::now();
  Incumbent inc;
  inc.objective = res.best;
  inc.hint = InForwardOrder(p, best);
  inc.last = t0;
  inc.on_schedule = &opt.on_schedule;
  inc.patience = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(0.0, patience * seconds)));
  const Clock::time_point until =
      t0 + std::chrono::microseconds(static_cast<std::int64_t>(std::max(0.0, seconds) * 1e6));
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < racers.size(); ++k) {
    if (racers[k]->built == Encoding::Built::kOk) {
      threads.emplace_back(NeighbourhoodWorker, std::cref(p), g, std::ref(*racers[k]), k,
                           std::ref(inc), until, opt.stop, !fine);
    } else if (racers[k]->built == Encoding::Built::kTooLarge &&
               Grains(res.best, g) <= sat::kMaxGrains) {  // a window may fit
      threads.emplace_back(WindowWorker, std::cref(p), g, k, std::ref(inc), until, std::cref(opt));
    }
  }
  for (std::thread& t : threads) t.join();
  res.neighbourhood_schedules += inc.version;
  if (opt.log) {
    opt.log("sat: neighbourhoods: " +
            (inc.schedule ? "found " + FormatNumber(inc.objective) + " (" +
                                std::to_string(inc.version) + " better schedules)"
                          : std::string("none better")) +
            " in " +
            FormatNumber(
                std::round(std::chrono::duration<double>(Clock::now() - t0).count() * 100) / 100) +
            " s");
  }
  if (inc.schedule) {
    inc.schedule->method = "sat";
    res.best = inc.objective;
    res.schedule = std::move(inc.schedule);
    res.sim = std::move(inc.sim);
  }
}

}  // namespace

struct SatSession::Racers {
  std::vector<std::unique_ptr<Racer>> solvers;
  int horizon = 0;  // the grains they were encoded at
  double best = 0;  // the best objective they knew of
};
SatSession::SatSession() : racers_(std::make_unique<Racers>()) {}
SatSession::~SatSession() = default;

// On a fine grid, where a probe just below the best found a schedule,
// neighbourhoods that have found nothing for this share of their time yield
// it to the probes: on some problems one-grain probes find schedule after
// schedule where neighbourhoods find nothing, on others the other way round.
// (Not where that probe was cut short: there the probes rarely find anything.)
constexpr double kPatience = 0.25;

SatSearchResult SearchTimeIndexed(const Problem& p, double lower_bound, double incumbent,
                                  const SatSearchOptions& opt) {
  const Clock::time_point t0 = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const double g = TimeGrain(p);
  const double tol = 1e-9 * std::max(1.0, incumbent);
  SatSearchResult res;
  res.best = incumbent;
  res.bound = std::min(AtGrain(p, lower_bound), incumbent);
  Simulator simulator(p);
  // The hint's micro-batches as the encoding orders them.
  const std::optional<SimResult> hint =
      opt.hint ? std::optional<SimResult>(InForwardOrder(p, *opt.hint)) : std::nullopt;
  SatSession own;
  SatSession::Racers& session = *(opt.session ? opt.session : &own)->racers_;
  std::vector<std::unique_ptr<Racer>>& racers = session.solvers;
  double ceiling = incumbent;  // targets lie below it (lowered by a probe cut short)
  const bool large = SatSearchIsLarge(p);
  bool descend = true;
  int jump = 0;  // grains below the top the next descent aims (doubling while they find)
  bool searched_neighbourhoods = false;
  while (res.bound < res.best - tol) {
    const double left = opt.time_limit_s - seconds();
    if ((opt.stop && opt.stop->load()) || left <= 0) break;
    const double top = BelowGrain(p, std::min(res.best, ceiling));
    if (top < res.bound - tol) {
      if (ceiling >= res.best) res.bound = res.best;  // the bound's multiple of the grain
      break;
    }
    // Just below the best after a schedule was found (the hint's times are
    // close), twice as far below after each descent that found one (far
    // fewer probes than a grain each from a distant incumbent), down to the
    // upper middle, else the upper middle of the targets left; the last one
    // gets all the time.
    const int steps = Grains(top - res.bound, g);
    const double target = descend ? top - std::min(jump, steps / 2) * g : top - (steps / 2) * g;
    const bool descent = descend, below_best = descend && ceiling >= res.best;
    descend = false;
    // A probe's share of the time left; an encoding may take all of it (the
    // solvers it builds serve every later probe), and the first probe its
    // share of what remains after.
    const double fraction = steps == 0                                    ? 1
                            : below_best && (steps > kFineSteps || large) ? 0.125
                                                                          : 0.5;
    const auto share = std::chrono::microseconds(static_cast<std::int64_t>(fraction * left * 1e6));
    const Clock::time_point end =
        Clock::now() + std::chrono::microseconds(static_cast<std::int64_t>(left * 1e6));
    // The solvers race, each on its own thread with its own seed (the first
    // guesses to the first); the first to decide ends the others.
    std::atomic<bool> decided{false};
    const int n = std::max(1, opt.solvers);
    // Encoded anew unless an earlier call left solvers whose encoding holds
    // this target and that knew as good a schedule as this call's: a better
    // one guides a fresh solver's first guesses (hint) far better than it
    // re-phases a used one.
    if (!racers.empty() &&
        (static_cast<int>(racers.size()) != n || Grains(target, g) > session.horizon ||
         incumbent < session.best - tol ||
         std::any_of(racers.begin(), racers.end(), [](const std::unique_ptr<Racer>& r) {
           return r->built != Encoding::Built::kOk;
         }))) {
      racers.clear();
    }
    const bool first = racers.empty();
    for (int k = 0; first && k < n; ++k) {
      racers.push_back(std::make_unique<Racer>(p, Grains(target, g)));
    }
    if (first) {
      session.horizon = Grains(target, g);
      session.best = res.best;
      ++res.encodings;
    }
    std::vector<int> code(n, 0);
    const auto run = [&](int k) {
      Racer& r = *racers[k];
      if (first) {
        // Not ended by another solver's answer: each is encoded for every probe.
        r.Build(k, opt, end);
        if (r.built == Encoding::Built::kEmpty) code[k] = 20;  // an op without a window
        if (r.built != Encoding::Built::kOk) return;
        if (hint && k == 0) r.enc.Phases(*hint);
      }
      if (r.built != Encoding::Built::kOk) return;
      Deadline stop(std::min(end, Clock::now() + share), opt.stop, &decided);
      r.solver.assume(r.enc.Cap(Grains(target, g)));
      r.solver.connect_terminator(&stop);
      code[k] = r.solver.solve();
      r.solver.disconnect_terminator();
      if (code[k] == 10 || code[k] == 20) decided = true;
    };
    {
      std::vector<std::thread> threads;
      for (int k = 1; k < n; ++k) threads.emplace_back(run, k);
      run(0);
      for (std::thread& t : threads) t.join();
    }
    ++res.probes;
    int w = 0;  // the solver that decided, if any
    for (int k = 0; k < n; ++k) {
      if (code[k] == 10 || code[k] == 20) w = k;
    }
    Racer& a = *racers[w];
    res.variables = std::max(res.variables, a.enc.variables());
    res.clauses = std::max(res.clauses, a.enc.clauses());
    const auto log = [&](const std::string& what) {
      if (opt.log) {
        opt.log("sat: by " + FormatNumber(target) + ": " + what + " (" +
                std::to_string(a.enc.variables()) + " variables, " +
                std::to_string(a.enc.clauses()) +
                " clauses, t=" + FormatNumber(std::round(seconds() * 100) / 100) + "s)");
      }
    };
    // Once the first probe below the best is cut short or too large to
    // encode, or on a fine grid finds a schedule: neighbourhoods, again
    // (their share of what is left) while they find better schedules.
    const auto search_neighbourhoods = [&](double patience) {
      if (!below_best || searched_neighbourhoods || !opt.hint || opt.neighbourhood_share <= 0) {
        return;
      }
      searched_neighbourhoods = true;
      for (int found = -1; found < res.neighbourhood_schedules && !(opt.stop && opt.stop->load()) &&
                           seconds() < opt.time_limit_s;) {
        found = res.neighbourhood_schedules;
        Neighbourhoods(p, g, racers, res.sim ? *res.sim : *hint, res.bound,
                       opt.neighbourhood_share * (opt.time_limit_s - seconds()), opt, res,
                       patience);
      }
      if (res.schedule) session.best = res.best;
    };
    if (a.built == Encoding::Built::kTooLarge) {
      log("too large to encode");
      search_neighbourhoods(1);
      break;
    }
    if (a.built == Encoding::Built::kCut) {
      log("cut short while encoding");
      break;
    }
    if (code[w] == 0) {
      log("cut short");
      ceiling = target;  // a lower target is more constrained: perhaps quicker to decide
      search_neighbourhoods(1);
      continue;
    }
    if (code[w] == 20) {
      log("none");
      res.bound = std::min(AtGrain(p, target + g / 2), res.best);
      continue;
    }
    StatusOr<Schedule> s = OrdersOf(p, a.enc.Decode());
    StatusOr<SimResult> sim = s.ok() ? simulator.Run(*s) : StatusOr<SimResult>(s.status());
    if (!sim.ok() || sim->objective > target + tol) {
      // The simulator has the last word; an encoding that disagrees proves nothing.
      log("a schedule the simulator rejects (" +
          (sim.ok() ? "objective " + FormatNumber(sim->objective) : sim.status().message()) + ")");
      break;
    }
    log("found " + FormatNumber(sim->objective));
    jump = descent ? 2 * jump + 1 : 0;
    descend = true;
    s->method = "sat";
    if (opt.on_schedule) opt.on_schedule(*s, *sim);
    res.best = session.best = sim->objective;
    res.schedule = std::move(*s);
    res.sim = std::move(*sim);
    // On a fine grid a probe just below the best gains one grain of the many
    // left open: the neighbourhoods around the schedule it found gain more.
    if (steps > kFineSteps) search_neighbourhoods(kPatience);
  }
  res.optimal = res.bound >= res.best - tol;
  if (res.optimal) res.bound = res.best;
  return res;
}

std::int64_t SatLaneLiterals(const Problem& p, double horizon) {
  return Racer(p, Grains(horizon, TimeGrain(p))).enc.Estimate();
}

SatSearchResult SearchNeighbourhoods(const Problem& p, const SimResult& best,
                                     const SatSearchOptions& opt) {
  const Clock::time_point t0 = Clock::now();
  const double g = TimeGrain(p);
  SatSearchResult res;
  res.best = best.objective;
  const int horizon = Grains(BelowGrain(p, best.objective), g);
  const Clock::time_point end =
      t0 + std::chrono::microseconds(static_cast<std::int64_t>(opt.time_limit_s * 1e6));
  std::vector<std::unique_ptr<Racer>> racers;
  std::vector<std::thread> threads;
  for (int k = 0; k < std::max(1, opt.solvers); ++k) {
    racers.push_back(std::make_unique<Racer>(p, horizon));
  }
  for (int k = 0; k < std::max(1, opt.solvers); ++k) {
    threads.emplace_back([&, k] { racers[k]->Build(k, opt, end); });
  }
  for (std::thread& t : threads) t.join();
  ++res.encodings;
  res.variables = racers[0]->enc.variables();
  res.clauses = racers[0]->enc.clauses();
  const double left = opt.time_limit_s - std::chrono::duration<double>(Clock::now() - t0).count();
  Neighbourhoods(p, g, racers, best, AtGrain(p, ComputeLowerBound(p).value), left, opt, res);
  return res;
}

}  // namespace optpipe
