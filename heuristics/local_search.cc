#include "heuristics/local_search.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/dag.h"
#include "core/lower_bound.h"
#include "heuristics/scorer.h"

namespace optpipe {
namespace {

struct Move {
  enum Kind {
    kSwap,
    kShift,
    kOffload,
    kOffloadAdvance,
    kKeepDelay,
    kCopy,
    kHold,
    kHoldReload
  } kind;
  // kOffload*: lane = stage, from = micro-batch; kHold: from = op index;
  // kCopy, kHoldReload: lane = host link, from (to) = place on it
  int lane, from, to;
};

// Ties on the objective go to the lower sum of device spans, then to the
// lower sum of op ends: on a plateau of equal makespans the walk moves
// towards schedules with more slack to take the next improvement.
double Secondary(const SimResult& r) {
  double sum = 0;
  for (double s : r.span) sum += s;
  return sum;
}
double Tertiary(const SimResult& r) {
  double sum = 0;
  for (double e : r.end) {
    if (!std::isnan(e)) sum += e;
  }
  return sum;
}

bool SameActivation(const Op& a, const Op& b) {
  return a.stage == b.stage && a.microbatch == b.microbatch;
}

class MoveMaker {
 public:
  MoveMaker(const Problem& p)
      : p_(p),
        link_(LinkOfDevice(p)),
        none_offloaded_(static_cast<std::size_t>(p.stages()) * p.microbatches, 0) {}

  Move Draw(std::mt19937_64& rng, const Schedule& s) const {
    std::uniform_int_distribution<int> kind(0, 9);
    const int k = kind(rng);
    if (k == 9 && !s.release.empty()) {  // a few probes for an op with a hold
      for (int probe = 0; probe < 8; ++probe) {
        const int i = Uniform(rng, static_cast<int>(s.release.size()));
        if (s.release[i] > 0) return {Move::kHold, -1, i, 0};
      }
    }
    const bool can_offload = p_.offload_allowed();
    if (can_offload && k <= 1) {
      const Move::Kind kind = k == 0                 ? Move::kOffload
                              : Uniform(rng, 2) == 0 ? Move::kOffloadAdvance
                                                     : Move::kKeepDelay;
      return {kind, Uniform(rng, p_.stages()), Uniform(rng, p_.microbatches), 0};
    }
    if (can_offload && k == 2) {
      const int l = Uniform(rng, static_cast<int>(s.copy.size()));
      const int n = static_cast<int>(s.copy[l].size());
      const int i = Uniform(rng, n);
      if (n >= 1 && Uniform(rng, 2) == 0) return {Move::kHoldReload, l, i, 0};
      if (n >= 2) {
        return {Move::kCopy, l, i, std::clamp(i + (Uniform(rng, 2) ? 1 : -1), 0, n - 1)};
      }
    }
    const int d = Uniform(rng, p_.devices);
    const int n = static_cast<int>(s.compute[d].size());
    if (n < 2) return {Move::kSwap, d, 0, 0};
    const int i = Uniform(rng, n - 1);
    if (k < 6) return {Move::kSwap, d, i, i + 1};
    const int span = 2 + Uniform(rng, 7);
    return {Move::kShift, d, i, std::clamp(i + (Uniform(rng, 2) ? span : -span), 0, n - 1)};
  }

