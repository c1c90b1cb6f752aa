#include "exact/sat_encoding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace optpipe::sat {

int Grains(double x, double g) {
  return static_cast<int>(std::clamp(std::round(x / g), -kMaxGrains - 1.0, kMaxGrains + 1.0));
}

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

Encoding::Built Encoding::Build(std::int64_t max_literals, const std::function<bool()>& stop) {
  max_literals_ = max_literals;
  next_var_ = kTrue + 1;  // kTrue stands for "true" and never reaches the solver
  if (H_ >= kMaxGrains) return Built::kTooLarge;
  if (!AddOps()) return Built::kEmpty;
  if (LaneLiterals() > max_literals_) return Built::kTooLarge;
  NumberStarts();
  // Every part checks `stop` op by op (micro-batch by micro-batch, instant
  // by instant), so a probe keeps to its time even where the windows are
  // wide (a stage far slower than the others: a window of 1e5 grains).
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (stop()) return Built::kCut;
    for (int t = ops_[i].lo; t + 1 < ops_[i].hi; ++t) Add({-Le(i, t), Le(i, t + 1)});
  }
  if (!AddChains(stop)) return Built::kCut;
  if (const Built b = AddLanes(stop); b != Built::kOk) return b;
  if (const Built b = AddLinks(stop); b != Built::kOk) return b;
  if (const Built b = AddMemory(stop); b != Built::kOk) return b;
  return literals_ > max_literals_ ? Built::kTooLarge : Built::kOk;
}

std::int64_t Encoding::Estimate() {
  next_var_ = kTrue + 1;
  ops_.clear();
  if (H_ >= kMaxGrains) return std::numeric_limits<std::int64_t>::max();
  return AddOps() ? LaneLiterals() : 0;
}

