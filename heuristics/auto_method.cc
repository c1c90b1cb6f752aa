#include "heuristics/auto_method.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <sstream>
#include <utility>

#include "core/lower_bound.h"
#include "heuristics/list_scheduler.h"

namespace optpipe {
namespace {

// The activations (stage * M + micro-batch) whose choice ListTuner may move:
// `toggle`, those `s` offloads or whose `choice` is not kByRule (kByRule <->
// kKeep, kSend -> kByRule); `send`, the others but the last stage's (kByRule
// -> kSend).
struct Movable {
  std::vector<int> toggle, send;
};
Movable MovableActivations(const Problem& p, const Schedule& s, const std::vector<char>& choice) {
  std::vector<char> offloaded(choice.size(), 0);
  for (const std::vector<Op>& link : s.copy) {
    for (const Op& op : link) {
      if (op.type == OpType::kO)
        offloaded[static_cast<std::size_t>(op.stage) * p.microbatches + op.microbatch] = 1;
    }
  }
  Movable out;
  const std::size_t last_stage = static_cast<std::size_t>(p.stages() - 1) * p.microbatches;
  for (std::size_t i = 0; i < choice.size(); ++i) {
    if (offloaded[i] || choice[i] != ListOptions::kByRule) {
      out.toggle.push_back(static_cast<int>(i));
    } else if (i < last_stage) {
      out.send.push_back(static_cast<int>(i));
    }
  }
  return out;
}

// A change to the list scheduler's options in ListTuner: kOffloadRule,
// kLonger / kShorter (reload look-ahead), kEagerW, kCopyOrder (offloads
// or reloads first on a link), kBreadthFirst, kDeeper / kShallower (every
// stage's warm-up depth one step, where it stays in range);
// 0 <= move < 2S steps stage move / 2's warm-up depth;
// 2S <= move < 2S + SM toggles activation move - 2S (see Movable);
// move >= 2S + SM sends activation move - 2S - SM (SM = S * M).
// False when it leaves the options' range.
enum : int {
  kOffloadRule = -1,
  kLonger = -2,
  kShorter = -3,
  kEagerW = -4,
  kCopyOrder = -5,
  kDeeper = -6,
  kShallower = -7,
  kBreadthFirst = -8
};
bool ApplyMove(const Problem& p, int move, ListOptions& o) {
  const int S = p.stages(), SM = S * p.microbatches;
  switch (move) {
    case kCopyOrder:
      o.offload_first = !o.offload_first;
      return true;
    case kBreadthFirst:
      o.breadth_first = !o.breadth_first;
      return true;
    case kOffloadRule:
      o.offload_warmup = !o.offload_warmup;
      return true;
    case kLonger:
      return ++o.reload_lookahead <= 3;
    case kShorter:
      return --o.reload_lookahead >= 1;
    case kEagerW:
      o.eager_w = !o.eager_w;
      return true;
    case kDeeper:
    case kShallower: {
      bool moved = false;
      for (int& depth : o.warmup_depth) {
        const int next = depth + (move == kDeeper ? 1 : -1);
        if (next >= 1 && next <= p.microbatches) {
          depth = next;
          moved = true;
        }
      }
      return moved;
    }
  }
  if (move >= 2 * S + SM) {
    o.choice[move - 2 * S - SM] = ListOptions::kSend;
    return true;
  }
  if (move >= 2 * S) {
    char& c = o.choice[move - 2 * S];
    c = c == ListOptions::kByRule ? ListOptions::kKeep : ListOptions::kByRule;
    return true;
  }
  int& depth = o.warmup_depth[move / 2];
  depth += move % 2 ? 1 : -1;
  return depth >= 1 && depth <= p.microbatches;
}

// A setting of the list scheduler's knobs and what it gives.
struct Tuned {
  ListOptions options;
  Schedule schedule;
  SimResult sim;
};

// Search of the list scheduler's knobs: the warm-up depth per stage (one stage,
// or every stage at once, one step deeper or shallower), which activations stay
// on the device and which go to the host (one offloaded activation kept, one
// kept or sent left to the rules again, or one the rules keep sent; at most
// kToggleMoves and kSendMoves of these per round, drawn at random where there
// are more), the offload rule, the reload look-ahead (1-3), the link's priority
// between offloads and reloads, eager W and breadth first. The scheduler re-plans orders and
// copies around every change, so orders and offloads are chosen together, which
// a link too slow to carry every activation needs. From a start, each round
// takes the best improving move; at a local optimum the search kicks the
// start's best options by 2-6 random changes and climbs again, until kKicks
// kicks in a row bring nothing better. It starts from the list seed's setting,
// then from the next best grid settings (kStarts in all), and stops where it
// meets the lower bound (opt.known_bound's or ComputeLowerBound's). With a
// budget of evaluations the clock is ignored: the same result on every run.
class ListTuner {
 public:
  ListTuner(const Problem& p, const SearchOptions& opt, double seconds,
            std::int64_t max_evaluations, std::int64_t* evaluations)
      : p_(p),
        opt_(opt),
        seconds_(seconds),
        max_evaluations_(max_evaluations),
        evaluations_(evaluations),
        t0_(std::chrono::steady_clock::now()),
        bound_(AtGrain(p, std::max(ComputeLowerBound(p).value, opt.known_bound))),
        rng_(opt.seed),
        arena_(opt.threads > 0 ? opt.threads : tbb::task_arena::automatic) {}