  // The schedule after the move, or nullopt when the move is a no-op or
  // certainly invalid (an op before its own activation's predecessor).
  std::optional<Schedule> Apply(const Schedule& s, const SimResult& cur, const Move& m) const {
    Schedule out = s;
    switch (m.kind) {
      case Move::kSwap:
      case Move::kShift: {
        auto& lane = out.compute[m.lane];
        if (m.from == m.to) return std::nullopt;
        if (m.kind == Move::kSwap && SameActivation(lane[m.from], lane[m.to])) return std::nullopt;
        if (m.kind == Move::kSwap) SwapCopies(out, lane[m.from], lane[m.to]);
        Rotate(lane, m.from, m.to);
        return out;
      }
      case Move::kCopy: {
        auto& lane = out.copy[m.lane];
        if (m.from == m.to) return std::nullopt;
        if (SameActivation(lane[m.from], lane[m.to])) return std::nullopt;
        Rotate(lane, m.from, m.to);
        return out;
      }
      case Move::kOffload:
        return ToggleOffload(out, cur, m.lane, m.from);
      case Move::kOffloadAdvance:
        return OffloadAdvance(out, cur, m.lane, m.from);
      case Move::kKeepDelay:
        return KeepDelay(out, cur, m.lane, m.from);
      case Move::kHold:  // let a held op start as soon as it can
        out.release[m.from] = 0;
        return out;
      case Move::kHoldReload:
        return HoldReload(out, cur, out.copy[m.lane][m.from]);
    }
    return std::nullopt;
  }

 private:
  static int Uniform(std::mt19937_64& rng, int n) {
    return n <= 1 ? 0 : std::uniform_int_distribution<int>(0, n - 1)(rng);
  }
  static void Rotate(std::vector<Op>& lane, int from, int to) {
    if (from < to) {
      std::rotate(lane.begin() + from, lane.begin() + from + 1, lane.begin() + to + 1);
    } else {
      std::rotate(lane.begin() + to, lane.begin() + from, lane.begin() + from + 1);
    }
  }

  // Keep an offloaded activation, or offload a kept one: O goes where the
  // link is at F's end, R where it must start to land just before B.
  std::optional<Schedule> ToggleOffload(Schedule& out, const SimResult& cur, int s, int m) const {
    auto& lane = out.copy[link_[p_.stage_device[s]]];
    const auto is = [&](OpType t) { return [=](const Op& o) { return o == Op{t, s, m}; }; };
    const auto o = std::find_if(lane.begin(), lane.end(), is(OpType::kO));
    // The last stage's B may follow its F at once: offloading it never pays
    // (a start that offloads it may still keep it).
    if (o == lane.end() && s + 1 >= p_.stages()) return std::nullopt;
    const OpSpace sp = p_.op_space();
    if (o != lane.end()) {
      lane.erase(o);
      lane.erase(std::find_if(lane.begin(), lane.end(), is(OpType::kR)));
      if (!out.release.empty()) {  // no stale hold if it is offloaded again
        out.release[sp.Index(OpType::kO, s, m)] = 0;
        out.release[sp.Index(OpType::kR, s, m)] = 0;
      }
      return out;
    }
    const double f_end = cur.end[sp.Index(OpType::kF, s, m)];
    const double r_start = cur.start[sp.Index(OpType::kB, s, m)] - (*p_.offload)[s];
    const auto position = [&](double t) {
      return std::find_if(lane.begin(), lane.end(),
                          [&](const Op& q) { return cur.start[sp.Index(q)] >= t; });
    };
    lane.insert(position(f_end), Op{OpType::kO, s, m});
    // Recompute after the insertion: the O shifted later positions by one.
    auto r_pos = std::find_if(lane.begin(), lane.end(), [&](const Op& q) {
      return !(q == Op{OpType::kO, s, m}) && cur.start[sp.Index(q)] >= r_start;
    });
    const auto o_pos = std::find_if(lane.begin(), lane.end(), is(OpType::kO));
    if (r_pos < o_pos) r_pos = o_pos + 1;
    lane.insert(r_pos, Op{OpType::kR, s, m});
    return out;
  }

