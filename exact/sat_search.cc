#include "exact/sat_search.h"

#include <algorithm>
#include <cadical.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "core/text_format.h"

namespace optpipe {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxRoomGrains = 1000;

int Grains(double x, double g) { return static_cast<int>(std::llround(x / g)); }

// The largest grain of which every amount an activation takes or frees is a
// multiple (0: none).
double MemoryGrain(const Problem& p) {
  std::vector<double> v;
  for (int s = 0; s < p.stages(); ++s) {
    v.push_back(p.activation[s]);
    v.push_back(p.freed_by_b[s]);
    v.push_back(p.offloadable[s]);
    v.push_back(p.activation[s] - p.freed_by_b[s]);
    v.push_back(p.activation[s] - p.offloadable[s]);
  }
  return CommonGrain(v);
}

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

// One probe: every op starts at an integer t in [0, H) grains and ends by H.
class Encoding {
 public:
  enum class Built { kOk, kEmpty, kTooLarge, kCut };

  Encoding(const Problem& p, int horizon, double g, double q, CaDiCaL::Solver& solver)
      : p_(p), H_(horizon), g_(g), q_(q), solver_(solver), S_(p.stages()), M_(p.microbatches) {}

  // kTooLarge: the lanes' order clauses alone would pass max_literals;
  // kCut: `stop` said so while building.
  Built Build(std::int64_t max_literals, const std::function<bool()>& stop) {
    max_literals_ = max_literals;
    next_var_ = kTrue + 1;  // kTrue stands for "true" and never reaches the solver
    if (!AddOps()) return Built::kEmpty;
    if (LaneLiterals() > max_literals_) return Built::kTooLarge;
    NumberStarts();
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      for (int t = ops_[i].lo; t + 1 < ops_[i].hi; ++t) Add({-Le(i, t), Le(i, t + 1)});
    }
    AddChains();
    if (stop()) return Built::kCut;
    // The lanes, links and memory take most of the time: each checks `stop`
    // op by op (instant by instant), so a probe keeps to its time.
    if (const Built b = AddLanes(stop); b != Built::kOk) return b;
    if (const Built b = AddLinks(stop); b != Built::kOk) return b;
    if (const Built b = AddMemory(stop); b != Built::kOk) return b;
    return literals_ > max_literals_ ? Built::kTooLarge : Built::kOk;
  }