  // The best setting found from `base` and its schedule; nullopt when it
  // never beats `bar`.
  std::optional<std::pair<ListOptions, Solution>> Run(const ListChoice& base,
                                                      const SimResult& bar) {
    constexpr int kStarts = 4;
    StatusOr<SimResult> first = Simulate(p_, base.schedule);
    if (!first.ok()) return std::nullopt;
    Tuned best{Explicit(base.options), base.schedule, *first};
    std::vector<Tuned> others;
    for (int start = 0; start < kStarts && GoOn() && !AtBound(best.sim); ++start) {
      if (start == 1) others = RankedGrid(kStarts - 1, *first);
      if (start > static_cast<int>(others.size())) break;
      Tuned t = FromStart(start == 0 ? best : std::move(others[start - 1]));
      if (Better(t.sim, best.sim)) best = std::move(t);
    }
    StatusOr<SimResult> sim = Simulate(p_, best.schedule);  // the simulator has the last word
    if (!sim.ok() || !Better(*sim, bar)) return std::nullopt;
    return std::pair{std::move(best.options), Solution{std::move(best.schedule), std::move(*sim)}};
  }

 private:
  static constexpr int kToggleMoves = 64, kSendMoves = 16, kKicks = 30;

  // No setting can end before the bound.
  bool AtBound(const SimResult& r) const {
    return r.objective <= bound_ + 1e-9 * std::max(1.0, bound_);
  }
  bool GoOn() const {
    if (opt_.stop && opt_.stop->load()) return false;
    if (opt_.max_evaluations) return *evaluations_ < max_evaluations_;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count() < seconds_;
  }
  // The options with their warm-up depths and choices spelled out.
  ListOptions Explicit(ListOptions o) const {
    o.warmup_depth = WarmupDepths(p_, o);
    o.choice = Choices(p_, o);
    return o;
  }
  // Schedules make(i) for i < n in parallel (counting evaluations), scored
  // by the times the list scheduler ran them at, which the simulator would
  // replay (list_scheduler.h): only the setting Run keeps is simulated. On the
  // clock, a round cut short still counts (deterministic budgets finish it).
  void Score(int n, const std::function<std::optional<ListOptions>(int)>& make) {
    cand_.assign(n, std::nullopt);
    score_.assign(n, std::nullopt);
    arena_.execute([&] {
      tbb::parallel_for(0, n, [&](int i) {
        if (!opt_.max_evaluations && !GoOn()) return;
        std::optional<ListOptions> o = make(i);
        if (!o) return;
        SimResult timing;
        StatusOr<Schedule> s = ListSchedule(p_, *o, &timing);
        if (!s.ok()) return;
        cand_[i] = std::move(*s);
        score_[i] = std::move(timing);
      });
    });
    for (int i = 0; i < n; ++i) *evaluations_ += cand_[i] ? 1 : 0;
  }
  // Up to `count` grid settings other than the best, best first, worse than
  // `best` (the list seed's, which is the grid's best).
  std::vector<Tuned> RankedGrid(int count, const SimResult& best) {
    const std::vector<ListOptions> grid = ListOptionGrid(p_);
    Score(static_cast<int>(grid.size()), [&](int i) { return std::optional(grid[i]); });
    std::vector<Tuned> out;
    for (std::size_t i = 0; i < grid.size(); ++i) {
      if (score_[i] && Better(best, *score_[i]))
        out.push_back({Explicit(grid[i]), std::move(*cand_[i]), std::move(*score_[i])});
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const Tuned& a, const Tuned& b) { return Better(a.sim, b.sim); });
    if (static_cast<int>(out.size()) > count) out.resize(count);
    return out;
  }
  // Best-improvement moves until none improves.
  void Climb(Tuned& t) {
    const int S = p_.stages();
    std::vector<int> moves;
    while (GoOn() && !AtBound(t.sim)) {
      moves.clear();
      for (int i = 0; i < 2 * S; ++i) moves.push_back(i);
      moves.insert(moves.end(), {kDeeper, kShallower, kBreadthFirst});
      if (t.options.offload)
        moves.insert(moves.end(), {kOffloadRule, kLonger, kShorter, kCopyOrder});
      if (p_.split_backward) moves.push_back(kEagerW);
      // At most `count` of `from`, drawn at random where there are more, as moves from `base`.
      const auto add = [&](std::vector<int> from, int count, int base) {
        if (static_cast<int>(from.size()) > count) {
          std::shuffle(from.begin(), from.end(), rng_);
          from.resize(count);
          std::sort(from.begin(), from.end());
        }
        for (int k : from) moves.push_back(base + k);
      };
      Movable movable = MovableActivations(p_, t.schedule, t.options.choice);
      add(std::move(movable.toggle), kToggleMoves, 2 * S);
      if (t.options.offload) add(std::move(movable.send), kSendMoves, 2 * S + S * p_.microbatches);
      Score(static_cast<int>(moves.size()), [&](int i) -> std::optional<ListOptions> {
        ListOptions q = t.options;
        return ApplyMove(p_, moves[i], q) ? std::optional(std::move(q)) : std::nullopt;
      });
      int pick = -1;
      for (std::size_t i = 0; i < moves.size(); ++i) {
        if (score_[i] && Better(*score_[i], pick < 0 ? t.sim : *score_[pick]))
          pick = static_cast<int>(i);
      }
      if (pick < 0) return;
      ApplyMove(p_, moves[pick], t.options);
      t.schedule = std::move(*cand_[pick]);
      t.sim = std::move(*score_[pick]);
    }
  }
  // Climbs from `start`, then kicks and climbs again; a local optimum as good
  // as the best replaces it (a walk along plateaus).
  Tuned FromStart(Tuned start) {
    const int S = p_.stages();
    Tuned best = start, cur = std::move(start);
    for (int failed = 0; failed < kKicks && GoOn() && !AtBound(best.sim);) {
      Climb(cur);
      ++failed;
      if (Better(cur.sim, best.sim)) failed = 0;
      if (!Better(best.sim, cur.sim)) best = cur;
      for (bool kicked = false; !kicked && failed < kKicks && GoOn();) {
        ListOptions o = best.options;
        const std::vector<int> toggle = MovableActivations(p_, best.schedule, o.choice).toggle;
        const int changes = 2 + static_cast<int>(rng_() % 5);
        for (int c = 0; c < changes; ++c) {
          if (toggle.empty() || rng_() % 4 == 0) {
            ListOptions q = o;
            if (ApplyMove(p_, static_cast<int>(rng_() % (2 * S)), q)) o = std::move(q);
          } else {
            ApplyMove(p_, 2 * S + toggle[rng_() % toggle.size()], o);
          }
        }
        ++*evaluations_;
        SimResult timing;
        StatusOr<Schedule> s = ListSchedule(p_, o, &timing);
        if (!s.ok()) {
          ++failed;
          continue;
        }
        cur = {std::move(o), std::move(*s), std::move(timing)};
        kicked = true;
      }
    }
    return best;
  }