  // Hold reload r to land just when its backward could start without it (its
  // other predecessors and the op before it on the device, as `cur` has
  // them): a reload that starts as soon as its link is free may take the
  // memory a forward needs. Repeated, it follows the backward as that moves
  // (earlier too, where the hold delays it).
  std::optional<Schedule> HoldReload(Schedule& out, const SimResult& cur, const Op& r) const {
    if (r.type != OpType::kR) return std::nullopt;
    const OpSpace sp = p_.op_space();
    const Op b{OpType::kB, r.stage, r.microbatch};
    double ready = 0;
    ForEachPredecessor(p_, none_offloaded_, b, [&](const Op& q, double lag) {
      ready = std::max(ready, cur.end[sp.Index(q)] + lag);
    });
    const auto& lane = out.compute[p_.stage_device[r.stage]];
    const auto at = std::find(lane.begin(), lane.end(), b);
    if (at != lane.begin() && at != lane.end())
      ready = std::max(ready, cur.end[sp.Index(*(at - 1))]);
    const int i = sp.Index(r);
    const double hold = std::max(0.0, ready - Duration(p_, r));
    // Later, or earlier where a hold keeps it from starting sooner.
    if (!(hold > cur.start[i] + 1e-9 || (hold < cur.start[i] - 1e-9 && out.ReleaseOf(i) > 0))) {
      return std::nullopt;
    }
    if (out.release.empty()) out.release.assign(sp.size(), 0.0);
    out.release[i] = hold;
    return out;
  }

  // Two forwards (backwards) that trade places trade their offloads (reloads)
  // too, when both go to the host over one link: the copies keep the compute
  // order, which a fixed link order would otherwise deadlock against.
  void SwapCopies(Schedule& out, const Op& a, const Op& b) const {
    if (a.type != b.type || (a.type != OpType::kF && a.type != OpType::kB)) return;
    const int la = link_[p_.stage_device[a.stage]], lb = link_[p_.stage_device[b.stage]];
    if (la != lb) return;
    const OpType copy = a.type == OpType::kF ? OpType::kO : OpType::kR;
    auto& lane = out.copy[la];
    const auto x = std::find(lane.begin(), lane.end(), Op{copy, a.stage, a.microbatch});
    const auto y = std::find(lane.begin(), lane.end(), Op{copy, b.stage, b.microbatch});
    if (x == lane.end() || y == lane.end()) return;
    // Swapping O(a) with O(b) may put an O after its own R (or an R before
    // its O): only when both stay in order.
    const auto pos = [&](OpType t, const Op& o) {
      return std::find(lane.begin(), lane.end(), Op{t, o.stage, o.microbatch}) - lane.begin();
    };
    std::iter_swap(x, y);
    if (pos(OpType::kO, a) > pos(OpType::kR, a) || pos(OpType::kO, b) > pos(OpType::kR, b))
      std::iter_swap(x, y);
  }

  // Offload a kept activation (s,m) and move the device's next forward from
  // after B(s,m) to before it: the memory the offload frees lets the next
  // micro-batch in early (one move, since each alone rarely pays).
  std::optional<Schedule> OffloadAdvance(Schedule& out, const SimResult& cur, int s, int m) const {
    const auto& copies = out.copy[link_[p_.stage_device[s]]];
    if (std::find(copies.begin(), copies.end(), Op{OpType::kO, s, m}) != copies.end())
      return std::nullopt;
    if (!ToggleOffload(out, cur, s, m)) return std::nullopt;
    auto& lane = out.compute[p_.stage_device[s]];
    const auto b = std::find(lane.begin(), lane.end(), Op{OpType::kB, s, m});
    const auto f = std::find_if(b, lane.end(), [](const Op& q) { return q.type == OpType::kF; });
    if (b == lane.end() || f == lane.end()) return std::nullopt;
    Rotate(lane, static_cast<int>(f - lane.begin()), static_cast<int>(b - lane.begin()));
    return out;
  }

