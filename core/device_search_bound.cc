#include "core/device_search_bound.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/lower_bound.h"

namespace optpipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxMicrobatches = 24;  // the search's keys hold one bit per forward

// One device holding one stage, with the rest of the pipeline as release
// times and tails (see the header).
struct Relaxed {
  int M = 0;
  double f = 0, b = 0, w = 0;  // b: B's duration (b + w when fused); w: 0 when fused
  double gap = 0;              // least time from F(s,m)'s end to B(s,m)'s start
  double a = 0, freed_b = 0, o = 0, t = 0, room = kInf;
  bool split = true, offload = false;
  std::vector<double> rF, rB, qB;  // [M] k-th earliest F / B start; after the k-th last B's end
};

// Where the search stands: how many of each op are placed (kept activations
// B'd in F order, offloaded ones copied and B'd in F order, W in B order) and
// when they end.
struct State {
  int nF = 0, nO = 0, nR = 0, nBk = 0, nBo = 0, nW = 0;
  std::vector<char> off;           // per F placed: offloaded
  std::vector<int> kept, offl;     // activations of each class, in F order
  std::vector<double> fend;        // per activation
  std::vector<double> oend, rend;  // per offloaded activation, in class order
  std::vector<double> bend, wend;  // per B (W) in B order
  double t = 0, cf = 0, lf = 0;    // last start, compute and link free
  double obj = 0;                  // least makespan of what is placed
  int nB() const { return nBk + nBo; }
};

class Search {
 public:
  // The search stops (and bounds what it left) after max_nodes nodes or at
  // `deadline`, whichever comes first.
  Search(const Relaxed& r, std::int64_t max_nodes, std::chrono::steady_clock::time_point deadline)
      : r_(r), max_nodes_(max_nodes), deadline_(deadline) {
    tol_ = 1e-9 * std::max(1.0, r.rF.back() + r.b + r.qB.back());
  }

  // The relaxation's least makespan, or a lower bound on it when the budget
  // runs out. Probes upward from the root's bound: a probe at T searches
  // only for completions ending before T, which prunes far more than a search
  // whose first incumbents are poor. A probe that finds none proves T; one
  // that finds some and ends has found the least; one cut short bounds by the
  // least node it left. After a probe proves T the next one goes twice as far
  // above the proven bound; after one is cut short, half as far (each probe
  // may take half of the nodes left).
  double Run() {
    const double root = NodeBound(State{});
    double lo = root;
    double step = std::max(1e-2 * lo, 1e3 * tol_);
    while (true) {
      // Past twice the root's bound, one last search without a target (it
      // also tells a relaxation with no schedule at all: infinity).
      const double target = lo + step > 2 * std::max(root, 1.0) ? kInf : lo + step;
      probe_limit_ = nodes_ + std::max<std::int64_t>(1, (max_nodes_ - nodes_) / 2);
      best_ = target;
      open_min_ = kInf;
      cut_short_ = false;
      memo_.clear();
      stored_ = 0;
      Dfs(State{});
      if (!cut_short_) {
        // The least makespan (infinity: none) when it ran to its end below the target.
        if (best_ < target || target == kInf) return best_;
        lo = target - tol_;
        step *= 2;
        continue;
      }
      exhausted_ = true;
      lo = std::max(lo, std::min(best_, open_min_));
      if (best_ < target || nodes_ >= max_nodes_ || OutOfTime()) return lo;
      step /= 2;
      if (step < 1e3 * tol_) return lo;
    }
  }
  bool finished() const { return !exhausted_; }
  std::int64_t nodes() const { return nodes_; }

 private:
  // Memory resident at x >= s.t: every allocation has started by then.
  double Used(const State& s, double x) const {
    const Relaxed& r = r_;
    double used = s.nF * r.a + s.nR * r.o;
    for (int i = 0; i < s.nO; ++i) used -= s.oend[i] <= x ? r.o : 0.0;
    for (int j = 0; j < s.nB(); ++j) used -= s.bend[j] <= x ? r.freed_b : 0.0;
    for (int j = 0; j < s.nW; ++j) used -= s.wend[j] <= x ? r.a - r.freed_b : 0.0;
    return used;
  }
  // The earliest start >= x at which `amount` more fits; what is resident
  // only falls after s.t, so the first time it fits it fits for good.
  double Fits(const State& s, double x, double amount) const {
    if (Used(s, x) + amount <= r_.room + tol_) return x;
    std::vector<double> times;
    for (int i = 0; i < s.nO; ++i) times.push_back(s.oend[i]);
    for (int j = 0; j < s.nB(); ++j) times.push_back(s.bend[j]);
    for (int j = 0; j < s.nW; ++j) times.push_back(s.wend[j]);
    std::sort(times.begin(), times.end());
    for (double y : times) {
      if (y > x && Used(s, y) + amount <= r_.room + tol_) return y;
    }
    return kInf;
  }

