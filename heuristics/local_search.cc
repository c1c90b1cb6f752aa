#include "heuristics/local_search.h"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/lower_bound.h"

namespace optpipe {
namespace {

struct Move {
  enum Kind { kSwap, kShift, kOffload, kReload } kind;
  int lane, from, to;  // kOffload: lane = stage, from = micro-batch
};

double Secondary(const SimResult& r) {
  double sum = 0;
  for (double s : r.span) sum += s;
  return sum;
}

bool SameActivation(const Op& a, const Op& b) {
  return a.stage == b.stage && a.microbatch == b.microbatch;
}

class MoveMaker {
 public:
  MoveMaker(const Problem& p) : p_(p), link_(LinkOfDevice(p)) {}

  Move Draw(std::mt19937_64& rng, const Schedule& s) const {
    std::uniform_int_distribution<int> kind(0, 9);
    const int k = kind(rng);
    const bool can_offload = p_.offload_allowed();
    if (can_offload && k == 0) {
      return {Move::kOffload, Uniform(rng, p_.stages()), Uniform(rng, p_.microbatches), 0};
    }
    if (can_offload && k == 1) {
      const int l = Uniform(rng, static_cast<int>(s.copy.size()));
      const int n = static_cast<int>(s.copy[l].size());
      if (n >= 2) {
        const int i = Uniform(rng, n);
        return {Move::kReload, l, i, std::clamp(i + (Uniform(rng, 2) ? 1 : -1), 0, n - 1)};
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
        Rotate(lane, m.from, m.to);
        return out;
      }
      case Move::kReload: {
        auto& lane = out.copy[m.lane];
        if (m.from == m.to || lane[m.from].type != OpType::kR) return std::nullopt;
        if (SameActivation(lane[m.from], lane[m.to])) return std::nullopt;
        Rotate(lane, m.from, m.to);
        return out;
      }
      case Move::kOffload:
        return ToggleOffload(out, cur, m.lane, m.from);
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
    if (s + 1 >= p_.stages()) return std::nullopt;  // the last stage's B follows its F at once
    auto& lane = out.copy[link_[p_.stage_device[s]]];
    const auto is = [&](OpType t) { return [=](const Op& o) { return o == Op{t, s, m}; }; };
    const auto o = std::find_if(lane.begin(), lane.end(), is(OpType::kO));
    if (o != lane.end()) {
      lane.erase(o);
      lane.erase(std::find_if(lane.begin(), lane.end(), is(OpType::kR)));
      return out;
    }
    const OpSpace sp = p_.op_space();
    const double f_end = cur.end[sp.Index(OpType::kF, s, m)];
    const double r_start = cur.start[sp.Index(OpType::kB, s, m)] - (*p_.offload)[s];
    if (r_start - f_end < 2 * (*p_.offload)[s]) return std::nullopt;  // cannot hide a round trip
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

  const Problem& p_;
  const std::vector<int> link_;
};

}  // namespace

bool Better(const SimResult& a, const SimResult& b) {
  if (a.objective < b.objective - 1e-9) return true;
  return a.objective <= b.objective + 1e-9 && Secondary(a) < Secondary(b) - 1e-9;
}

void BuildAndScore(const Problem& p, int n, int threads,
                   const std::function<std::optional<Schedule>(int)>& make,
                   std::vector<std::optional<Schedule>>& cand,
                   std::vector<std::optional<SimResult>>& score) {
  cand.assign(n, std::nullopt);
  score.assign(n, std::nullopt);
  tbb::enumerable_thread_specific<Simulator> sims([&] { return Simulator(p); });
  tbb::task_arena arena(threads > 0 ? threads : tbb::task_arena::automatic);
  arena.execute([&] {
    tbb::parallel_for(0, n, [&](int i) {
      cand[i] = make(i);
      if (!cand[i]) return;
      StatusOr<SimResult> r = sims.local().Run(*cand[i]);
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
  const double bound = ComputeLowerBound(p).value;
  const MoveMaker moves(p);
  const int batch = std::max(1, opt.batch);
  std::vector<Move> drawn(batch);
  std::vector<std::optional<Schedule>> cand;
  std::vector<std::optional<SimResult>> score;
  int idle_rounds = 0;

  for (std::uint64_t round = 0;; ++round) {
    if (res.sim.objective <= bound + 1e-9) {
      res.stop = SearchStop::kBound;
      break;
    }
    if (opt.stop && opt.stop->load()) {
      res.stop = SearchStop::kInterrupted;
      break;
    }
    if (elapsed() >= opt.time_limit_s) {
      res.stop = SearchStop::kTimeLimit;
      break;
    }
    if (opt.max_evaluations && res.evaluations >= *opt.max_evaluations) {
      res.stop = SearchStop::kBudget;
      break;
    }
    if (idle_rounds > 200) {
      res.stop = SearchStop::kNoMove;
      break;
    }
    // Draw the batch sequentially from a per-round seed: thread-count independent.
    std::mt19937_64 rng(opt.seed * 0x9E3779B97F4A7C15ULL + round);
    int n = batch;
    if (opt.max_evaluations)
      n = static_cast<int>(std::min<std::int64_t>(n, *opt.max_evaluations - res.evaluations));
    for (int i = 0; i < n; ++i) drawn[i] = moves.Draw(rng, res.schedule);
    BuildAndScore(
        p, n, opt.threads, [&](int i) { return moves.Apply(res.schedule, res.sim, drawn[i]); },
        cand, score);
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (cand[i]) ++res.evaluations;
      if (score[i] && Better(*score[i], best < 0 ? res.sim : *score[best])) best = i;
    }
    if (best < 0) {
      ++idle_rounds;
      continue;
    }
    idle_rounds = 0;
    const bool strictly = score[best]->objective < res.sim.objective - 1e-9;
    res.schedule = std::move(*cand[best]);
    res.sim = std::move(*score[best]);
    if (strictly) {
      ++res.improvements;
      if (opt.on_improvement) opt.on_improvement(res.schedule, res.sim);
    }
  }
  res.seconds = elapsed();
  return res;
}

}  // namespace optpipe