TimedSchedule Encoding::Decode() {
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

void Encoding::Phases(const SimResult& hint) {
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

std::vector<int> Encoding::Keep(const SimResult& hint, const std::function<bool(int)>& free,
                                bool loose) const {
  const OpSpace space = p_.op_space();
  std::vector<char> is_free(ops_.size());
  for (std::size_t i = 0; i < ops_.size(); ++i) is_free[i] = free(space.Index(ops_[i].op));
  std::vector<int> out;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const OpInfo& o = ops_[i];
    if (o.offload_var == 0 || o.op.type != OpType::kO) continue;
    const int s = o.op.stage, m = o.op.microbatch;
    if (is_free[Id(OpType::kF, s, m)] || is_free[Id(OpType::kB, s, m)]) continue;
    out.push_back(std::isnan(hint.start[space.Index(o.op)]) ? -o.offload_var : o.offload_var);
  }
  for (const auto& [i, j, x] : orders_) {
    if (loose ? is_free[i] || is_free[j] : is_free[i] && is_free[j]) continue;
    const double a = hint.start[space.Index(ops_[i].op)], b = hint.start[space.Index(ops_[j].op)];
    if (!std::isnan(a) && !std::isnan(b)) out.push_back(a <= b ? x : -x);
  }
  return out;
}

int Encoding::Cap(int horizon) {
  const int cap = NewVar();
  for (int i = 0; i < compute_ops_; ++i) {
    const OpInfo& o = ops_[i];
    Add({-cap, Le(i, horizon - o.d - o.tail)});
  }
  return cap;
}

template <class Lits>
void Encoding::Add(const Lits& lits) {
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

int Encoding::Le(std::size_t i, int t) const {
  const OpInfo& o = ops_[i];
  if (t < o.lo) return -kTrue;
  if (t >= o.hi) return kTrue;
  return o.base + (t - o.lo);
}

void Encoding::Precedence(int i, int j, int lag, int g1, int g2, int g3) {
  const OpInfo& a = ops_[i];
  const OpInfo& b = ops_[j];
  const int last = std::min(b.hi, a.hi + a.d + lag - 1);
  for (int t = b.lo; t <= last; ++t) Add({-g1, -g2, -g3, -Le(j, t), Le(i, t - a.d - lag)});
}

bool Encoding::AddOps() {
  const bool split = p_.split_backward;
  std::vector<int> dF(S_), dB(S_), dW(S_), dC(S_ > 1 ? S_ - 1 : 0, 0), dO(S_, 0);
  for (int s = 0; s < S_; ++s) {
    dF[s] = Grains(p_.f[s], g_);
    dB[s] = Grains(Duration(p_, {OpType::kB, s, 0}), g_);
    dW[s] = split ? Grains(p_.w[s], g_) : 0;
    if (p_.offload) dO[s] = Grains((*p_.offload)[s], g_);
    if (s + 1 < S_) dC[s] = Grains(CommTime(p_, s), g_);
  }
  // Heads and tails in 64 bits: a sum of durations may pass an int where the
  // horizon does not (an op whose window they close is then left out).
  std::vector<std::int64_t> tailF(S_), tailB(S_);
  for (int s = 0; s < S_; ++s) {
    tailB[s] = std::max<std::int64_t>(dW[s], s > 0 ? dC[s - 1] + dB[s - 1] + tailB[s - 1] : 0);
  }
  for (int s = S_ - 1; s >= 0; --s) {
    tailF[s] = dB[s] + tailB[s];
    if (s + 1 < S_) tailF[s] = std::max(tailF[s], dC[s] + dF[s + 1] + tailF[s + 1]);
  }
  const OpSpace space = p_.op_space();
  id_.assign(space.size(), -1);
  // [lo, hi] narrowed by limit_.
  const auto limited = [&](OpType t, int s, int m, int lo, int hi) {
    if (limit_.empty()) return std::pair{lo, hi};
    const auto [a, b] = limit_[space.Index(t, s, m)];
    return std::pair{std::max(lo, a), std::min(hi, b)};
  };
  const auto add = [&](OpType t, int s, int m, int d, std::int64_t lo, std::int64_t tail) {
    if (lo + d + tail > H_) return false;  // no window
    id_[space.Index(t, s, m)] = static_cast<int>(ops_.size());
    const auto [a, b] = limited(t, s, m, static_cast<int>(lo), static_cast<int>(H_ - d - tail));
    ops_.push_back({Op{t, s, m}, d, a, b, 0, 0, static_cast<int>(tail)});
    return a <= b;
  };
  for (int m = 0; m < M_; ++m) {
    std::vector<std::int64_t> headF(S_), headB(S_);
    for (int s = 0; s < S_; ++s)
      headF[s] = s == 0 ? std::int64_t{m} * dF[0] : headF[s - 1] + dF[s - 1] + dC[s - 1];
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
      // O starts after F ends, R after O ends, B after R ends.
      const auto o = limited(OpType::kO, s, m, f.lo + f.d, b.hi - 2 * dO[s]);
      const auto r = limited(OpType::kR, s, m, o.first + dO[s], b.hi - dO[s]);
      if (o.first > o.second || r.first > r.second) continue;
      const int y = NewVar();
      for (const auto& [t, w] : {std::pair{OpType::kO, o}, std::pair{OpType::kR, r}}) {
        add(t, s, m, dO[s], w.first, 0);
        ops_.back().hi = w.second;
        ops_.back().offload_var = y;
      }
    }
  }
  return true;
}

void Encoding::NumberStarts() {
  for (OpInfo& o : ops_) {
    o.base = next_var_;
    next_var_ += o.hi - o.lo;
  }
  solver_.reserve(next_var_);
}

bool Encoding::AddChains(const std::function<bool()>& stop) {
  for (int m = 0; m < M_; ++m) {
    if (stop()) return false;
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
  return true;
}

bool Encoding::Reaches(int i, int j) const {
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

bool Encoding::Disjoint(int i, int j, int g1, int g2) {
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

std::int64_t Encoding::LaneLiterals() const {
  std::vector<std::int64_t> count(p_.devices, 0), width(p_.devices, 0);
  // Saturating: a large problem's count is beyond any budget, never negative.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const auto add = [](std::int64_t a, std::int64_t b) {
    std::int64_t r;
    return __builtin_add_overflow(a, b, &r) ? kMax : r;
  };
  const auto mul = [](std::int64_t a, std::int64_t b) {
    std::int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? kMax : r;
  };
  std::int64_t total = 0;
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const std::int64_t w = std::int64_t{ops_[i].hi} - ops_[i].lo + 1;
    total = add(total, mul(2, w));  // its start variables' chain
    if (static_cast<int>(i) >= compute_ops_) continue;
    const int d = DeviceOf(p_, ops_[i].op);
    // with every op before it on the device
    total = add(total, mul(4, add(mul(count[d], w), width[d])));
    ++count[d];
    width[d] = add(width[d], w);
  }
  return total;
}

Encoding::Built Encoding::AddLanes(const std::function<bool()>& stop) {
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

Encoding::Built Encoding::AddLinks(const std::function<bool()>& stop) {
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
    // The round trips a link carries fit between its earliest copy start and
    // its latest copy end: implied by the order clauses above, but only
    // through a pigeonhole argument, which resolution cannot make short.
    int lo = H_, hi = 0;
    std::vector<std::pair<int, int>> trips;  // (offload variable, both copies' grains)
    for (const int i : ops) {
      lo = std::min(lo, ops_[i].lo);
      hi = std::max(hi, ops_[i].hi + ops_[i].d);
      if (ops_[i].op.type == OpType::kO) trips.push_back({ops_[i].offload_var, 2 * ops_[i].d});
    }
    if (!trips.empty()) AtMost(trips, hi - lo);
  }
  return Built::kOk;
}

Encoding::Built Encoding::AddMemory(const std::function<bool()>& stop) {
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
void Encoding::Activation(int s, int m, int t, const Term& term) {
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

void Encoding::AtMost(const std::vector<std::pair<int, int>>& terms, int k) {
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
  for (const auto& [w, group] : by_weight) at_least.push_back(Counter(group, cap[at_least.size()]));
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

std::vector<int> Encoding::Counter(const std::vector<std::pair<int, int>>& terms, int cap) {
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

}  // namespace optpipe::sat