  // The least makespan of any completion of s (never above the true one).
  double NodeBound(const State& s) const {
    const Relaxed& r = r_;
    const int M = r.M;
    const double c0 = std::max(s.cf, s.t);
    double lb = s.obj;
    const double work = (M - s.nF) * r.f + (M - s.nB()) * r.b + (M - s.nW) * r.w;
    lb = std::max(lb, c0 + work + (!r.split && s.nB() < M ? r.qB[0] : 0.0));
    // The forwards still to run, one after another from their releases.
    double x = c0;
    for (int k = s.nF; k < M; ++k) x = std::max(x, r.rF[k]) + r.f;
    if (s.nF < M) lb = std::max(lb, x + r.gap + r.b + r.qB[0]);
    // The copies still owed by the offloaded activations.
    const int n_off = static_cast<int>(s.offl.size());
    const double copies = (n_off - s.nO + n_off - s.nR) * r.t;
    if (s.nR < n_off) lb = std::max(lb, std::max(s.lf, s.t) + copies + r.b + r.qB[0]);
    // Every placed activation still waiting for its B.
    for (int i = s.nBk; i < static_cast<int>(s.kept.size()); ++i)
      lb = std::max(lb, s.fend[s.kept[i]] + r.gap + r.b + r.qB[0]);
    return lb;
  }

  // Exact (no two states share a key): six counts of at most 24 in base 33
  // take 31 bits, the offload choice of at most 24 forwards the low 24.
  std::uint64_t Key(const State& s) const {
    std::uint64_t k = 0;
    for (int v : {s.nF, s.nO, s.nR, s.nBk, s.nBo, s.nW}) k = k * 33 + static_cast<std::uint64_t>(v);
    std::uint64_t mask = 0;
    for (int i = 0; i < s.nF; ++i) mask |= static_cast<std::uint64_t>(s.off[i]) << i;
    return k << kMaxMicrobatches | mask;
  }
  // What a completion of s depends on. Ops yet to place start no earlier than
  // s.t, so a time before it counts as s.t, except a forward's end: its
  // backward may start at fend + gap, so it counts from s.t - gap on.
  std::vector<double> Times(const State& s) const {
    std::vector<double> v = {s.t, s.obj, std::max(s.cf, s.t), std::max(s.lf, s.t)};
    for (double x : s.fend) v.push_back(std::max(x, s.t - r_.gap));
    for (const auto* arr : {&s.oend, &s.rend, &s.bend, &s.wend}) {
      for (double x : *arr) v.push_back(std::max(x, s.t));
    }
    return v;
  }
  // True when a visited state with the same counts is no later anywhere.
  bool Dominated(const State& s) {
    const std::uint64_t key = Key(s);
    std::vector<double> v = Times(s);
    auto& seen = memo_[key];
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
    double start;
  };

  std::vector<Move> Moves(const State& s) const {
    const Relaxed& r = r_;
    const int M = r.M;
    std::vector<Move> out;
    const double c0 = std::max(s.t, s.cf), l0 = std::max(s.t, s.lf);
    if (s.nF < M) {
      const double x = Fits(s, std::max(c0, r.rF[s.nF]), r.a);
      if (x < kInf) {
        out.push_back({Kind::kFKept, x});
        if (r.offload) out.push_back({Kind::kFOff, x});
      }
    }
    const int n_off = static_cast<int>(s.offl.size());
    if (s.nO < n_off) out.push_back({Kind::kO, std::max(l0, s.fend[s.offl[s.nO]])});
    if (s.nR < s.nO) {
      const double x = Fits(s, std::max(l0, s.oend[s.nR]), r.o);
      if (x < kInf) out.push_back({Kind::kR, x});
    }
    const double rb = std::max(c0, r.rB[s.nB()]);
    if (s.nB() < M && s.nBk < static_cast<int>(s.kept.size()))
      out.push_back({Kind::kBKept, std::max(rb, s.fend[s.kept[s.nBk]] + r.gap)});
    if (s.nB() < M && s.nBo < s.nR) {
      const int k = s.offl[s.nBo];
      out.push_back({Kind::kBOff, std::max({rb, s.fend[k] + r.gap, s.rend[s.nBo]})});
    }
    if (r.split && s.nW < s.nB()) out.push_back({Kind::kW, std::max(c0, s.bend[s.nW])});
    std::stable_sort(out.begin(), out.end(),
                     [](const Move& x, const Move& y) { return x.start < y.start; });
    return out;
  }