  const Problem& p_;
  const SearchOptions& opt_;
  const double seconds_;
  const std::int64_t max_evaluations_;
  std::int64_t* evaluations_;
  const std::chrono::steady_clock::time_point t0_;
  const double bound_;
  std::mt19937_64 rng_;
  tbb::task_arena arena_;
  std::vector<std::optional<Schedule>> cand_;
  std::vector<std::optional<SimResult>> score_;
};

// A seed the search may start from.
struct Start {
  std::string name;
  const Schedule* schedule;
  double objective;
};

// Local search from `best` (the best seed), then from the other starts within
// kRestartWithin of it (distinct schedules, best first), then, while time is
// left after searches that all ended at a local optimum, from the incumbent
// with other random draws. The first search gets half of what is left when
// there are other starts, each restart an equal share of the rest (what one
// leaves goes on to the next). `left` tells the seconds left, `budget` the
// evaluations (with opt.max_evaluations). Fills res.search, restarts, reseeds.
Status MultiStart(const Problem& p, const SearchOptions& opt, const std::function<double()>& left,
                  std::int64_t budget, const Solution& best, const std::vector<Start>& starts,
                  AutoResult& res) {
  constexpr double kRestartWithin = 1.5;
  constexpr int kMaxReseeds = 64;
  const auto same = [](const Schedule& a, const Schedule& b) {
    return a.compute == b.compute && a.copy == b.copy;
  };
  std::vector<const Start*> others;
  for (const Start& st : starts) {
    if (st.objective > kRestartWithin * best.sim.objective || same(*st.schedule, best.schedule))
      continue;
    if (std::none_of(others.begin(), others.end(),
                     [&](const Start* o) { return same(*o->schedule, *st.schedule); }))
      others.push_back(&st);
  }
  std::stable_sort(others.begin(), others.end(),
                   [](const Start* a, const Start* b) { return a->objective < b->objective; });
  std::int64_t spent = 0;
  const auto share = [&](int parts) {
    SearchOptions o = opt;
    o.time_limit_s = std::max(0.0, left()) / parts;
    if (o.max_evaluations) o.max_evaluations = std::max<std::int64_t>(0, budget - spent) / parts;
    return o;
  };
  StatusOr<SearchResult> search = LocalSearch(p, best.schedule, share(others.empty() ? 1 : 2));
  if (!search.ok()) return search.status();
  res.search = std::move(*search);
  spent += res.search.evaluations;
  for (std::size_t k = 0; k < others.size() + kMaxReseeds; ++k) {
    if (res.search.stop == SearchStop::kBound || res.search.stop == SearchStop::kInterrupted) break;
    const bool restart = k < others.size();
    if (!restart && res.search.stop != SearchStop::kNoMove) break;
    SearchOptions more = share(restart ? static_cast<int>(others.size() - k) : 1);
    if (more.max_evaluations ? *more.max_evaluations == 0 : more.time_limit_s <= 0) break;
    const double incumbent = res.search.sim.objective;
    if (opt.on_improvement) {  // only what beats the incumbent is news
      more.on_improvement = [&](const Schedule& s, const SimResult& r) {
        if (r.objective < incumbent - 1e-9) opt.on_improvement(s, r);
      };
    }
    if (!restart) more.seed = opt.seed + k - others.size() + 1;
    StatusOr<SearchResult> again =
        LocalSearch(p, restart ? *others[k]->schedule : res.search.schedule, more);
    if (!again.ok()) return again.status();
    (restart ? res.restarts : res.reseeds) += 1;
    spent += again->evaluations;
    res.search.evaluations += again->evaluations;
    res.search.seconds += again->seconds;
    res.search.stop = again->stop;
    if (Better(again->sim, res.search.sim)) {
      if (again->sim.objective < res.search.sim.objective - 1e-9) ++res.search.improvements;
      res.search.schedule = std::move(again->schedule);
      res.search.sim = std::move(again->sim);
      if (restart) res.restart_winner = others[k]->name;
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<AutoResult> RunAuto(const Problem& p, const SearchOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  AutoResult res;
  // Seeds are independent: run them in parallel, then pick in registry order
  // (ties to the earlier method), so the choice does not depend on timing.
  std::vector<const MethodInfo*> seeds;
  for (const MethodInfo& m : Methods()) {
    if (m.name != "auto") seeds.push_back(&m);
  }
  // Methods that search their knobs get until half of auto's budget, on a clock
  // that runs from auto's start (BestFitting ignores it in the deterministic mode).
  const auto left = [&] {
    return opt.time_limit_s -
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const auto seed_options = [&] {
    SearchOptions o = opt;
    o.time_limit_s = std::max(0.0, left() - opt.time_limit_s / 2);
    o.on_improvement = nullptr;
    return o;
  };
  // On the clock, a seed not yet started once that half is spent (or after a
  // stop) is skipped when another has a schedule: on large problems every seed
  // takes seconds (100000 micro-batches: 0.7-4.8 s each, 15 s together on one
  // thread). Seeds start in registry order, the list scheduler's first
  // (memory- and offload-aware, most often the best); with an evaluation
  // budget every seed runs.
  std::vector<std::size_t> order(seeds.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(),
                        [&](std::size_t i) { return seeds[i]->name == "list"; });
  std::atomic<std::size_t> next{0};
  std::atomic<bool> scheduled{false};  // some seed has a schedule
  const auto skip = [&] {
    return !opt.max_evaluations && scheduled.load() &&
           (left() <= opt.time_limit_s / 2 || (opt.stop && opt.stop->load()));
  };
  // The list seed is kept with its options: the warm-up tuning starts there.
  std::vector<std::optional<StatusOr<Solution>>> runs(seeds.size());
  std::optional<ListChoice> list;
  const auto run = [&](std::size_t i) -> StatusOr<Solution> {
    if (skip() && seeds[i]->applicable(p).ok()) {
      return Status(StatusCode::kNotApplicable,
                    "not run: the seeds' half of the time limit was spent before it started");
    }
    if (seeds[i]->name != "list") return RunMethod(p, seeds[i]->name, seed_options());
    StatusOr<ListChoice> c = BestListChoice(p, seed_options());
    if (!c.ok()) return Status(c.status().code(), "list: " + c.status().message());
    StatusOr<Solution> s = Certify(p, c->schedule, "list");
    list = std::move(*c);
    return s;
  };
  tbb::task_arena arena(opt.threads > 0 ? opt.threads : tbb::task_arena::automatic);
  arena.execute([&] {
    // One worker a thread, each taking the next seed in `order`.
    const int workers = std::min<int>(arena.max_concurrency(), static_cast<int>(seeds.size()));
    tbb::parallel_for(0, workers, [&](int) {
      for (std::size_t k = next++; k < order.size(); k = next++) {
        runs[order[k]].emplace(run(order[k]));
        if (runs[order[k]]->ok()) scheduled = true;
      }
    });
  });
  std::optional<Solution> warm;
  if (opt.warm_start) {
    StatusOr<Solution> w = Certify(p, *opt.warm_start, "warm start");
    if (!w.ok()) return InvalidArgument("warm_start: " + w.status().message());
    warm = std::move(*w);
  }
  std::optional<Solution> best;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    StatusOr<Solution>& s = *runs[i];
    res.seeds.push_back(
        {seeds[i]->name, s.ok() ? OkStatus() : s.status(), s.ok() ? s->sim.objective : 0.0});
    if (s.ok() && (!best || s->sim.objective < best->sim.objective - 1e-12)) {
      best = *s;
      res.winner = seeds[i]->name;
    }
  }
  if (warm) res.seeds.push_back({"warm start", OkStatus(), warm->sim.objective});
  const auto take_warm = [&] {
    if (warm && (!best || warm->sim.objective < best->sim.objective - 1e-12)) {
      best = *warm;
      res.winner = "warm start";
    }
  };
  if (!best) take_warm();
  if (!best) {
    std::ostringstream why;
    for (const SeedOutcome& o : res.seeds) {
      if (o.status.code() == StatusCode::kInfeasible) why << "\n  " << o.status.message();
    }
    return Infeasible("no method fits this problem's memory limit:" + why.str());
  }
  // Half of what is left tunes the list scheduler's knobs; the rest searches orders.
  std::int64_t evaluations = 0;
  std::optional<std::pair<ListOptions, Solution>> tuned;
  if (list) {
    tuned = ListTuner(p, opt, left() / 2, opt.max_evaluations.value_or(0) / 2, &evaluations)
                .Run(*list, best->sim);
  }
  if (tuned) {
    best = std::move(tuned->second);
    res.winner = "list (tuned: " + Describe(p, tuned->first) + ")";
  }
  take_warm();
  std::vector<Start> starts;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    if (runs[i]->ok())
      starts.push_back({seeds[i]->name, &(*runs[i])->schedule, (*runs[i])->sim.objective});
  }
  if (warm) starts.push_back({"warm start", &warm->schedule, warm->sim.objective});
  const std::int64_t budget_left =
      opt.max_evaluations ? std::max<std::int64_t>(0, *opt.max_evaluations - evaluations) : 0;
  if (Status st = MultiStart(p, opt, left, budget_left, *best, starts, res); !st.ok()) return st;
  StatusOr<Solution> certified = Certify(p, res.search.schedule, "auto");
  if (!certified.ok()) return certified.status();
  res.solution = std::move(*certified);
  return res;
}

}  // namespace optpipe