  // The converse: keep an offloaded activation (s,m) and move the device's
  // last forward between F(s,m) and B(s,m) to just after B(s,m), leaving the
  // room the kept activation takes (a link too busy to carry every
  // activation gains its round trip).
  std::optional<Schedule> KeepDelay(Schedule& out, const SimResult& cur, int s, int m) const {
    const auto& copies = out.copy[link_[p_.stage_device[s]]];
    if (std::find(copies.begin(), copies.end(), Op{OpType::kO, s, m}) == copies.end())
      return std::nullopt;
    if (!ToggleOffload(out, cur, s, m)) return std::nullopt;
    auto& lane = out.compute[p_.stage_device[s]];
    const auto f0 = std::find(lane.begin(), lane.end(), Op{OpType::kF, s, m});
    const auto b = std::find(f0, lane.end(), Op{OpType::kB, s, m});
    if (b == lane.end()) return std::nullopt;
    const auto f = std::find_if(std::make_reverse_iterator(b), std::make_reverse_iterator(f0 + 1),
                                [](const Op& q) { return q.type == OpType::kF; });
    if (f == std::make_reverse_iterator(f0 + 1)) return std::nullopt;
    Rotate(lane, static_cast<int>(f.base() - 1 - lane.begin()), static_cast<int>(b - lane.begin()));
    return out;
  }

  const Problem& p_;
  const std::vector<int> link_;
  const std::vector<char> none_offloaded_;  // a B's predecessors but its reload
};

}  // namespace

bool Better(const SimResult& a, const SimResult& b) {
  if (a.objective < b.objective - 1e-9) return true;
  if (a.objective > b.objective + 1e-9) return false;
  const double sa = Secondary(a), sb = Secondary(b);
  if (sa < sb - 1e-9) return true;
  if (sa > sb + 1e-9) return false;
  return Tertiary(a) < Tertiary(b) - 1e-9;
}

Scorer::Scorer(const Problem& p, int threads)
    : arena_(threads > 0 ? threads : tbb::task_arena::automatic), sims_([&p] {
        Simulator sim(p);
        sim.set_describe_deadlocks(false);
        return sim;
      }) {}

void Scorer::Score(int n, const std::function<std::optional<Schedule>(int)>& make,
                   std::vector<std::optional<Schedule>>& cand,
                   std::vector<std::optional<SimResult>>& score, const Schedule* base,
                   const SimResult* base_run) {
  cand.assign(n, std::nullopt);
  score.assign(n, std::nullopt);
  arena_.execute([&] {
    tbb::parallel_for(0, n, [&](int i) {
      cand[i] = make(i);
      if (!cand[i]) return;
      Simulator& sim = sims_.local();
      StatusOr<SimResult> r = base ? sim.RunChanged(*cand[i], *base, *base_run) : sim.Run(*cand[i]);
      if (r.ok()) score[i] = std::move(*r);
    });
  });
}

const char* ToString(SearchStop s) {
  switch (s) {
    case SearchStop::kBound:
      return "bound";
    case SearchStop::kTimeLimit:
      return "time_limit";
    case SearchStop::kBudget:
      return "budget";
    case SearchStop::kInterrupted:
      return "interrupted";
    case SearchStop::kNoMove:
      return "no_move";
  }
  return "?";
}

StatusOr<SearchResult> LocalSearch(const Problem& p, const Schedule& start,
                                   const SearchOptions& opt) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  StatusOr<SimResult> first = Simulate(p, start);
  if (!first.ok()) return first.status();
  SearchResult res{start, std::move(*first), 0, 1, 0, SearchStop::kNoMove, 0};
  res.start_objective = res.sim.objective;
  // Holds pin ops the moves would shift: drop them if that costs nothing.
  if (!start.release.empty()) {
    Schedule free = start;
    free.release.clear();
    ++res.evaluations;
    if (StatusOr<SimResult> r = Simulate(p, free); r.ok() && !Better(res.sim, *r)) {
      res.schedule = std::move(free);
      res.sim = std::move(*r);
    }
  }
  const double bound = AtGrain(p, std::max(ComputeLowerBound(p).value, opt.known_bound));
  const MoveMaker moves(p);
  const int batch = std::max(1, opt.batch);
  std::vector<Move> drawn(batch);
  std::vector<std::optional<Schedule>> cand;
  std::vector<std::optional<SimResult>> score;
  // The walk: descends from the incumbent; at a local optimum (kIdleRounds
  // rounds without a better neighbour) it restarts from the incumbent kicked
  // by a few random moves (iterated local search), until a limit or
  // kMaxKicks kicks in a row that found nothing better.
  constexpr int kIdleRounds = 20, kMaxKicks = 300, kKickMoves = 4, kKickDraws = 8;
  Scorer scorer(p, opt.threads);
  Simulator kick_sim(p);
  kick_sim.set_describe_deadlocks(false);
  Schedule walk = res.schedule;
  SimResult walk_sim = res.sim;
  int idle_rounds = 0, kicks = 0;