  State Apply(const State& s, const Move& mv) const {
    const Relaxed& r = r_;
    State n = s;
    n.t = mv.start;
    const double tail0 = r.b + r.qB[0];
    switch (mv.kind) {
      case Kind::kFKept:
      case Kind::kFOff: {
        const double end = mv.start + r.f;
        const int k = n.nF++;
        const bool off = mv.kind == Kind::kFOff;
        n.off.push_back(off);
        n.fend.push_back(end);
        (off ? n.offl : n.kept).push_back(k);
        n.cf = end;
        n.obj = std::max(n.obj, end + std::max(r.gap, off ? 2 * r.t : 0.0) + tail0);
        break;
      }
      case Kind::kO:
        n.oend.push_back(mv.start + r.t);
        ++n.nO;
        n.lf = mv.start + r.t;
        n.obj = std::max(n.obj, n.lf + r.t + tail0);
        break;
      case Kind::kR:
        n.rend.push_back(mv.start + r.t);
        ++n.nR;
        n.lf = mv.start + r.t;
        n.obj = std::max(n.obj, n.lf + tail0);
        break;
      case Kind::kBKept:
      case Kind::kBOff: {
        const double end = mv.start + r.b;
        n.obj = std::max(n.obj, end + r.qB[r.M - 1 - n.nB()]);
        n.bend.push_back(end);
        ++(mv.kind == Kind::kBKept ? n.nBk : n.nBo);
        n.cf = end;
        break;
      }
      case Kind::kW:
        n.wend.push_back(mv.start + r.w);
        ++n.nW;
        n.cf = mv.start + r.w;
        n.obj = std::max(n.obj, n.cf);
        break;
    }
    return n;
  }

  void Dfs(const State& s) {
    if (Exhausted()) {
      open_min_ = std::min(open_min_, NodeBound(s));
      return;
    }
    const int M = r_.M;
    if (s.nF == M && s.nB() == M && (!r_.split || s.nW == M)) {
      best_ = std::min(best_, s.obj);
      return;
    }
    if (NodeBound(s) >= best_ - tol_ || Dominated(s)) return;
    for (const Move& mv : Moves(s)) {
      State n = Apply(s, mv);
      if (cut_short_) {
        open_min_ = std::min(open_min_, NodeBound(n));
        continue;
      }
      if (n.obj >= best_ - tol_) continue;
      Dfs(n);
    }
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
  std::unordered_map<std::uint64_t, std::vector<std::vector<double>>> memo_;
};

}  // namespace

DeviceSearchBound ComputeDeviceSearchBound(const Problem& p, const DeviceSearchOptions& opt) {
  const int S = p.stages(), M = p.microbatches, D = p.devices;
  DeviceSearchBound out;
  out.device_value.assign(D, 0.0);
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
  for (int d = 0; d < D; ++d) {
    int stage = -1, count = 0;
    for (int s = 0; s < S; ++s) {
      if (p.stage_device[s] == d) {
        stage = s;
        ++count;
      }
    }
    if (count != 1) continue;
    const int s = stage;
    Relaxed r;
    r.M = M;
    r.f = p.f[s];
    r.b = bdur(s);
    r.split = p.split_backward;
    r.w = r.split ? p.w[s] : 0.0;
    r.gap = gap[s];
    r.a = p.activation[s];
    r.freed_b = r.split ? p.freed_by_b[s] : r.a;
    if (p.memory_limit) r.room = (*p.memory_limit)[d] - p.static_memory[d];
    r.offload = p.offload_allowed() && p.memory_limit && p.offloadable[s] > 0;
    r.o = r.offload ? p.offloadable[s] : 0.0;
    r.t = r.offload ? (*p.offload)[s] : 0.0;
    r.rF = rF[s];
    r.rB = rB[s];
    r.qB = qB[s];
    Search search(r, opt.max_nodes_per_device, deadline);
    const double v = search.Run();
    out.nodes += search.nodes();
    out.finished = out.finished && search.finished();
    if (v < kInf) out.device_value[d] = v;
    out.value = std::max(out.value, out.device_value[d]);
  }
  return out;
}

double BestLowerBound(const Problem& p, const DeviceSearchOptions& opt) {
  return std::max(ComputeLowerBound(p).value, ComputeDeviceSearchBound(p, opt).value);
}

}  // namespace optpipe
