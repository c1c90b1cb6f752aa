#include "exact/device_search.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

namespace optpipe::device_search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Where a lane stands: how many of each op are placed (kept activations B'd
// in F order, offloaded ones copied and B'd in F order, W in B order) and
// when they end.
struct LaneState {
  int nF = 0, nO = 0, nR = 0, nBk = 0, nBo = 0, nW = 0;
  std::vector<int> kept, offl;     // activations of each class, in F order
  std::vector<double> fend;        // per activation
  std::vector<double> oend, rend;  // per offloaded activation, in class order
  std::vector<double> bend, wend;  // per B (W) in B order
  int nB() const { return nBk + nBo; }
};

struct State {
  std::vector<LaneState> l;
  double t = 0;                              // last start
  std::array<double, kMaxGroup> cf{}, lf{};  // each device's compute and link free
  double obj = 0;                            // least makespan of what is placed
};

class Search {
 public:
  // The search stops (and bounds what it left) after max_nodes nodes, at
  // `deadline` or on `stop`, whichever comes first.
  Search(const Relaxed& r, std::int64_t max_nodes, std::chrono::steady_clock::time_point deadline,
         const std::atomic<bool>* stop)
      : r_(r), max_nodes_(max_nodes), deadline_(deadline), stop_(stop) {
    double span = 1.0;
    for (const Lane& ln : r.lanes) span = std::max(span, ln.rF.back() + ln.b + ln.qB.back());
    tol_ = 1e-9 * span;
  }

  // The relaxation's least makespan, or a lower bound on it when the budget
  // runs out. Probes upward from the root's bound: a probe at T searches
  // only for completions ending before T, which prunes far more than a search
  // whose first incumbents are poor. A probe that finds none proves T; one
  // that finds some and ends has found the least (with a grain, up to the
  // grain: none ends a grain earlier); one cut short bounds by the
  // least node it left. After a probe proves T the next one goes twice as far
  // above the proven bound; after one is cut short, one grain above it (half
  // as far without a grain), never above a completion found (each probe may
  // take half of the nodes left, the least target left all of them: cut
  // short there, the search ends). With a grain g every target is a multiple
  // of it: "none before k g" proves k g for the problem (see Up). No target
  // lies above `upper`, as if a probe had found a completion there.
  double Run(double known, double upper) {
    const State root_state = Root();
    const double root = NodeBound(root_state);
    double lo = std::max(root, known);  // proven
    if (lo >= upper - tol_) return lo;
    const double g = r_.grain;
    double step = std::max({1e-2 * lo, 1e3 * tol_, g});
    double found = upper;  // the least completion any probe found
    while (true) {
      // Past twice the root's bound, one last search without a target (it
      // also tells a relaxation with no schedule at all: infinity).
      double target = lo + step > 2 * std::max(root, 1.0) ? kInf : lo + step;
      target = std::min(Up(target), found);
      // Half of the nodes left; all of them for the least target left (half
      // would go unused) and for the upper end, which proves a known
      // schedule optimal where the probes below it gain a grain or two.
      const bool all =
          (g > 0 && target <= Up(lo) + g + tol_) || (upper < kInf && target >= upper - tol_);
      probe_limit_ = nodes_ + std::max<std::int64_t>(1, (max_nodes_ - nodes_) / (all ? 1 : 2));
      best_ = target;
      open_min_ = kInf;
      cut_short_ = false;
      memo_.clear();
      stored_ = 0;
      Dfs(root_state);
      if (best_ < target) found = std::min(found, best_);
      if (!cut_short_) {
        // The least makespan (infinity: none) when it ran to its end below the target.
        if (best_ < target || target == kInf || target >= found) return best_;
        lo = target - tol_;
        step *= 2;
        continue;
      }
      exhausted_ = true;
      lo = std::max(lo, std::min(best_, open_min_));
      if (nodes_ >= max_nodes_ || OutOfTime() || found <= lo + tol_) return lo;
      if (g > 0) {
        if (target <= Up(lo) + g + tol_) return lo;  // it was the least target left
        step = g;
      } else {
        step = std::min(step, found - lo) / 2;
        if (step < 1e3 * tol_) return lo;
      }
    }
  }
  bool finished() const { return !exhausted_; }
  std::int64_t nodes() const { return nodes_; }

 private:
  State Root() const {
    State s;
    s.l.resize(r_.lanes.size());
    return s;
  }
  // Memory resident on device d at x >= s.t: every allocation has started by then.
  double Used(const State& s, int d, double x) const {
    double used = 0;
    for (std::size_t i = 0; i < r_.lanes.size(); ++i) {
      const Lane& ln = r_.lanes[i];
      const LaneState& q = s.l[i];
      if (ln.dev != d) continue;
      used += q.nF * ln.a + q.nR * ln.o;
      for (int j = 0; j < q.nO; ++j) used -= q.oend[j] <= x ? ln.o : 0.0;
      for (int j = 0; j < q.nB(); ++j) used -= q.bend[j] <= x ? ln.freed_b : 0.0;
      for (int j = 0; j < q.nW; ++j) used -= q.wend[j] <= x ? ln.a - ln.freed_b : 0.0;
    }
    return used;
  }
  // The earliest start >= x at which `amount` more fits; what is resident
  // only falls after s.t, so the first time it fits it fits for good.
  double Fits(const State& s, int d, double x, double amount) const {
    if (Used(s, d, x) + amount <= r_.room[d] + tol_) return x;
    std::vector<double> times;
    for (std::size_t i = 0; i < r_.lanes.size(); ++i) {
      const LaneState& q = s.l[i];
      if (r_.lanes[i].dev != d) continue;
      times.insert(times.end(), q.oend.begin(), q.oend.end());
      times.insert(times.end(), q.bend.begin(), q.bend.end());
      times.insert(times.end(), q.wend.begin(), q.wend.end());
    }
    std::sort(times.begin(), times.end());
    for (double y : times) {
      if (y > x && Used(s, d, y) + amount <= r_.room[d] + tol_) return y;
    }
    return kInf;
  }

  bool Done(const State& s) const {
    for (const LaneState& q : s.l) {
      if (q.nF < r_.M || q.nB() < r_.M || (r_.split && q.nW < r_.M)) return false;
    }
    return true;
  }

  // The least makespan of any completion of s (never above the true one).
  double NodeBound(const State& s) const {
    const int M = r_.M;
    double lb = s.obj;
    // Per device: compute still to run, least tail after a lane's last B, and
    // the copies its offloaded activations still owe, with the least tail
    // after a lane's last R; per link, the copies it still carries.
    std::array<double, kMaxGroup> work{}, copies{}, link_copies{};
    std::array<double, kMaxGroup> last_b, last_r, link_last_r;
    last_b.fill(kInf);
    last_r.fill(kInf);
    link_last_r.fill(kInf);
    for (std::size_t i = 0; i < r_.lanes.size(); ++i) {
      const Lane& ln = r_.lanes[i];
      const LaneState& q = s.l[i];
      const int d = ln.dev;
      const double c0 = std::max(s.cf[d], s.t);
      work[d] += (M - q.nF) * ln.f + (M - q.nB()) * ln.b + (M - q.nW) * ln.w;
      if (q.nB() < M) last_b[d] = std::min(last_b[d], ln.qB[0]);
      // The forwards still to run, one after another from their releases.
      double x = c0;
      for (int k = q.nF; k < M; ++k) x = std::max(x, ln.rF[k]) + ln.f;
      if (q.nF < M) lb = std::max(lb, x + ln.gap + ln.b + ln.qB[0]);
      // The copies still owed by the offloaded activations.
      const int n_off = static_cast<int>(q.offl.size());
      const double owed = (n_off - q.nO + n_off - q.nR) * ln.t;
      copies[d] += owed;
      link_copies[ln.link] += owed;
      if (q.nR < n_off) {
        last_r[d] = std::min(last_r[d], ln.b + ln.qB[0]);
        link_last_r[ln.link] = std::min(link_last_r[ln.link], ln.b + ln.qB[0]);
      }
      // Every placed activation still waiting for its B.
      for (int j = q.nBk; j < static_cast<int>(q.kept.size()); ++j)
        lb = std::max(lb, q.fend[q.kept[j]] + ln.gap + ln.b + ln.qB[0]);
    }
    for (int d = 0; d < r_.devices; ++d) {
      const double tail = !r_.split && last_b[d] < kInf ? last_b[d] : 0.0;
      lb = std::max({lb, std::max(s.cf[d], s.t) + work[d] + tail,
                     MemoryTimeBound(s, d, copies[d], last_r[d])});
      if (r_.slots[d] * r_.a_min[d] < r_.room[d] - tol_)
        lb = std::max(lb, MemoryTimeBound(s, d, copies[d], last_r[d], true));
    }
    for (int l = 0; l < r_.links; ++l) {
      if (link_last_r[l] < kInf)
        lb = std::max(lb, std::max(s.lf[l], s.t) + link_copies[l] + link_last_r[l]);
    }
    return lb;
  }

  // From s.t on the device holds at most its room at a time: what W frees
  // until the end at the latest, the rest until its last B ends, at least the
  // least tail before the end. Each forward still to run holds from its start
  // at least a over f + gap + b kept (and what W frees over w), or, offloaded,
  // its offloadable part only over f + 2t + b, for 2t of the link, which runs
  // one copy at a time after the copies owed; the activations placed hold at
  // least what is left of theirs. The least makespan over a fractional choice
  // of how many of each lane's to keep (keeping trades link time for
  // memory-time).
  // For device d, with only its own copies on its link. Counting `whole`
  // activations instead: at most `slots` of them resident at a time (room over
  // the least activation, rounded down), each from its forward's start to its
  // offload's end and from its reload's start to its backward's end (what
  // stays on the device between, and after B until W, not counted). Stronger
  // where the room holds a fraction more than a whole number of activations.
  double MemoryTimeBound(const State& s, int d, double copies, double last_r,
                         bool whole = false) const {
    const double room = whole ? r_.slots[d] : r_.room[d];
    if (!(room > 0)) return 0;
    const int M = r_.M;
    double held = 0;    // memory-time from s.t on until B's end, at the least
    double held_w = 0;  // and after it, until W's end
    double link = std::max(s.lf[r_.link_of[d]], s.t) + copies;
    // Least tail after the link's last copy (an R), where one is owed: it
    // then ends the link whatever the forwards still to run choose.
    double after_r = last_r;
    double tail = kInf;  // least time after the last B's end
    struct Trade {
      double n, mem, link;  // forwards; memory-time added and link time saved by keeping one
    };
    std::vector<Trade> trades;
    for (std::size_t i = 0; i < r_.lanes.size(); ++i) {
      const Lane& ln = r_.lanes[i];
      const LaneState& q = s.l[i];
      if (ln.dev != d) continue;
      if (q.nB() < M) tail = std::min(tail, ln.qB[0]);
      const double a = whole ? 1.0 : ln.a, o = whole ? 1.0 : ln.o,
                   stays = whole ? 0.0 : ln.a - ln.o;
      const double life = ln.f + ln.gap + ln.b;
      const double w_part = r_.split && !whole ? (ln.a - ln.freed_b) * ln.w : 0.0;
      for (int j = q.nBk; j < static_cast<int>(q.kept.size()); ++j) {
        held += a * std::max(0.0, q.fend[q.kept[j]] + ln.gap + ln.b - s.t);
      }
      const int n_off = static_cast<int>(q.offl.size());
      for (int j = q.nO; j < n_off; ++j) {
        held += o * (std::max(q.fend[q.offl[j]], s.t) + ln.t - s.t);
      }
      held += (n_off - q.nR) * o * (ln.t + ln.b);
      const int n = M - q.nF;
      if (n == 0) continue;
      held_w += n * w_part;
      const double keep = a * life;
      const double out = o * (ln.f + 2 * ln.t + ln.b) + stays * life;
      if (!ln.offload || out >= keep || ln.t <= 0) {
        held += n * keep;
        continue;
      }
      held += n * out;
      link += n * 2 * ln.t;
      if (last_r < kInf) after_r = std::min(after_r, ln.b + ln.qB[0]);
      trades.push_back({static_cast<double>(n), keep - out, 2 * ln.t});
    }
    if (after_r < kInf) link += after_r;
    // What W frees may be held until the end, the rest only until the
    // last B's: at least the least tail before the end.
    double mem = s.t + held / room + std::max(tail == kInf ? 0.0 : tail, held_w / room);
    // Keep the forwards that save the most link time per memory-time first.
    std::sort(trades.begin(), trades.end(),
              [](const Trade& x, const Trade& y) { return x.link * y.mem > y.link * x.mem; });
    for (const Trade& tr : trades) {
      if (mem >= link) break;
      const double per = tr.mem / room + tr.link;  // closes the difference per forward kept
      const double x = std::min(tr.n, (link - mem) / per);
      mem += x * tr.mem / room;
      link -= x * tr.link;
    }
    return std::max(mem, link);
  }

  // States of different counts never share a key: per lane six counts of at
  // most 24 and how many of its forwards were offloaded. Which ones is left out:
  // a completion takes the pending activations of each class in forward
  // order and the forwards of the next lane by count, so what it depends on
  // is their times in that order (Times), whichever micro-batches they are.
  std::string Key(const State& s) const {
    std::string k;
    for (const LaneState& q : s.l) {
      for (int v : {q.nF, q.nO, q.nR, q.nBk, q.nBo, q.nW, static_cast<int>(q.offl.size())})
        k.push_back(static_cast<char>(v));
    }
    return k;
  }
  // What a completion of s depends on. Ops yet to place start no earlier than
  // s.t, so a time before it counts as s.t, except where a later op may start
  // a delay after it: a forward's end (its backward, fend + gap, and the next
  // lane's forward, + df) and a backward's end (the previous lane's, + db).
  // The forwards' ends by role: those the next lane's forwards still wait
  // for, by count, then the kept and the offloaded activations still waiting
  // for their backwards, each class in forward order.
  std::vector<double> Times(const State& s) const {
    std::vector<double> v = {s.t, s.obj};
    for (int d = 0; d < r_.devices; ++d) v.push_back(std::max(s.cf[d], s.t));
    for (int l = 0; l < r_.links; ++l) v.push_back(std::max(s.lf[l], s.t));
    for (std::size_t i = 0; i < r_.lanes.size(); ++i) {
      const Lane& ln = r_.lanes[i];
      const LaneState& q = s.l[i];
      if (i + 1 < r_.lanes.size()) {
        const double df = r_.lanes[i + 1].df;
        for (int k = s.l[i + 1].nF; k < q.nF; ++k) v.push_back(std::max(q.fend[k], s.t - df));
      }
      for (int j = q.nBk; j < static_cast<int>(q.kept.size()); ++j)
        v.push_back(std::max(q.fend[q.kept[j]], s.t - ln.gap));
      for (int j = q.nBo; j < static_cast<int>(q.offl.size()); ++j)
        v.push_back(std::max(q.fend[q.offl[j]], s.t - ln.gap));
      for (double x : q.bend) v.push_back(std::max(x, s.t - ln.db));
      for (const auto* arr : {&q.oend, &q.rend, &q.wend}) {
        for (double x : *arr) v.push_back(std::max(x, s.t));
      }
    }
    return v;
  }
  // True when a visited state with the same counts is no later anywhere.
  bool Dominated(const State& s) {
    std::vector<double> v = Times(s);
    auto& seen = memo_[Key(s)];
    for (const std::vector<double>& u : seen) {
      bool all = true;
      for (std::size_t i = 0; i < v.size() && all; ++i) all = u[i] <= v[i] + tol_;
      if (all) return true;
    }
    if (stored_ < kMaxStored) {
      std::erase_if(seen, [&](const std::vector<double>& u) {
        for (std::size_t i = 0; i < v.size(); ++i)
          if (v[i] > u[i] + tol_) return false;
        --stored_;
        return true;
      });
      seen.push_back(std::move(v));
      ++stored_;
    }
    return false;
  }

  enum class Kind { kFKept, kFOff, kO, kR, kBKept, kBOff, kW };
  struct Move {
    Kind kind;
    int lane;
    double start;
  };

  std::vector<Move> Moves(const State& s) const {
    const int M = r_.M, V = static_cast<int>(r_.lanes.size());
    std::vector<Move> out;
    int offloads = 0;
    for (const LaneState& q : s.l) offloads += static_cast<int>(q.offl.size());
    for (int i = 0; i < V; ++i) {
      const Lane& ln = r_.lanes[i];
      const LaneState& q = s.l[i];
      const double c0 = std::max(s.t, s.cf[ln.dev]), l0 = std::max(s.t, s.lf[ln.link]);
      // The k-th F waits for the previous lane's k-th, the k-th B for the next lane's.
      if (q.nF < M && (i == 0 || s.l[i - 1].nF > q.nF)) {
        double x = std::max(c0, ln.rF[q.nF]);
        if (i > 0) x = std::max(x, s.l[i - 1].fend[q.nF] + ln.df);
        x = Fits(s, ln.dev, x, ln.a);
        if (x < kInf) {
          out.push_back({Kind::kFKept, i, x});
          if (ln.offload && offloads < r_.max_offloads) out.push_back({Kind::kFOff, i, x});
        }
      }
      const int n_off = static_cast<int>(q.offl.size());
      if (q.nO < n_off) out.push_back({Kind::kO, i, std::max(l0, q.fend[q.offl[q.nO]])});
      if (q.nR < q.nO) {
        const double x = Fits(s, ln.dev, std::max(l0, q.oend[q.nR]), ln.o);
        if (x < kInf) out.push_back({Kind::kR, i, x});
      }
      const int k = q.nB();
      if (k < M && (i + 1 == V || s.l[i + 1].nB() > k)) {
        double rb = std::max(c0, ln.rB[k]);
        if (i + 1 < V) rb = std::max(rb, s.l[i + 1].bend[k] + r_.lanes[i + 1].db);
        if (q.nBk < static_cast<int>(q.kept.size()))
          out.push_back({Kind::kBKept, i, std::max(rb, q.fend[q.kept[q.nBk]] + ln.gap)});
        if (q.nBo < q.nR) {
          const int m = q.offl[q.nBo];
          out.push_back({Kind::kBOff, i, std::max({rb, q.fend[m] + ln.gap, q.rend[q.nBo]})});
        }
      }
      if (r_.split && q.nW < k) out.push_back({Kind::kW, i, std::max(c0, q.bend[q.nW])});
    }
    // A move that starts no earlier than another on its compute or link ends,
    // one that only frees memory (O, B, W), is left out: any completion that
    // places it first can move that other op forward to its earliest start
    // (its resource idle until then, memory only lower, every precedence
    // kept), a completion of the branch that places that op first.
    std::array<double, 2 * kMaxGroup> frees;
    frees.fill(kInf);
    for (const Move& mv : out) {
      if (mv.kind == Kind::kFKept || mv.kind == Kind::kFOff || mv.kind == Kind::kR) continue;
      frees[Resource(mv)] = std::min(frees[Resource(mv)], mv.start + Duration(mv));
    }
    std::erase_if(out, [&](const Move& mv) {
      const double other = frees[Resource(mv)];
      return other <= mv.start + tol_ && other < mv.start + Duration(mv) - tol_;
    });
    std::stable_sort(out.begin(), out.end(),
                     [](const Move& x, const Move& y) { return x.start < y.start; });
    return out;
  }

  // Its device's compute (0, 1, ...) or, for a copy, kMaxGroup + its link.
  int Resource(const Move& mv) const {
    const Lane& ln = r_.lanes[mv.lane];
    return mv.kind == Kind::kO || mv.kind == Kind::kR ? kMaxGroup + ln.link : ln.dev;
  }
  double Duration(const Move& mv) const {
    const Lane& ln = r_.lanes[mv.lane];
    switch (mv.kind) {
      case Kind::kFKept:
      case Kind::kFOff:
        return ln.f;
      case Kind::kO:
      case Kind::kR:
        return ln.t;
      case Kind::kBKept:
      case Kind::kBOff:
        return ln.b;
      case Kind::kW:
        return ln.w;
    }
    return 0;
  }

  State Apply(const State& s, const Move& mv) const {
    const Lane& ln = r_.lanes[mv.lane];
    State n = s;
    LaneState& q = n.l[mv.lane];
    n.t = mv.start;
    const double tail0 = ln.b + ln.qB[0];
    switch (mv.kind) {
      case Kind::kFKept:
      case Kind::kFOff: {
        const double end = mv.start + ln.f;
        const int k = q.nF++;
        const bool off = mv.kind == Kind::kFOff;
        q.fend.push_back(end);
        (off ? q.offl : q.kept).push_back(k);
        n.cf[ln.dev] = end;
        n.obj = std::max(n.obj, end + std::max(ln.gap, off ? 2 * ln.t : 0.0) + tail0);
        break;
      }
      case Kind::kO:
        q.oend.push_back(mv.start + ln.t);
        ++q.nO;
        n.lf[ln.link] = mv.start + ln.t;
        n.obj = std::max(n.obj, mv.start + 2 * ln.t + tail0);
        break;
      case Kind::kR:
        q.rend.push_back(mv.start + ln.t);
        ++q.nR;
        n.lf[ln.link] = mv.start + ln.t;
        n.obj = std::max(n.obj, mv.start + ln.t + tail0);
        break;
      case Kind::kBKept:
      case Kind::kBOff: {
        const double end = mv.start + ln.b;
        n.obj = std::max(n.obj, end + ln.qB[r_.M - 1 - q.nB()]);
        q.bend.push_back(end);
        ++(mv.kind == Kind::kBKept ? q.nBk : q.nBo);
        n.cf[ln.dev] = end;
        break;
      }
      case Kind::kW:
        q.wend.push_back(mv.start + ln.w);
        ++q.nW;
        n.cf[ln.dev] = mv.start + ln.w;
        n.obj = std::max(n.obj, mv.start + ln.w);
        break;
    }
    return n;
  }

  void Dfs(const State& s) {
    if (Exhausted()) {
      open_min_ = std::min(open_min_, Up(NodeBound(s)));
      return;
    }
    if (Done(s)) {
      best_ = std::min(best_, s.obj);
      return;
    }
    if (Up(NodeBound(s)) >= best_ - tol_ || Dominated(s)) return;
    for (const Move& mv : Moves(s)) {
      State n = Apply(s, mv);
      if (cut_short_) {
        open_min_ = std::min(open_min_, Up(NodeBound(n)));
        continue;
      }
      if (Up(n.obj) >= best_ - tol_) continue;
      Dfs(n);
    }
  }

  // A bound on a node's completions raised to the grain g: a problem with a
  // schedule ending before a multiple T of g has one ending by T - g
  // (TimeGrain), whose image here ends no later; so a probe at T loses
  // nothing it looks for by pruning the nodes whose completions all end
  // after T - g.
  double Up(double x) const {
    return r_.grain > 0 && x < kInf ? std::ceil(x / r_.grain - 1e-9) * r_.grain : x;
  }

  static constexpr std::int64_t kMaxStored = 400000;
  const Relaxed& r_;
  // Counts a node; true from the first node past the probe's share of the
  // budget or the deadline on (the clock is read every 1024 nodes).
  bool Exhausted() {
    if (cut_short_) return true;
    ++nodes_;
    cut_short_ = nodes_ > probe_limit_ || (nodes_ % 1024 == 0 && OutOfTime());
    return cut_short_;
  }
  bool OutOfTime() const {
    return std::chrono::steady_clock::now() >= deadline_ || (stop_ && stop_->load());
  }

  std::int64_t max_nodes_, probe_limit_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  const std::atomic<bool>* stop_;
  bool exhausted_ = false, cut_short_ = false;  // the whole search; the probe
  std::int64_t nodes_ = 0, stored_ = 0;
  double tol_ = 0;
  double best_ = kInf, open_min_ = kInf;
  std::unordered_map<std::string, std::vector<std::vector<double>>> memo_;
};

}  // namespace

Result Solve(const Relaxed& r, double known, double upper, std::int64_t max_nodes,
             std::chrono::steady_clock::time_point deadline, const std::atomic<bool>* stop) {
  Search search(r, max_nodes, deadline, stop);
  Result out;
  out.value = search.Run(known, upper);
  out.finished = search.finished();
  out.nodes = search.nodes();
  return out;
}

}  // namespace optpipe::device_search
