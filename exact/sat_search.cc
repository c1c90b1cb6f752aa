#include "exact/sat_search.h"

#include <algorithm>
#include <cadical.hpp>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

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
struct Racer {
  Racer(const Problem& p, int horizon, double g, double q) : enc(p, horizon, g, q, solver) {
    // CaDiCaL's "sat" configuration (stable mode only, target phases): the
    // probes that find schedules get far quicker and those that prove none no
    // slower (fz4x8v2-L3 proven in 3 s instead of 25-38 s, seeds 10-30).
    solver.configure("sat");
    solver.set("quiet", 1);
  }
  CaDiCaL::Solver solver;
  Encoding enc;
  Encoding::Built built = Encoding::Built::kOk;
};

}  // namespace

struct SatSession::Racers {
  std::vector<std::unique_ptr<Racer>> solvers;
  int horizon = 0;  // the grains they were encoded at
  double best = 0;  // the best objective they knew of
};
SatSession::SatSession() : racers_(std::make_unique<Racers>()) {}
SatSession::~SatSession() = default;

SatSearchResult SearchTimeIndexed(const Problem& p, double lower_bound, double incumbent,
                                  const SatSearchOptions& opt) {
  const Clock::time_point t0 = Clock::now();
  const auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const double g = TimeGrain(p);
  const double q = p.memory_limit ? MemoryGrain(p) : 1.0;
  const double tol = 1e-9 * std::max(1.0, incumbent);
  SatSearchResult res;
  res.best = incumbent;
  res.bound = std::min(AtGrain(p, lower_bound), incumbent);
  Simulator simulator(p);
  SatSession own;
  SatSession::Racers& session = *(opt.session ? opt.session : &own)->racers_;
  std::vector<std::unique_ptr<Racer>>& racers = session.solvers;
  double ceiling = incumbent;  // targets lie below it (lowered by a probe cut short)
  bool descend = true;
  while (res.bound < res.best - tol) {
    const double left = opt.time_limit_s - seconds();
    if ((opt.stop && opt.stop->load()) || left <= 0) break;
    const double top = BelowGrain(p, std::min(res.best, ceiling));
    if (top < res.bound - tol) {
      if (ceiling >= res.best) res.bound = res.best;  // the bound's multiple of the grain
      break;
    }
    // Just below the best after a schedule was found (the hint's times are
    // close), else the upper middle of the targets left; the last one gets
    // all the time.
    const int steps = Grains(top - res.bound, g);
    const double target = descend ? top : top - (steps / 2) * g;
    descend = false;
    // A probe's share of the time left; an encoding may take all of it (the
    // solvers it builds serve every later probe), and the first probe its
    // share of what remains after.
    const auto share =
        std::chrono::microseconds(static_cast<std::int64_t>((steps == 0 ? left : left / 2) * 1e6));
    const Clock::time_point end =
        Clock::now() + std::chrono::microseconds(static_cast<std::int64_t>(left * 1e6));
    // The solvers race, each on its own thread with its own seed (the first
    // guesses to the first); the first to decide ends the others.
    std::atomic<bool> decided{false};
    const int n = std::max(1, opt.solvers);
    // Encoded anew unless an earlier call left solvers whose encoding holds
    // this target and that knew as good a schedule as this call's: a better
    // one guides a fresh solver's first guesses (hint) far better than it
    // re-phases a used one (unit 8x16, room 3: 61 found in 0.3 s from auto's
    // 62 where the list scheduler's solvers found nothing in 12 s).
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
      racers.push_back(std::make_unique<Racer>(p, Grains(target, g), g, q));
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
        r.solver.set("seed", k);
        // Not ended by another solver's answer: each is encoded for every probe.
        r.built = r.enc.Build(opt.max_literals, [&] {
          return (opt.stop && opt.stop->load()) || Clock::now() >= end;
        });
        if (r.built == Encoding::Built::kEmpty) code[k] = 20;  // an op without a window
        if (r.built != Encoding::Built::kOk) return;
        if (opt.hint && k == 0) r.enc.Phases(*opt.hint);
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
    if (a.built == Encoding::Built::kTooLarge) {
      log("too large to encode");
      break;
    }
    if (a.built == Encoding::Built::kCut) {
      log("cut short while encoding");
      break;
    }
    if (code[w] == 0) {
      log("cut short");
      ceiling = target;  // a lower target is more constrained: perhaps quicker to decide
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
    descend = true;
    s->method = "sat";
    res.best = session.best = sim->objective;
    res.schedule = std::move(*s);
    res.sim = std::move(*sim);
  }
  res.optimal = res.bound >= res.best - tol;
  if (res.optimal) res.bound = res.best;
  return res;
}

}  // namespace optpipe
