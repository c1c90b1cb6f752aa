#include "core/device_search_bound.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "core/lower_bound.h"

namespace optpipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxMicrobatches = 24;  // the search's keys hold one bit per forward

// One stage of the device, with the rest of the pipeline as release times
// and tails (see the header).
struct Lane {
  double f = 0, b = 0, w = 0;  // b: B's duration (b + w when fused); w: 0 when fused
  double gap = 0;              // least time from F(s,m)'s end to B(s,m)'s start
  double a = 0, freed_b = 0, o = 0, t = 0;
  bool offload = false;
  std::vector<double> rF, rB, qB;  // [M] k-th earliest F / B start; after the k-th last B's end
  // To the lane of the device's previous stage (lane 0: none): the k-th F of
  // this lane starts at least df after the k-th of that lane ends, and the
  // k-th B of that lane at least db after the k-th of this lane ends (the
  // stages between run on other devices).
  double df = 0, db = 0;
  int dev = 0, link = 0;  // the relaxation's device and host link running it
};

constexpr int kMaxGroup = 2;  // devices searched together

// One device, or a few searched together: their stages in pipeline order, each
// device with its compute and room, each host link among them with its copies.
struct Relaxed {
  int M = 0;
  bool split = true;
  int devices = 1, links = 1;
  std::array<double, kMaxGroup> room{};
  std::array<int, kMaxGroup> link_of{};                // each device's host link
  std::array<double, kMaxGroup> a_min{}, slots{};      // least activation; whole ones room holds
  int max_offloads = std::numeric_limits<int>::max();  // over all lanes
  double grain = 0;  // TimeGrain(p): the problem's least makespan is a multiple of it
  std::vector<Lane> lanes;
};