  for (std::uint64_t round = 0;; ++round) {
    if (res.sim.objective <= bound + 1e-9) {
      res.stop = SearchStop::kBound;
      break;
    }
    if (opt.stop && opt.stop->load()) {
      res.stop = SearchStop::kInterrupted;
      break;
    }
    if (!opt.max_evaluations && elapsed() >= opt.time_limit_s) {
      res.stop = SearchStop::kTimeLimit;
      break;
    }
    if (opt.max_evaluations && res.evaluations >= *opt.max_evaluations) {
      res.stop = SearchStop::kBudget;
      break;
    }
    // Draw the batch sequentially from a per-round seed: thread-count independent.
    std::mt19937_64 rng(opt.seed * 0x9E3779B97F4A7C15ULL + round);
    if (idle_rounds >= kIdleRounds) {
      if (++kicks > kMaxKicks) {
        res.stop = SearchStop::kNoMove;
        break;
      }
      // A kick: 1..kKickMoves moves applied together, through orders that
      // may not run on their own (a reload placed before the offload that
      // makes room for it); the first of a few draws that runs is taken.
      walk = res.schedule;
      walk_sim = res.sim;
      for (int attempt = 0; attempt < kKickDraws; ++attempt) {
        Schedule next = res.schedule;
        const int count = 1 + static_cast<int>(rng() % kKickMoves);
        for (int k = 0; k < count; ++k) {
          if (std::optional<Schedule> s = moves.Apply(next, res.sim, moves.Draw(rng, next)))
            next = std::move(*s);
        }
        ++res.evaluations;
        if (StatusOr<SimResult> r = kick_sim.RunChanged(next, res.schedule, res.sim); r.ok()) {
          walk = std::move(next);
          walk_sim = std::move(*r);
          break;
        }
      }
      idle_rounds = 0;
      continue;
    }
    int n = batch;
    if (opt.max_evaluations)
      n = static_cast<int>(std::min<std::int64_t>(n, *opt.max_evaluations - res.evaluations));
    for (int i = 0; i < n; ++i) drawn[i] = moves.Draw(rng, walk);
    scorer.Score(
        n, [&](int i) { return moves.Apply(walk, walk_sim, drawn[i]); }, cand, score, &walk,
        &walk_sim);
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (cand[i]) ++res.evaluations;
      if (score[i] && Better(*score[i], best < 0 ? walk_sim : *score[best])) best = i;
    }
    if (best < 0) {
      ++idle_rounds;
      continue;
    }
    idle_rounds = 0;
    walk = std::move(*cand[best]);
    walk_sim = std::move(*score[best]);
    if (Better(walk_sim, res.sim)) {
      const bool strictly = walk_sim.objective < res.sim.objective - 1e-9;
      res.schedule = walk;
      res.sim = walk_sim;
      kicks = 0;
      if (strictly) {
        ++res.improvements;
        if (opt.on_improvement) {
          res.sim = *kick_sim.Run(res.schedule);  // in full, peak memory included
          opt.on_improvement(res.schedule, res.sim);
        }
      }
    }
  }
  // The walk's runs resumed from their first change: the result in full.
  StatusOr<SimResult> final_run = kick_sim.Run(res.schedule);
  if (!final_run.ok()) return final_run.status();
  res.sim = std::move(*final_run);
  res.seconds = elapsed();
  return res;
}

}  // namespace optpipe