  TimedSchedule Decode() {
    TimedSchedule t;
    t.problem = p_.name;
    t.method = "sat";
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const OpInfo& o = ops_[i];
      if (o.offload_var != 0 && solver_.val(o.offload_var) < 0) continue;
      int start = o.lo;
      while (start < o.hi && solver_.val(Le(i, start)) < 0) ++start;
      t.ops.push_back({o.op, DeviceOf(p_, o.op), start * g_, (start + o.d) * g_});
    }
    return t;
  }

  // The solver's first guesses from a known schedule's times: each start
  // variable, each lane order and each offload as that schedule has them.
  void Phases(const SimResult& hint) {
    const OpSpace space = p_.op_space();
    const auto start = [&](int i) { return hint.start[space.Index(ops_[i].op)] / g_; };
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const double at = start(static_cast<int>(i));
      const bool absent = std::isnan(at);
      if (ops_[i].offload_var != 0 && ops_[i].op.type == OpType::kO) {
        solver_.phase(absent ? -ops_[i].offload_var : ops_[i].offload_var);
      }
      if (absent) continue;
      for (int t = ops_[i].lo; t < ops_[i].hi; ++t) {
        solver_.phase(t + 1e-9 >= at ? Le(i, t) : -Le(i, t));
      }
    }
    for (const auto& [i, j, x] : orders_) {
      const double a = start(i), b = start(j);
      if (!std::isnan(a) && !std::isnan(b)) solver_.phase(a <= b ? x : -x);
    }
  }

  // A new literal that, assumed, makes every op end by `horizon` grains (at
  // most the encoding's): one solver serves every probe below its first,
  // keeping what it learned.
  int Cap(int horizon) {
    const int cap = NewVar();
    for (int i = 0; i < compute_ops_; ++i) {
      const OpInfo& o = ops_[i];
      Add({-cap, Le(i, horizon - o.d - o.tail)});
    }
    return cap;
  }

  std::int64_t variables() const { return next_var_ - kTrue - 1; }
  std::int64_t clauses() const { return clauses_; }

 private:
  static constexpr int kTrue = 1;

  struct OpInfo {
    Op op;
    int d = 0;            // duration in grains
    int lo = 0;           // earliest start
    int hi = 0;           // latest start: "start <= t" is a variable for t in [lo, hi)
    int base = 0;         // variable of "start <= lo"
    int offload_var = 0;  // copy ops: the activation's offload variable
    int tail = 0;         // what must follow it to the end (compute ops)
  };

  int NewVar() { return next_var_++; }

  // Drops false literals; a true one satisfies the clause.
  template <class Lits>
  void Add(const Lits& lits) {
    if (literals_ > max_literals_) return;
    int n = 0;
    for (int l : lits) {
      if (l == kTrue) return;
      if (l != -kTrue) ++n;
    }
    for (int l : lits) {
      if (l != -kTrue) solver_.add(l);
    }
    solver_.add(0);
    ++clauses_;
    literals_ += n;
  }
  void Add(std::initializer_list<int> lits) { Add<std::initializer_list<int>>(lits); }

  // "op i starts at or before t", a literal or a constant.
  int Le(std::size_t i, int t) const {
    const OpInfo& o = ops_[i];
    if (t < o.lo) return -kTrue;
    if (t >= o.hi) return kTrue;
    return o.base + (t - o.lo);
  }

  int Id(OpType t, int s, int m) const { return id_[p_.op_space().Index(t, s, m)]; }

  // s_j >= s_i + d_i + lag, unless one of `guards` is false.
  void Precedence(int i, int j, int lag, int g1 = kTrue, int g2 = kTrue, int g3 = kTrue) {
    const OpInfo& a = ops_[i];
    const OpInfo& b = ops_[j];
    const int last = std::min(b.hi, a.hi + a.d + lag - 1);
    for (int t = b.lo; t <= last; ++t) Add({-g1, -g2, -g3, -Le(j, t), Le(i, t - a.d - lag)});
  }

  // Windows from the chains of every micro-batch: heads (stage 0's forwards
  // in micro-batch order, one lane) and tails (what must follow an op).
  bool AddOps() {
    const bool split = p_.split_backward;
    std::vector<int> dF(S_), dB(S_), dW(S_), dC(S_ > 1 ? S_ - 1 : 0, 0), dO(S_, 0);
    for (int s = 0; s < S_; ++s) {
      dF[s] = Grains(p_.f[s], g_);
      dB[s] = Grains(Duration(p_, {OpType::kB, s, 0}), g_);
      dW[s] = split ? Grains(p_.w[s], g_) : 0;
      if (p_.offload) dO[s] = Grains((*p_.offload)[s], g_);
      if (s + 1 < S_) dC[s] = Grains(CommTime(p_, s), g_);
    }
    std::vector<int> tailF(S_), tailB(S_);
    for (int s = 0; s < S_; ++s) {
      tailB[s] = std::max(dW[s], s > 0 ? dC[s - 1] + dB[s - 1] + tailB[s - 1] : 0);
    }
    for (int s = S_ - 1; s >= 0; --s) {
      tailF[s] = dB[s] + tailB[s];
      if (s + 1 < S_) tailF[s] = std::max(tailF[s], dC[s] + dF[s + 1] + tailF[s + 1]);
    }
    id_.assign(p_.op_space().size(), -1);
    const auto add = [&](OpType t, int s, int m, int d, int lo, int tail) {
      id_[p_.op_space().Index(t, s, m)] = static_cast<int>(ops_.size());
      ops_.push_back({Op{t, s, m}, d, lo, H_ - d - tail, 0, 0, tail});
      return ops_.back().lo <= ops_.back().hi;
    };
    for (int m = 0; m < M_; ++m) {
      std::vector<int> headF(S_), headB(S_);
      for (int s = 0; s < S_; ++s)
        headF[s] = s == 0 ? m * dF[0] : headF[s - 1] + dF[s - 1] + dC[s - 1];
      for (int s = S_ - 1; s >= 0; --s) {
        headB[s] = s + 1 < S_ ? headB[s + 1] + dB[s + 1] + dC[s] : headF[s] + dF[s];
      }
      for (int s = 0; s < S_; ++s) {
        if (!add(OpType::kF, s, m, dF[s], headF[s], tailF[s])) return false;
        if (!add(OpType::kB, s, m, dB[s], headB[s], tailB[s])) return false;
        if (split && !add(OpType::kW, s, m, dW[s], headB[s] + dB[s], 0)) return false;
      }
    }
    compute_ops_ = static_cast<int>(ops_.size());
    // O and R of every activation that may go to the host and back in time.
    for (int s = 0; s < S_; ++s) {
      if (!p_.offload || !p_.memory_limit || p_.offloadable[s] <= 0) continue;
      for (int m = 0; m < M_; ++m) {
        const OpInfo& f = ops_[Id(OpType::kF, s, m)];
        const OpInfo& b = ops_[Id(OpType::kB, s, m)];
        const int o_lo = f.lo + f.d, r_hi = b.hi - dO[s];
        if (o_lo + dO[s] > r_hi) continue;
        const int y = NewVar();
        add(OpType::kO, s, m, dO[s], o_lo, 0);
        ops_.back().hi = r_hi - dO[s];
        ops_.back().offload_var = y;
        add(OpType::kR, s, m, dO[s], o_lo + dO[s], 0);
        ops_.back().hi = r_hi;
        ops_.back().offload_var = y;
      }
    }
    return true;
  }

  // One variable per op and grid column of its window, numbered op by op.
  void NumberStarts() {
    for (OpInfo& o : ops_) {
      o.base = next_var_;
      next_var_ += o.hi - o.lo;
    }
    solver_.reserve(next_var_);
  }

  void AddChains() {
    for (int m = 0; m < M_; ++m) {
      for (int s = 0; s < S_; ++s) {
        const int f = Id(OpType::kF, s, m), b = Id(OpType::kB, s, m);
        if (s + 1 < S_) {
          const int lag = Grains(CommTime(p_, s), g_);
          Precedence(f, Id(OpType::kF, s + 1, m), lag);
          Precedence(Id(OpType::kB, s + 1, m), b, lag);
        }
        Precedence(f, b, 0);
        if (p_.split_backward) Precedence(b, Id(OpType::kW, s, m), 0);
        if (s == 0 && m + 1 < M_) Precedence(f, Id(OpType::kF, 0, m + 1), 0);  // symmetry
        if (const int o = Id(OpType::kO, s, m); o >= 0) {
          const int r = Id(OpType::kR, s, m), y = ops_[o].offload_var;
          Precedence(f, o, 0, y);
          Precedence(o, r, 0, y);
          Precedence(r, b, 0, y);
        }
      }
    }
  }

  // Compute op i reaches compute op j through the micro-batch chain, or
  // through stage 0's forwards in micro-batch order.
  bool Reaches(int i, int j) const {
    const Op& a = ops_[i].op;
    const Op& b = ops_[j].op;
    if (a.microbatch != b.microbatch) {
      return a.type == OpType::kF && a.stage == 0 && a.microbatch < b.microbatch;
    }
    const auto pos = [&](OpType t, int s) { return t == OpType::kF ? s : 2 * S_ - 1 - s; };
    if (a.type == OpType::kW) return false;
    if (b.type == OpType::kW) return pos(a.type, a.stage) <= pos(OpType::kB, b.stage);
    return pos(a.type, a.stage) < pos(b.type, b.stage);
  }

  // Two ops of one lane: an order variable, or the one order their windows
  // allow (under `guards`); false when neither fits.
  bool Disjoint(int i, int j, int g1, int g2) {
    const OpInfo& a = ops_[i];
    const OpInfo& b = ops_[j];
    const bool i_first = a.lo + a.d <= b.hi, j_first = b.lo + b.d <= a.hi;
    if (!i_first && !j_first) {
      Add({-g1, -g2});
      return g1 != kTrue || g2 != kTrue;
    }
    if (!j_first) {
      Precedence(i, j, 0, g1, g2);
    } else if (!i_first) {
      Precedence(j, i, 0, g1, g2);
    } else {
      const int x = NewVar();
      orders_.push_back({i, j, x});
      Precedence(i, j, 0, g1, g2, x);
      Precedence(j, i, 0, g1, g2, -x);
    }
    return true;
  }

  // The literals of the compute lanes' order clauses (most of the encoding):
  // each pair of one device's ops, over both windows, four a clause.
  std::int64_t LaneLiterals() const {
    std::vector<std::int64_t> count(p_.devices, 0), width(p_.devices, 0);
    std::int64_t total = 0;
    for (int i = 0; i < compute_ops_; ++i) {
      const int d = DeviceOf(p_, ops_[i].op);
      const std::int64_t w = ops_[i].hi - ops_[i].lo + 1;
      total += 4 * (count[d] * w + width[d]);  // with every op before it on the device
      ++count[d];
      width[d] += w;
    }
    return total;
  }

  Built AddLanes(const std::function<bool()>& stop) {
    std::vector<std::vector<int>> lane(p_.devices);
    for (int i = 0; i < compute_ops_; ++i) lane[DeviceOf(p_, ops_[i].op)].push_back(i);
    for (const std::vector<int>& ops : lane) {
      for (std::size_t a = 0; a < ops.size(); ++a) {
        if (stop()) return Built::kCut;
        for (std::size_t b = a + 1; b < ops.size(); ++b) {
          if (Reaches(ops[a], ops[b]) || Reaches(ops[b], ops[a])) continue;
          if (!Disjoint(ops[a], ops[b], kTrue, kTrue)) return Built::kEmpty;
        }
      }
    }
    return Built::kOk;
  }

  Built AddLinks(const std::function<bool()>& stop) {
    const std::vector<int> link = LinkOfDevice(p_);
    std::vector<std::vector<int>> lane(p_.host_links.size());
    for (std::size_t i = compute_ops_; i < ops_.size(); ++i) {
      lane[link[DeviceOf(p_, ops_[i].op)]].push_back(static_cast<int>(i));
    }
    for (const std::vector<int>& ops : lane) {
      for (std::size_t a = 0; a < ops.size(); ++a) {
        if (stop()) return Built::kCut;
        for (std::size_t b = a + 1; b < ops.size(); ++b) {
          const int ya = ops_[ops[a]].offload_var, yb = ops_[ops[b]].offload_var;
          if (ya == yb) continue;  // O and R of one activation: a precedence
          Disjoint(ops[a], ops[b], ya, yb);
        }
      }
    }
    return Built::kOk;
  }

  // At every grid instant t (memory changes only there), the activations of a
  // device weigh at most its room: per activation, "started, not freed by B,
  // not out" weighs the activation, "out" (O ended, R not started) what O
  // leaves, "B ended, W not" what W frees. Each literal is implied by its
  // condition (never false when it holds), enough for an upper bound.
  Built AddMemory(const std::function<bool()>& stop) {
    if (!p_.memory_limit) return Built::kOk;
    for (int dev = 0; dev < p_.devices; ++dev) {
      const double limit = (*p_.memory_limit)[dev];
      const int room = static_cast<int>(std::floor((limit - p_.static_memory[dev]) / q_ + 1e-9));
      for (int t = 0; t < H_; ++t) {
        if (stop()) return Built::kCut;
        std::vector<std::pair<int, int>> terms;  // (literal, weight)
        int fixed = 0;                           // weight of literals that are true
        const auto term = [&](int lit, double amount) {
          const int w = Grains(amount, q_);
          if (w <= 0 || lit == -kTrue) return;
          if (lit == kTrue) {
            fixed += w;
          } else {
            terms.push_back({lit, w});
          }
        };
        for (int s = 0; s < S_; ++s) {
          if (p_.stage_device[s] != dev) continue;
          for (int m = 0; m < M_; ++m) Activation(s, m, t, term);
        }
        AtMost(terms, room - fixed);
      }
    }
    return Built::kOk;
  }

  template <class Term>
  void Activation(int s, int m, int t, const Term& term) {
    const int f = Id(OpType::kF, s, m), b = Id(OpType::kB, s, m);
    const int started = Le(f, t);
    if (started == -kTrue) return;
    const int b_ended = Le(b, t - ops_[b].d);
    int out = -kTrue;
    if (const int o = Id(OpType::kO, s, m); o >= 0) {
      const int r = Id(OpType::kR, s, m);
      const int o_ended = Le(o, t - ops_[o].d), r_started = Le(r, t);
      if (o_ended != -kTrue && r_started != kTrue) {
        out = NewVar();
        Add({-out, ops_[o].offload_var});
        Add({-out, o_ended});
        Add({-out, -r_started});
      }
    }
    const double act = p_.activation[s];
    if (b_ended != kTrue) {
      int live = started;
      if (b_ended != -kTrue || out != -kTrue) {
        live = NewVar();
        Add({-started, b_ended, out, live});
      }
      term(live, act);
      term(out, act - p_.offloadable[s]);
    }
    if (p_.split_backward && b_ended != -kTrue) {
      const int w = Id(OpType::kW, s, m);
      const int w_ended = Le(w, t - ops_[w].d);
      int waiting = b_ended;
      if (w_ended != -kTrue) {
        waiting = NewVar();
        Add({-b_ended, w_ended, waiting});
      }
      term(waiting, act - p_.freed_by_b[s]);
    }
  }

  // sum(w * lit) <= k. The literals of one weight are counted in unary up to
  // the fewest of them that alone weigh more than k (a sequential counter,
  // Sinz, CP 2005), and every least combination of counts that weighs more
  // is one clause: a device's activations come in a few weights (one per
  // stage and state), so this stays small on fine memory grains. With many
  // weights, one sequential weighted counter over all of them.
  void AtMost(const std::vector<std::pair<int, int>>& terms, int k) {
    if (k < 0) {
      Add({});
      return;
    }
    int total = 0;
    for (const auto& [lit, w] : terms) total += w;
    if (total <= k) return;
    std::map<int, std::vector<std::pair<int, int>>> by_weight;  // weight -> (literal, 1)
    for (const auto& [lit, w] : terms) by_weight[w].push_back({lit, 1});
    std::vector<int> weight, cap;
    std::int64_t combinations = 1;
    for (const auto& [w, group] : by_weight) {
      weight.push_back(w);
      cap.push_back(std::min(static_cast<int>(group.size()), k / w + 1));
      combinations *= cap.back() + 1;
    }
    if (combinations > 4096) {
      Add({-Counter(terms, k + 1)[k]});
      return;
    }
    std::vector<std::vector<int>> at_least;  // [group][j]: at least j + 1 of it
    for (const auto& [w, group] : by_weight)
      at_least.push_back(Counter(group, cap[at_least.size()]));
    std::vector<int> count(weight.size(), 0), clause;
    while (true) {
      int sum = 0;
      for (std::size_t g = 0; g < count.size(); ++g) sum += count[g] * weight[g];
      bool least = sum > k;
      for (std::size_t g = 0; least && g < count.size(); ++g) {
        least = count[g] == 0 || sum - weight[g] <= k;
      }
      if (least) {
        clause.clear();
        for (std::size_t g = 0; g < count.size(); ++g) {
          if (count[g] > 0) clause.push_back(-at_least[g][count[g] - 1]);
        }
        Add(clause);
      }
      std::size_t g = 0;  // the next combination, as an odometer
      while (g < count.size() && count[g] == cap[g]) count[g++] = 0;
      if (g == count.size()) break;
      ++count[g];
    }
  }

  // A one-directional sequential weighted counter (Hoelldobler, Manthey,
  // Steinke, KI 2012): c[j] is implied by "the terms weigh at least j + 1",
  // for j < cap.
  std::vector<int> Counter(const std::vector<std::pair<int, int>>& terms, int cap) {
    std::vector<int> prev, cur;
    for (const auto& [x, w] : terms) {
      cur.assign(cap, 0);
      for (int j = 0; j < cap; ++j) {
        cur[j] = NewVar();
        if (!prev.empty()) Add({-prev[j], cur[j]});
        if (j < w) {
          Add({-x, cur[j]});
        } else if (!prev.empty()) {
          Add({-x, -prev[j - w], cur[j]});
        }
      }
      prev.swap(cur);
    }
    return prev;
  }

  const Problem& p_;
  const int H_;
  const double g_, q_;
  CaDiCaL::Solver& solver_;
  const int S_, M_;
  std::vector<OpInfo> ops_;
  std::vector<int> id_;  // OpSpace index -> op, -1 if none
  struct Order {
    int i, j, x;  // x: "i before j"
  };
  std::vector<Order> orders_;
  int compute_ops_ = 0;
  int next_var_ = 1;
  std::int64_t clauses_ = 0, literals_ = 0, max_literals_ = 0;
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
SatSession::SatSession() : racers(std::make_unique<Racers>()) {}
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
  SatSession::Racers& session = *(opt.session ? opt.session : &own)->racers;
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