// Where a lane stands: how many of each op are placed (kept activations B'd
// in F order, offloaded ones copied and B'd in F order, W in B order) and
// when they end.
struct LaneState {
  int nF = 0, nO = 0, nR = 0, nBk = 0, nBo = 0, nW = 0;
  std::vector<char> off;           // per F placed: offloaded
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
  // The search stops (and bounds what it left) after max_nodes nodes or at
  // `deadline`, whichever comes first.
  Search(const Relaxed& r, std::int64_t max_nodes, std::chrono::steady_clock::time_point deadline)
      : r_(r), max_nodes_(max_nodes), deadline_(deadline) {
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
  // take half of the nodes left). With a grain g every target is a multiple
  // of it: "none before k g" proves k g for the problem (see Up).
  double Run(double known = 0) {
    const State root_state = Root();
    const double root = NodeBound(root_state);
    double lo = std::max(root, known);  // proven
    const double g = r_.grain;
    double step = std::max({1e-2 * lo, 1e3 * tol_, g});
    double found = kInf;  // the least completion any probe found
    while (true) {
      // Past twice the root's bound, one last search without a target (it
      // also tells a relaxation with no schedule at all: infinity).
      double target = lo + step > 2 * std::max(root, 1.0) ? kInf : lo + step;
      target = std::min(Up(target), found);
      probe_limit_ = nodes_ + std::max<std::int64_t>(1, (max_nodes_ - nodes_) / 2);
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

  // Exact (no two states share a key): per lane six counts of at most 24 and
  // the offload choice of at most 24 forwards.
  std::string Key(const State& s) const {
    std::string k;
    for (const LaneState& q : s.l) {
      for (int v : {q.nF, q.nO, q.nR, q.nBk, q.nBo, q.nW}) k.push_back(static_cast<char>(v));
      std::uint32_t mask = 0;
      for (int i = 0; i < q.nF; ++i) mask |= static_cast<std::uint32_t>(q.off[i]) << i;
      for (int byte = 0; byte < 3; ++byte) k.push_back(static_cast<char>(mask >> (8 * byte)));
    }
    return k;
  }
  // What a completion of s depends on. Ops yet to place start no earlier than
  // s.t, so a time before it counts as s.t, except where a later op may start
  // a delay after it: a forward's end (its backward, fend + gap, and the next
  // lane's forward, + df) and a backward's end (the previous lane's, + db).
  std::vector<double> Times(const State& s) const {
    std::vector<double> v = {s.t, s.obj};
    for (int d = 0; d < r_.devices; ++d) v.push_back(std::max(s.cf[d], s.t));
    for (int l = 0; l < r_.links; ++l) v.push_back(std::max(s.lf[l], s.t));
    for (std::size_t i = 0; i < r_.lanes.size(); ++i) {
      const Lane& ln = r_.lanes[i];
      const LaneState& q = s.l[i];
      const double df = i + 1 < r_.lanes.size() ? r_.lanes[i + 1].df : 0.0;
      for (double x : q.fend) v.push_back(std::max(x, s.t - std::max(ln.gap, df)));
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
      const Lane& ln = r_.lanes[mv.lane];
      if (mv.kind == Kind::kFKept || mv.kind == Kind::kFOff || mv.kind == Kind::kR) continue;
      const int res = mv.kind == Kind::kO ? kMaxGroup + ln.link : ln.dev;
      frees[res] = std::min(frees[res], mv.start + Duration(mv));
    }
    std::erase_if(out, [&](const Move& mv) {
      const Lane& ln = r_.lanes[mv.lane];
      const bool on_link = mv.kind == Kind::kO || mv.kind == Kind::kR;
      const double other = frees[on_link ? kMaxGroup + ln.link : ln.dev];
      return other <= mv.start + tol_ && other < mv.start + Duration(mv) - tol_;
    });
    std::stable_sort(out.begin(), out.end(),
                     [](const Move& x, const Move& y) { return x.start < y.start; });
    return out;
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
        q.off.push_back(off);
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
  bool OutOfTime() const { return std::chrono::steady_clock::now() >= deadline_; }

  std::int64_t max_nodes_, probe_limit_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  bool exhausted_ = false, cut_short_ = false;  // the whole search; the probe
  std::int64_t nodes_ = 0, stored_ = 0;
  double tol_ = 0;
  double best_ = kInf, open_min_ = kInf;
  std::unordered_map<std::string, std::vector<std::vector<double>>> memo_;
};

}  // namespace

DeviceSearchBound ComputeDeviceSearchBound(const Problem& p, const DeviceSearchOptions& opt) {
  const int S = p.stages(), M = p.microbatches, D = p.devices;
  DeviceSearchBound out;
  out.device_value.assign(D, 0.0);
  out.link_value.assign(p.host_links.size(), 0.0);
  // Without a memory limit the search has little to prune, and the device
  // bound of ComputeLowerBound is close to what it would prove.
  if (p.objective != Objective::kMakespan || !p.memory_limit || M > kMaxMicrobatches) return out;
  const auto bdur = [&](int s) { return Duration(p, Op{OpType::kB, s, 0}); };
  // Release times of the k-th F and B of every stage, and tails after the
  // k-th last B (see the header).
  std::vector<std::vector<double>> rF(S, std::vector<double>(M)), rB = rF, qB = rF;
  // A device whose room holds at most c activations of stage s (what cannot
  // go to the host counts) starts the k-th F(s) only after k - c + 1
  // backwards of s have ended: with fewer, c of its activations are resident.
  // The j-th of them ends no earlier than rB_s(j) + b_s.
  std::vector<int> fit(S, M);
  for (int s = 0; s < S; ++s) {
    const int d = p.stage_device[s];
    const bool moves = p.offload_allowed() && p.offloadable[s] > 0;
    const double stays = p.activation[s] - (moves ? p.offloadable[s] : 0.0);
    const double room = (*p.memory_limit)[d] - p.static_memory[d];
    if (stays > 0 && room >= stays)
      fit[s] = static_cast<int>(std::min<double>(M, std::floor(room / stays + 1e-9)));
  }
  // With offload, what must be freed before the k-th F(u) starts, (k + 1) a_u -
  // room, comes from backwards ended (at most a_u each) and offloads ended
  // (at most the offloadable part each). The k-th F of every stage u <= s
  // starts before the k-th F(s), so the offloads each of them needs have
  // ended by then too; those of the stages on s's host link run one at a time
  // on it, none before the end of their first forward. The k-th F(s) starts
  // no earlier than the least time T by which the backwards ended by T and
  // the link's offloads could have freed enough for all of them.
  const std::vector<int> link_of = LinkOfDevice(p);
  std::vector<std::vector<int>> mates(S);  // stages u <= s with offload on s's link
  for (int s = 0; s < S; ++s) {
    for (int u = 0; u <= s; ++u) {
      if (link_of[p.stage_device[u]] == link_of[p.stage_device[s]] && p.offloadable[u] > 0)
        mates[s].push_back(u);
    }
  }
  const auto freed_by = [&](int s, int k) {
    std::vector<double> times{0.0};  // candidate T: when some backward ends
    std::vector<double> need;        // per mate: what must be freed before its k-th F
    double first_end = kInf;
    for (int u : mates[s]) {
      first_end = std::min(first_end, rF[u][0] + p.f[u]);
      for (int j = 0; j < k; ++j) times.push_back(rB[u][j] + bdur(u));
      const int d = p.stage_device[u];
      need.push_back((k + 1) * p.activation[u] - ((*p.memory_limit)[d] - p.static_memory[d]));
    }
    double best = kInf;
    for (double T : times) {
      double link = 0;  // offload time the stages need by T
      for (std::size_t i = 0; i < mates[s].size(); ++i) {
        const int u = mates[s][i];
        const double eps = 1e-9 * std::max(1.0, std::abs(need[i]));
        int nb = 0;  // backwards of u ended by T (rB[u] rises with j)
        while (nb < k && rB[u][nb] + bdur(u) <= T) ++nb;
        const double rest = need[i] - nb * p.activation[u];
        if (rest > eps) link += std::ceil(rest / p.offloadable[u] - 1e-9) * (*p.offload)[u];
      }
      best = std::min(best, std::max(T, link > 0 ? first_end + link : 0.0));
    }
    return best;
  };
  for (int k = 0; k < M; ++k) {
    for (int s = 0; s < S; ++s) {
      double x = k > 0 ? rF[s][k - 1] + p.f[s] : 0.0;
      if (s > 0) x = std::max(x, rF[s - 1][k] + p.f[s - 1] + CommTime(p, s - 1));
      if (k >= fit[s]) x = std::max(x, rB[s][k - fit[s]] + bdur(s));
      if (k > 0 && p.offload_allowed() && p.offloadable[s] > 0) x = std::max(x, freed_by(s, k));
      rF[s][k] = x;
    }
    for (int s = S - 1; s >= 0; --s) {
      double x = rF[s][k] + p.f[s];
      if (k > 0) x = std::max(x, rB[s][k - 1] + bdur(s));
      if (s + 1 < S) x = std::max(x, rB[s + 1][k] + bdur(s + 1) + CommTime(p, s));
      rB[s][k] = x;
    }
  }
  for (int s = 0; s < S; ++s) {
    const double w = p.split_backward ? p.w[s] : 0.0;
    for (int k = 0; k < M; ++k) {
      double x = k * bdur(s) + (k + 1) * w;
      if (k > 0) x = std::max(x, qB[s][k - 1] + bdur(s));
      if (s > 0) x = std::max(x, qB[s - 1][k] + bdur(s - 1) + CommTime(p, s - 1));
      qB[s][k] = x;
    }
  }
  const std::vector<double> gap = ForwardToBackward(p);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(std::max(0.0, opt.time_limit_s)));
  // The relaxation of a group of devices (at most kMaxGroup).
  const auto relaxed = [&](const std::vector<int>& group) {
    Relaxed r;
    r.M = M;
    r.grain = TimeGrain(p);
    r.split = p.split_backward;
    r.devices = static_cast<int>(group.size());
    r.links = 0;
    for (int i = 0; i < r.devices; ++i) {
      const int d = group[i];
      r.room[i] = p.memory_limit ? (*p.memory_limit)[d] - p.static_memory[d] : kInf;
      r.link_of[i] = r.links;
      for (int j = 0; j < i; ++j) {
        if (link_of[group[j]] == link_of[d]) r.link_of[i] = r.link_of[j];
      }
      if (r.link_of[i] == r.links) ++r.links;
    }
    int prev = -1;  // the group's previous stage
    for (int s = 0; s < S; ++s) {
      const auto it = std::find(group.begin(), group.end(), p.stage_device[s]);
      if (it == group.end()) continue;
      Lane ln;
      ln.dev = static_cast<int>(it - group.begin());
      ln.link = r.link_of[ln.dev];
      r.a_min[ln.dev] =
          r.a_min[ln.dev] > 0 ? std::min(r.a_min[ln.dev], p.activation[s]) : p.activation[s];
      ln.f = p.f[s];
      ln.b = bdur(s);
      ln.w = r.split ? p.w[s] : 0.0;
      ln.gap = gap[s];
      ln.a = p.activation[s];
      ln.freed_b = r.split ? p.freed_by_b[s] : ln.a;
      ln.offload = p.offload_allowed() && p.memory_limit && p.offloadable[s] > 0;
      ln.o = ln.offload ? p.offloadable[s] : 0.0;
      ln.t = ln.offload ? (*p.offload)[s] : 0.0;
      ln.rF = rF[s];
      ln.rB = rB[s];
      ln.qB = qB[s];
      if (prev >= 0) {
        ln.df = CommTime(p, prev);
        ln.db = CommTime(p, prev);
        for (int u = prev + 1; u < s; ++u) {
          ln.df += p.f[u] + CommTime(p, u);
          ln.db += bdur(u) + CommTime(p, u);
        }
      }
      r.lanes.push_back(std::move(ln));
      prev = s;
    }
    for (int i = 0; i < r.devices; ++i) {
      r.slots[i] =
          r.a_min[i] > 0 && r.room[i] < kInf ? std::floor(r.room[i] / r.a_min[i] + 1e-9) : kInf;
    }
    return r;
  };
  // The relaxation's least makespan (a bound on it when cut short), from a
  // bound `known` on it, in at most `nodes` nodes.
  const auto solve = [&](const Relaxed& r, double known, std::int64_t nodes, bool& finished) {
    Search search(r, nodes, deadline);
    const double v = search.Run(known);
    out.nodes += search.nodes();
    finished = finished && search.finished();
    return v;
  };
  // The same in two rounds: a sixteenth of the nodes, then the rest from what
  // that proved where it was cut short but proved more than `known` (a fresh
  // search from a higher bound climbs faster than one probing on: at 2M
  // nodes a device, fz4x8v2-L2 64 -> 65, fz8x16v2-L2 135 -> 136).
  const auto climb = [&](const Relaxed& r, double known, std::int64_t nodes, bool& finished) {
    const std::int64_t first = std::max<std::int64_t>(1, nodes / 16);
    bool done = true;
    double v = solve(r, known, first, done);
    if (!done && v < kInf && v > known) {
      done = true;
      v = std::max(v, solve(r, v, nodes - first, done));
    }
    finished = finished && done;
    return v;
  };
  std::vector<Relaxed> devices(D);
  for (int d = 0; d < D; ++d) {
    const Relaxed& r = devices[d] = relaxed({d});
    if (r.lanes.empty()) continue;
    const double v = climb(r, 0, opt.max_nodes_per_device, out.finished);
    if (v < kInf) out.device_value[d] = v;
    out.value = std::max(out.value, out.device_value[d]);
  }
  // Devices sharing a host link (see the header): below T, device d offloads
  // at least n_d(T) activations, the least c whose relaxation capped at c
  // offloads ends by T, and the link carries their round trips one copy at a
  // time, after the first forward of its stages ends and before the least
  // tail after a reload (its backward and what follows the last one).
  for (std::size_t l = 0; l < p.host_links.size(); ++l) {
    struct Member {
      Relaxed r;
      std::vector<double> v;  // v[c]: least makespan with at most c offloads; -1: not yet
      double trip = kInf;     // its shortest round trip
      int n = 0;              // n_d(T)
    };
    std::vector<Member> members;
    double first = kInf, last = kInf;  // the link's idle ends
    for (int d : p.host_links[l]) {
      Member m{devices[d], {}};  // a copy: its cap changes
      for (const Lane& ln : m.r.lanes) {
        if (!ln.offload) continue;
        m.n += M;
        m.trip = std::min(m.trip, 2 * ln.t);
        first = std::min(first, ln.rF[0] + ln.f);
        last = std::min(last, ln.b + ln.qB[0]);
      }
      if (m.n == 0) continue;
      m.v.assign(m.n + 1, -1.0);
      m.v[m.n] = out.device_value[d];
      members.push_back(std::move(m));
    }
    if (members.size() < 2) continue;
    const auto value = [&](Member& m, int c) {
      if (m.v[c] < 0) {
        m.r.max_offloads = c;
        m.v[c] = climb(m.r, 0, opt.max_nodes_per_device, out.finished);
      }
      return m.v[c];
    };
    double T = 0;  // from the link's own devices' bound
    for (const Member& m : members) T = std::max(T, m.v[m.n]);
    while (std::chrono::steady_clock::now() < deadline) {
      const double tol = 1e-9 * std::max(1.0, T);
      double need = first + last, next = kInf;  // next: where some n_d falls
      for (Member& m : members) {
        while (m.n > 0 && value(m, m.n - 1) <= T + tol) --m.n;
        need += m.n * m.trip;
        if (m.n > 0) next = std::min(next, value(m, m.n - 1));
      }
      if (need <= T + tol) break;
      T = std::min(need, next);  // nothing below ends in time
      if (need <= next) break;
    }
    out.link_value[l] = T;
    out.value = std::max(out.value, T);
  }
  // Pairs of devices searched together (see the header): those running
  // consecutive stages and those sharing a host link, the most promising
  // (the higher value either proves alone) first.
  if (opt.max_nodes_per_pair > 0) {
    std::vector<DevicePairValue> pairs;
    const auto add = [&](int d, int e) {
      if (d == e) return;
      if (d > e) std::swap(d, e);
      for (const DevicePairValue& q : pairs) {
        if (q.devices == std::array<int, 2>{d, e}) return;
      }
      double known = std::max(out.device_value[d], out.device_value[e]);
      const int l = link_of[d];  // a link budget of these two alone bounds them too
      if (l == link_of[e] && p.host_links[l].size() == 2)
        known = std::max(known, out.link_value[l]);
      pairs.push_back({{d, e}, known, true});
    };
    for (int s = 0; s + 1 < S; ++s) add(p.stage_device[s], p.stage_device[s + 1]);
    for (const std::vector<int>& group : p.host_links) {
      for (std::size_t i = 0; i < group.size(); ++i) {
        for (std::size_t j = i + 1; j < group.size(); ++j) add(group[i], group[j]);
      }
    }
    std::stable_sort(
        pairs.begin(), pairs.end(),
        [](const DevicePairValue& x, const DevicePairValue& y) { return x.value > y.value; });
    // Climbing in two rounds as a device does, every pair's first before any
    // second (most pairs prove nothing more than their devices and stop
    // there: r48-0s, 6M nodes a pair at milp's --time-limit 60, 1.7M in all).
    const std::int64_t first = std::max<std::int64_t>(1, opt.max_nodes_per_pair / 16);
    std::vector<double> known(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) known[i] = pairs[i].value;
    for (std::int64_t nodes : {first, opt.max_nodes_per_pair - first}) {
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        DevicePairValue& q = pairs[i];
        if (nodes != first && (q.finished || !(q.value > known[i]))) continue;
        q.finished = true;
        const double v = solve(relaxed({q.devices[0], q.devices[1]}), q.value, nodes, q.finished);
        if (v < kInf) q.value = std::max(q.value, v);
        out.value = std::max(out.value, q.value);
      }
    }
    out.pair_value = std::move(pairs);
  }
  return out;
}

double BestLowerBound(const Problem& p, const DeviceSearchOptions& opt) {
  return AtGrain(p, std::max(ComputeLowerBound(p).value, ComputeDeviceSearchBound(p, opt).value));
}

}  // namespace optpipe
