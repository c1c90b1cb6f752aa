#include "exact/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>

#include "core/dag.h"

namespace optpipe::milp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A value in a row: a constant, a column, or one minus a column.
struct Lit {
  int col = -1;
  bool neg = false;
  double value = 0;  // when col < 0
  static Lit Const(double v) { return Lit{-1, false, v}; }
  static Lit Var(int c, bool n = false) { return Lit{c, n, 0}; }
  bool is_const() const { return col < 0; }
  Lit Not() const { return is_const() ? Const(1 - value) : Var(col, !neg); }
};

// Accumulates sum(coef * lit) + constant, then compares with a right-hand side.
class RowBuilder {
 public:
  void Add(double coef, int col) {
    if (coef != 0) terms_.push_back({col, coef});
  }
  void Add(double coef, const Lit& l) {
    if (coef == 0) return;
    if (l.is_const()) {
      constant_ += coef * l.value;
    } else if (l.neg) {
      constant_ += coef;
      terms_.push_back({l.col, -coef});
    } else {
      terms_.push_back({l.col, coef});
    }
  }
  void AddConstant(double c) { constant_ += c; }
  bool empty() const { return terms_.empty(); }
  double constant() const { return constant_; }
  // Largest value of the variable part over 0/1 binaries (and [0,1] helpers).
  double MaxVariablePart() const {
    double s = 0;
    for (const Term& t : terms_) s += std::max(0.0, t.coef);
    return s;
  }
  Row Finish(Sense sense, double rhs) {
    // Merge duplicate columns so the solver sees each once.
    std::sort(terms_.begin(), terms_.end(),
              [](const Term& a, const Term& b) { return a.col < b.col; });
    std::vector<Term> merged;
    for (const Term& t : terms_) {
      if (!merged.empty() && merged.back().col == t.col) {
        merged.back().coef += t.coef;
      } else {
        merged.push_back(t);
      }
    }
    merged.erase(
        std::remove_if(merged.begin(), merged.end(), [](const Term& t) { return t.coef == 0; }),
        merged.end());
    Row r;
    r.terms = std::move(merged);
    r.sense = sense;
    r.rhs = rhs - constant_;
    return r;
  }

 private:
  std::vector<Term> terms_;
  double constant_ = 0;
};

struct Edge {
  int from, to;
  double lag;
};

// Earliest start of every op of a DAG without resources, from one source at 0.
std::vector<double> DagEarliest(const Problem& p) {
  const std::vector<char> none(static_cast<std::size_t>(p.stages()) * p.microbatches, 0);
  const Dag dag = BuildDag(p, none);
  const std::vector<double> est = dag.EarliestStarts();
  std::vector<double> out(p.op_space().size(), 0.0);
  for (int v = 0; v < dag.num_vertices(); ++v) out[p.op_space().Index(dag.ops()[v])] = est[v];
  return out;
}

// head_d: the earliest any op of device d can start (an F of its lowest stage).
std::vector<double> Heads(const Problem& p) {
  const std::vector<double> est = DagEarliest(p);
  std::vector<double> head(p.devices, kInf);
  const OpSpace space = p.op_space();
  for (int s = 0; s < p.stages(); ++s) {
    for (int m = 0; m < p.microbatches; ++m) {
      const int d = p.stage_device[s];
      head[d] = std::min(head[d], est[space.Index(OpType::kF, s, m)]);
    }
  }
  for (double& h : head) {
    if (h == kInf) h = 0;
  }
  return head;
}

}  // namespace

bool HeadsExact(const Problem& p) {
  // The lowest stages of the devices must be exactly 0..k-1: then the F chain
  // of micro-batch 0 up to any device's lowest stage runs on devices that
  // start with it, and nothing delays it.
  std::vector<int> lowest(p.devices, -1);
  for (int s = p.stages() - 1; s >= 0; --s) lowest[p.stage_device[s]] = s;
  std::vector<char> is_lowest(p.stages(), 0);
  int k = 0;
  for (int l : lowest) {
    if (l >= 0) {
      is_lowest[l] = 1;
      ++k;
    }
  }
  for (int s = 0; s < k; ++s) {
    if (!is_lowest[s]) return false;
  }
  return true;
}

double SerialHorizon(const Problem& p) {
  double h = 0;
  for (int s = 0; s < p.stages(); ++s) {
    h += p.microbatches * (p.f[s] + p.b[s] + p.w[s]);
    if (p.offload) h += 2 * p.microbatches * (*p.offload)[s];
  }
  for (int s = 0; s + 1 < p.stages(); ++s) h += 2 * p.microbatches * CommTime(p, s);
  return h;
}

namespace {

class Builder {
 public:
  Builder(const Problem& p, const BuildOptions& o, const Hint& h)
      : p_(p), o_(o), hint_(h), S_(p.stages()), M_(p.microbatches), D_(p.devices) {}

  Model Build();

 private:
  // --- ops ---
  int AddOp(const Op& op) {
    const int id = static_cast<int>(op_.size());
    op_.push_back(op);
    T_.push_back(Duration(p_, op));
    dev_.push_back(DeviceOf(p_, op));
    act_.push_back(op.stage * M_ + op.microbatch);
    id_of_[p_.op_space().Index(op)] = id;
    return id;
  }
  int Id(OpType t, int s, int m) const { return id_of_[p_.op_space().Index(t, s, m)]; }
  bool Reach(int a, int b) const { return (reach_[a][b >> 6] >> (b & 63)) & 1; }
  // a before-or-equal b in the compute precedence order.
  bool Precedes(int a, int b) const { return a == b || Reach(a, b); }

  void ComputeGraph();
  void AddMemoryPrecedences();
  bool FixOrders();  // false: infeasible
  void ComputeWindows();
  void ComputeHints();
  void ChooseOffloadCandidates();

  // --- columns and rows ---
  int AddCol(double lb, double ub, bool integer, int hint = 0) {
    m_.cols.push_back(Column{lb, ub, integer, hint});
    return static_cast<int>(m_.cols.size()) - 1;
  }
  int AddBinary(int hint) { return AddCol(0, 1, true, hint); }
  void AddRow(Row r) {
    if (!r.terms.empty()) m_.rows.push_back(std::move(r));
  }
  // x_j >= x_i + T_i + lag unless some literal in `conds` is 0.
  void AddPrecedence(int i, int j, double lag, const std::vector<Lit>& conds);
  Lit Before(int a, int b) const;  // compute ops of one device
  Lit LinkBefore(int a, int b) const;
  int HintOrder(int a, int b) const;  // +1: a first in the hint, -1: b first, 0: unknown

  void AddOrderColumns();
  void AddOffload();
  void AddMemory();
  void AddObjective();
  void AddTriangleCuts();

  // The device_span objective subtracts the start of device d: head_d, or a
  // column when heads are not exact (see HeadsExact). Returns the constant part.
  double Sigma(RowBuilder& rb, int d) {
    if (p_.objective != Objective::kDeviceSpan) return 0.0;
    if (sigma_col_[d] >= 0) {
      rb.Add(1.0, sigma_col_[d]);
      return 0.0;
    }
    return head_[d];
  }

  void Infeasible(const std::string& why) {
    if (!m_.infeasible) {
      m_.infeasible = true;
      m_.infeasible_reason = why;
    }
  }

  const Problem& p_;
  BuildOptions o_;
  Hint hint_;
  const int S_, M_, D_;
  Model m_;

  std::vector<Op> op_;
  std::vector<double> T_;
  std::vector<int> dev_, act_;
  std::vector<int> id_of_;
  int nc_ = 0;  // compute ops are ids [0, nc_)

  std::vector<Edge> edges_;
  std::vector<std::vector<std::uint64_t>> reach_;
  std::vector<int> topo_;
  std::vector<double> es_, ls_;
  std::vector<double> head_, tail_, tail_min_, deadline_;

  std::vector<std::vector<int>> dev_ops_;
  std::vector<int> pos_;  // compute id -> index in dev_ops_[dev]
  std::vector<std::vector<Lit>>
      before_;  // per device, n*n: "row op before column op"; value -1: open

  std::vector<double> hx_;  // hinted start per op, NaN if none
  std::vector<char> hoff_;  // hinted offload per activation
  bool has_hint_ = false;

  std::vector<int> cand_;                           // activation -> index in offload arrays, or -1
  std::vector<int> o_id_, r_id_, y_col_;            // per candidate
  std::vector<std::vector<int>> dev_cands_;         // per device: candidate activations
  std::map<std::pair<int, int>, Lit> link_before_;  // (a, b) with a < b: "a before b" on a link
  std::vector<int> x_col_;
  std::vector<int> sigma_col_;
};

// Orders the memory limit forces whatever the other stages do. With micro-
// batches in order, when F(s,j) starts, F(s,0..j) have started and the B (W)
// that have ended are a prefix. Each live activation of s holds at least
// r = activation - offloadable (offload allowed) and F(s,j) holds all of its
// own, so static + activation + (j - b) r <= limit needs b >= j - cap B's
// ended: B(s, j-cap-1) precedes F(s,j). After its B an activation keeps
// activation - freed_by_b until its W (it cannot be offloaded any more), which
// bounds the W that must have ended the same way when that is the smaller part.
void Builder::AddMemoryPrecedences() {
  for (int s = 0; s < S_; ++s) {
    const int d = p_.stage_device[s];
    const double act = p_.activation[s];
    const double room = (*p_.memory_limit)[d] - p_.static_memory[d] - act;
    if (room < -1e-9 * std::max(1.0, act)) continue;  // the memory rows report it
    const double offl = p_.offload_allowed() ? p_.offloadable[s] : 0.0;
    const double r = act - offl;
    const auto add = [&](OpType t, double per) {
      const int cap = static_cast<int>(std::floor(room / per + 1e-9));
      for (int j = cap + 1; j < M_; ++j)
        edges_.push_back({Id(t, s, j - cap - 1), Id(OpType::kF, s, j), 0.0});
    };
    if (r > 1e-12) add(OpType::kB, r);
    const double rest = act - p_.freed_by_b[s];
    if (p_.split_backward && rest > 1e-12 && r >= rest - 1e-12) add(OpType::kW, rest);
  }
}

void Builder::ComputeGraph() {
  const OpSpace space = p_.op_space();
  id_of_.assign(space.size(), -1);
  for (OpType t : {OpType::kF, OpType::kB, OpType::kW}) {
    if (t == OpType::kW && !p_.split_backward) continue;
    for (int s = 0; s < S_; ++s) {
      for (int m = 0; m < M_; ++m) AddOp(Op{t, s, m});
    }
  }
  nc_ = static_cast<int>(op_.size());
  const std::vector<char> none(static_cast<std::size_t>(S_) * M_, 0);
  for (int j = 0; j < nc_; ++j) {
    ForEachPredecessor(p_, none, op_[j], [&](const Op& q, double lag) {
      edges_.push_back({id_of_[space.Index(q)], j, lag});
    });
  }
  if (o_.fix_microbatch_order) {
    for (int j = 0; j < nc_; ++j) {
      if (op_[j].microbatch > 0) {
        edges_.push_back({Id(op_[j].type, op_[j].stage, op_[j].microbatch - 1), j, 0.0});
      }
    }
  }
  if (o_.fix_microbatch_order && p_.memory_limited()) AddMemoryPrecedences();
  dev_ops_.assign(D_, {});
  pos_.assign(nc_, -1);
  for (int i = 0; i < nc_; ++i) {
    pos_[i] = static_cast<int>(dev_ops_[dev_[i]].size());
    dev_ops_[dev_[i]].push_back(i);
  }
  before_.resize(D_);
  for (int d = 0; d < D_; ++d) {
    const std::size_t n = dev_ops_[d].size();
    before_[d].assign(n * n, Lit::Const(-1));
  }
  head_ = Heads(p_);
  deadline_.assign(D_, o_.horizon);
  if (p_.objective == Objective::kDeviceSpan) {
    const bool exact = HeadsExact(p_);
    for (int d = 0; d < D_; ++d) deadline_[d] = exact ? head_[d] + o_.horizon : SerialHorizon(p_);
  }
}

// Topological order, closure, earliest and latest starts under the current
// edges and fixed pairs (with the load of a device's fixed predecessors and
// successors folded into the windows).
void Builder::ComputeWindows() {
  std::vector<std::vector<std::pair<int, double>>> succ(nc_), pred(nc_);
  std::vector<int> indeg(nc_, 0);
  for (const Edge& e : edges_) {
    succ[e.from].push_back({e.to, e.lag});
    pred[e.to].push_back({e.from, e.lag});
    ++indeg[e.to];
  }
  topo_.clear();
  for (int i = 0; i < nc_; ++i) {
    if (indeg[i] == 0) topo_.push_back(i);
  }
  for (std::size_t k = 0; k < topo_.size(); ++k) {
    for (auto [j, lag] : succ[topo_[k]]) {
      if (--indeg[j] == 0) topo_.push_back(j);
    }
  }
  const std::size_t words = (nc_ + 63) / 64;
  reach_.assign(nc_, std::vector<std::uint64_t>(words, 0));
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    const int i = *it;
    for (auto [j, lag] : succ[i]) {
      reach_[i][j >> 6] |= std::uint64_t{1} << (j & 63);
      for (std::size_t w = 0; w < words; ++w) reach_[i][w] |= reach_[j][w];
    }
  }
  // Tails: the longest path from an op's end to the end of the iteration.
  tail_.assign(nc_, 0.0);
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    for (auto [j, lag] : succ[*it]) tail_[*it] = std::max(tail_[*it], lag + T_[j] + tail_[j]);
  }
  tail_min_.assign(D_, 0.0);
  if (p_.objective == Objective::kMakespan) {
    for (int d = 0; d < D_; ++d) {
      double t = kInf;
      for (int i : dev_ops_[d]) t = std::min(t, tail_[i]);
      tail_min_[d] = dev_ops_[d].empty() ? 0.0 : t;
    }
  }
  // Load of the fixed predecessors / successors of each op on its device.
  std::vector<double> load_before(nc_, 0.0), load_after(nc_, 0.0);
  for (int d = 0; d < D_; ++d) {
    const auto& ops = dev_ops_[d];
    const std::size_t n = ops.size();
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = 0; b < n; ++b) {
        if (a == b) continue;
        const Lit& l = before_[d][a * n + b];
        if (l.is_const() && l.value == 1) {
          load_after[ops[a]] += T_[ops[b]];
          load_before[ops[b]] += T_[ops[a]];
        }
      }
    }
  }
  es_.assign(nc_, 0.0);
  for (int i : topo_) {
    double e = std::max(0.0, head_[dev_[i]] + load_before[i]);
    for (auto [q, lag] : pred[i]) e = std::max(e, es_[q] + T_[q] + lag);
    es_[i] = e;
  }
  ls_.assign(nc_, 0.0);
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    const int i = *it;
    const int d = dev_[i];
    double l = deadline_[d] - T_[i] - load_after[i] - tail_min_[d];
    if (p_.objective == Objective::kMakespan) l = std::min(l, o_.horizon - T_[i] - tail_[i]);
    for (auto [j, lag] : succ[i]) l = std::min(l, ls_[j] - lag - T_[i]);
    ls_[i] = l;
  }
}

bool Builder::FixOrders() {
  const double eps = 1e-9 * std::max(1.0, o_.horizon);
  for (int pass = 0; pass < 64; ++pass) {
    ComputeWindows();
    for (int i = 0; i < nc_; ++i) {
      if (es_[i] > ls_[i] + eps) {
        Infeasible("op " + ToString(op_[i]) + " has no start time within the horizon");
        return false;
      }
    }
    bool changed = false;
    for (int d = 0; d < D_; ++d) {
      const auto& ops = dev_ops_[d];
      const std::size_t n = ops.size();
      for (std::size_t a = 0; a < n; ++a) {
        for (std::size_t b = a + 1; b < n; ++b) {
          Lit& ab = before_[d][a * n + b];
          if (ab.is_const() && ab.value >= 0) continue;
          const int i = ops[a], j = ops[b];
          bool i_first = false, j_first = false;
          if (Reach(i, j)) {
            i_first = true;
          } else if (Reach(j, i)) {
            j_first = true;
          } else {
            const bool i_after_j = es_[j] + T_[j] <= ls_[i] + eps;
            const bool j_after_i = es_[i] + T_[i] <= ls_[j] + eps;
            if (!i_after_j && !j_after_i) {
              Infeasible("ops " + ToString(op_[i]) + " and " + ToString(op_[j]) +
                         " cannot both run within the horizon");
              return false;
            }
            if (!i_after_j) {
              i_first = true;
              edges_.push_back({i, j, 0.0});
            } else if (!j_after_i) {
              j_first = true;
              edges_.push_back({j, i, 0.0});
            }
          }
          if (i_first || j_first) {
            ab = Lit::Const(i_first ? 1 : 0);
            before_[d][b * n + a] = Lit::Const(i_first ? 0 : 1);
            changed = true;
          }
        }
      }
    }
    if (!changed) return true;
  }
  ComputeWindows();
  return true;
}

void Builder::ComputeHints() {
  hx_.assign(op_.size(), std::numeric_limits<double>::quiet_NaN());
  hoff_.assign(static_cast<std::size_t>(S_) * M_, 0);
  if (!hint_.schedule || !hint_.sim) return;
  has_hint_ = true;
  const OpSpace space = p_.op_space();
  hoff_ = OffloadedSet(p_, *hint_.schedule);
  const bool any_offload = std::find(hoff_.begin(), hoff_.end(), 1) != hoff_.end();
  for (int i = 0; i < nc_; ++i) hx_[i] = hint_.sim->start[space.Index(op_[i])];
  // Relabel each (type, stage) so micro-batch k takes the k-th start: the same
  // times, in the fixed order the model uses (valid without offload).
  if (o_.fix_microbatch_order && !any_offload) {
    for (OpType t : {OpType::kF, OpType::kB, OpType::kW}) {
      if (t == OpType::kW && !p_.split_backward) continue;
      for (int s = 0; s < S_; ++s) {
        std::vector<double> v;
        for (int m = 0; m < M_; ++m) v.push_back(hx_[Id(t, s, m)]);
        std::sort(v.begin(), v.end());
        for (int m = 0; m < M_; ++m) hx_[Id(t, s, m)] = v[m];
      }
    }
  }
}

int Builder::HintOrder(int a, int b) const {
  if (!has_hint_ || std::isnan(hx_[a]) || std::isnan(hx_[b])) return 0;
  const auto key = [&](int i) { return std::make_tuple(hx_[i], hx_[i] + T_[i], i); };
  return key(a) < key(b) ? 1 : -1;
}

void Builder::ChooseOffloadCandidates() {
  cand_.assign(static_cast<std::size_t>(S_) * M_, -1);
  dev_cands_.assign(D_, {});
  m_.offload_col.assign(static_cast<std::size_t>(S_) * M_, -1);
  if (!p_.offload_allowed() || !p_.memory_limited()) return;
  const double eps = 1e-9 * std::max(1.0, o_.horizon);
  for (int s = 0; s < S_; ++s) {
    const double t = (*p_.offload)[s];
    if (p_.offloadable[s] <= 0) continue;
    for (int m = 0; m < M_; ++m) {
      const int f = Id(OpType::kF, s, m), b = Id(OpType::kB, s, m);
      const double es_o = es_[f] + T_[f], ls_r = ls_[b] - t;
      if (es_o + t > ls_r + eps) continue;  // no room for O then R before B
      const int a = s * M_ + m;
      cand_[a] = static_cast<int>(o_id_.size());
      const int o = AddOp(Op{OpType::kO, s, m});
      const int r = AddOp(Op{OpType::kR, s, m});
      es_.push_back(es_o);
      ls_.push_back(ls_r - t);
      es_.push_back(es_o + t);
      ls_.push_back(ls_r);
      o_id_.push_back(o);
      r_id_.push_back(r);
      dev_cands_[p_.stage_device[s]].push_back(a);
    }
  }
  if (has_hint_) {
    const OpSpace space = p_.op_space();
    hx_.resize(op_.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t k = 0; k < o_id_.size(); ++k) {
      for (int i : {o_id_[k], r_id_[k]}) {
        const double v = hint_.sim->start[space.Index(op_[i])];
        if (!std::isnan(v)) hx_[i] = v;
      }
    }
  }
}

void Builder::AddPrecedence(int i, int j, double lag, const std::vector<Lit>& conds) {
  const double big = ls_[i] + T_[i] + lag - es_[j];
  if (big <= 0) return;  // holds for every start in the windows
  RowBuilder rb;
  rb.Add(1.0, x_col_[j]);
  rb.Add(-1.0, x_col_[i]);
  for (const Lit& l : conds) {
    if (l.is_const()) {
      if (l.value < 0.5) return;  // the condition never holds
      continue;
    }
    rb.AddConstant(big);
    rb.Add(-big, l);
  }
  AddRow(rb.Finish(Sense::kGe, T_[i] + lag));
}

Lit Builder::Before(int a, int b) const {
  const int d = dev_[a];
  const std::size_t n = dev_ops_[d].size();
  return before_[d][pos_[a] * n + pos_[b]];
}

Lit Builder::LinkBefore(int a, int b) const {
  auto it = link_before_.find({std::min(a, b), std::max(a, b)});
  if (it == link_before_.end()) return Lit::Const(-1);
  return a < b ? it->second : it->second.Not();
}

void Builder::AddOrderColumns() {
  // Open pairs, created in order of their earliest start so that a depth-first
  // search decides early ops first.
  struct Open {
    int d;
    std::size_t a, b;
    double key;
  };
  std::vector<Open> open;
  for (int d = 0; d < D_; ++d) {
    const auto& ops = dev_ops_[d];
    const std::size_t n = ops.size();
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = a + 1; b < n; ++b) {
        const Lit& l = before_[d][a * n + b];
        if (l.is_const() && l.value >= 0) {
          ++m_.pairs_fixed;
        } else {
          open.push_back({d, a, b, std::min(es_[ops[a]], es_[ops[b]])});
        }
      }
    }
  }
  std::stable_sort(open.begin(), open.end(),
                   [](const Open& x, const Open& y) { return x.key < y.key; });
  for (const Open& o : open) {
    const auto& ops = dev_ops_[o.d];
    const std::size_t n = ops.size();
    const int i = ops[o.a], j = ops[o.b];
    const int col = AddBinary(HintOrder(i, j));
    ++m_.order_binaries;
    before_[o.d][o.a * n + o.b] = Lit::Var(col);
    before_[o.d][o.b * n + o.a] = Lit::Var(col, true);
  }
  // Disjunctions: i before j, or j before i.
  for (const Open& o : open) {
    const auto& ops = dev_ops_[o.d];
    const int i = ops[o.a], j = ops[o.b];
    const Lit z = Before(i, j);
    AddPrecedence(i, j, 0.0, {z});
    AddPrecedence(j, i, 0.0, {z.Not()});
  }
}

void Builder::AddOffload() {
  const std::size_t k = o_id_.size();
  if (k == 0) return;
  y_col_.resize(k);
  for (int a = 0; a < S_ * M_; ++a) {
    const int c = cand_[a];
    if (c < 0) continue;
    y_col_[c] = AddBinary(has_hint_ ? (hoff_[a] ? 1 : -1) : -1);
    m_.offload_col[a] = y_col_[c];
    ++m_.offload_binaries;
  }
  for (int a = 0; a < S_ * M_; ++a) {
    const int c = cand_[a];
    if (c < 0) continue;
    const int s = a / M_, m = a % M_;
    const Lit y = Lit::Var(y_col_[c]);
    AddPrecedence(Id(OpType::kF, s, m), o_id_[c], 0.0, {y});
    AddPrecedence(o_id_[c], r_id_[c], 0.0, {y});
    AddPrecedence(r_id_[c], Id(OpType::kB, s, m), 0.0, {y});
    link_before_[{o_id_[c], r_id_[c]}] = Lit::Const(1);
  }
  // Copy ops of each host link, one at a time.
  const std::vector<int> link = LinkOfDevice(p_);
  const double eps = 1e-9 * std::max(1.0, o_.horizon);
  std::vector<std::vector<int>> lane(p_.host_links.size());
  for (int a = 0; a < S_ * M_; ++a) {
    if (cand_[a] < 0) continue;
    const int l = link[p_.stage_device[a / M_]];
    lane[l].push_back(o_id_[cand_[a]]);
    lane[l].push_back(r_id_[cand_[a]]);
  }
  for (const auto& ops : lane) {
    for (std::size_t x = 0; x < ops.size(); ++x) {
      for (std::size_t w = x + 1; w < ops.size(); ++w) {
        int i = ops[x], j = ops[w];
        if (i > j) std::swap(i, j);
        const int a = act_[i], b = act_[j];
        if (a == b) continue;  // O before R, above
        const Lit ya = Lit::Var(y_col_[cand_[a]]), yb = Lit::Var(y_col_[cand_[b]]);
        const int fa = Id(OpType::kF, a / M_, a % M_), ba = Id(OpType::kB, a / M_, a % M_);
        const int fb = Id(OpType::kF, b / M_, b % M_), bb = Id(OpType::kB, b / M_, b % M_);
        int first = 0;  // +1: i first, -1: j first
        if (Reach(ba, fb)) {
          first = 1;
        } else if (Reach(bb, fa)) {
          first = -1;
        } else if (o_.fix_microbatch_order && a / M_ == b / M_) {
          // Same stage: offloaded micro-batches keep their order on the link.
          const bool a_lower = a < b;
          const int lo = a_lower ? i : j, hi = a_lower ? j : i;
          const bool lo_o = op_[lo].type == OpType::kO, hi_o = op_[hi].type == OpType::kO;
          if (lo_o == hi_o || (lo_o && !hi_o)) first = a_lower ? 1 : -1;
        }
        if (first == 0) {
          const bool i_after_j = es_[j] + T_[j] <= ls_[i] + eps;
          const bool j_after_i = es_[i] + T_[i] <= ls_[j] + eps;
          if (!i_after_j && !j_after_i) {
            // Both cannot be offloaded.
            RowBuilder rb;
            rb.Add(1.0, ya);
            rb.Add(1.0, yb);
            AddRow(rb.Finish(Sense::kLe, 1.0));
            link_before_[{i, j}] = Lit::Const(1);  // irrelevant: never both
            continue;
          }
          if (!i_after_j) first = 1;
          if (!j_after_i) first = -1;
        }
        if (first != 0) {
          const int u = first > 0 ? i : j, v = first > 0 ? j : i;
          AddPrecedence(u, v, 0.0, {ya, yb});
          link_before_[{i, j}] = Lit::Const(first > 0 ? 1 : 0);
          continue;
        }
        int hint = 0;
        if (has_hint_) hint = hoff_[a] && hoff_[b] ? HintOrder(i, j) : -1;
        const int h = AddBinary(hint);
        ++m_.copy_order_binaries;
        for (const Lit& y : {ya, yb}) {  // h = 1 only when both are offloaded
          RowBuilder rb;
          rb.Add(1.0, h);
          rb.Add(-1.0, y);
          AddRow(rb.Finish(Sense::kLe, 0.0));
        }
        const Lit hl = Lit::Var(h);
        AddPrecedence(i, j, 0.0, {hl});
        AddPrecedence(j, i, 0.0, {hl.Not(), ya, yb});
        link_before_[{i, j}] = hl;
      }
    }
  }
}

void Builder::AddMemory() {
  if (!p_.memory_limited()) return;
  const double eps = 1e-9 * std::max(1.0, o_.horizon);
  // "R of candidate c has started by the start of F i": what F i's row counts.
  // kind 0: never (F first), 1: whenever c is offloaded, 2: the column `col`.
  struct Started {
    int kind;
    int col;
  };
  std::map<std::pair<int, int>, Started> started;  // (F id, candidate)

  for (int d = 0; d < D_; ++d) {
    const double limit = (*p_.memory_limit)[d];
    const double base = p_.static_memory[d];
    // Rows at every F start.
    for (int e : dev_ops_[d]) {
      if (op_[e].type != OpType::kF) continue;
      RowBuilder rb;
      rb.AddConstant(base + Allocates(p_, op_[e]));
      for (int k : dev_ops_[d]) {
        if (k == e) continue;
        const double alloc = Allocates(p_, op_[k]), fr = Frees(p_, op_[k]);
        if (alloc > 0) rb.Add(alloc, Before(k, e));
        if (fr > 0) rb.Add(-fr, Before(k, e));
      }
      for (int a : dev_cands_[d]) {
        const int c = cand_[a];
        const int fa = Id(OpType::kF, a / M_, a % M_), ba = Id(OpType::kB, a / M_, a % M_);
        const int o = o_id_[c], r = r_id_[c];
        const double off = p_.offloadable[a / M_];
        const Lit y = Lit::Var(y_col_[c]);
        // R started by x_e (counts its reload).
        Started st{2, -1};
        if (Reach(ba, e)) {
          st.kind = 1;
        } else if ((Precedes(e, fa) && T_[e] > 0) || es_[r] > ls_[e] + eps) {
          st.kind = 0;
        } else if (ls_[r] < es_[e] - eps) {
          st.kind = 1;
        } else {
          int hint = 0;
          if (has_hint_) hint = hoff_[a] && hx_[r] <= hx_[e] ? 1 : -1;
          st.col = AddBinary(hint);
          ++m_.memory_binaries;
          RowBuilder rb2;  // u <= y
          rb2.Add(1.0, st.col);
          rb2.Add(-1.0, y);
          AddRow(rb2.Finish(Sense::kLe, 0.0));
          const Lit u = Lit::Var(st.col);
          AddPrecedence(r, e, -T_[r], {u});           // u = 1: x_R <= x_F
          AddPrecedence(e, r, -T_[e], {u.Not(), y});  // u = 0: x_F <= x_R
        }
        started[{e, c}] = st;
        if (st.kind == 1) rb.Add(off, y);
        if (st.kind == 2) rb.Add(off, st.col);
        // O ended by x_e (counts its offload).
        if (Reach(ba, e)) {
          rb.Add(-off, y);
        } else if ((Precedes(e, fa) && T_[e] + T_[o] > 0) || es_[o] + T_[o] > ls_[e] + eps) {
          // never ended before F starts
        } else if (ls_[o] + T_[o] <= es_[e] - eps) {
          rb.Add(-off, y);
        } else {
          int hint = 0;
          if (has_hint_) hint = hoff_[a] && hx_[o] + T_[o] <= hx_[e] + eps ? 1 : -1;
          const int g = AddBinary(hint);
          ++m_.memory_binaries;
          RowBuilder rb2;
          rb2.Add(1.0, g);
          rb2.Add(-1.0, y);
          AddRow(rb2.Finish(Sense::kLe, 0.0));
          AddPrecedence(o, e, 0.0, {Lit::Var(g)});
          rb.Add(-off, g);
        }
      }
      if (rb.empty()) {
        if (rb.constant() > limit + eps) {
          Infeasible("memory on device " + std::to_string(d) + " exceeds its limit when " +
                     ToString(op_[e]) + " starts in every schedule");
        }
        continue;
      }
      if (rb.constant() + rb.MaxVariablePart() <= limit + eps) continue;  // never binding
      AddRow(rb.Finish(Sense::kLe, limit));
    }
    // Rows at every R start, relaxed when the activation stays on the device.
    for (int a : dev_cands_[d]) {
      const int c = cand_[a];
      const int fa = Id(OpType::kF, a / M_, a % M_), ba = Id(OpType::kB, a / M_, a % M_);
      const int r = r_id_[c];
      const Lit ya = Lit::Var(y_col_[c]);
      RowBuilder rb;
      rb.AddConstant(base);  // its own offload (-offloadable) and reload (+offloadable) cancel
      for (int k : dev_ops_[d]) {
        if (op_[k].type == OpType::kF) {
          const Started st = started.at({k, c});
          const double alloc = Allocates(p_, op_[k]);
          if (st.kind == 0) rb.Add(alloc, Lit::Const(1));
          if (st.kind == 2) rb.Add(alloc, Lit::Var(st.col, true));
          continue;
        }
        const double fr = Frees(p_, op_[k]);
        if (fr <= 0) continue;
        if (Reach(k, fa)) {
          rb.Add(-fr, Lit::Const(1));
        } else if (Precedes(ba, k) || es_[k] + T_[k] > ls_[r] + eps) {
          // ends after the reload starts
        } else if (ls_[k] + T_[k] <= es_[r] - eps) {
          rb.Add(-fr, Lit::Const(1));
        } else {
          int hint = 0;
          if (has_hint_) hint = hoff_[a] && hx_[k] + T_[k] <= hx_[r] + eps ? 1 : -1;
          const int g = AddBinary(hint);
          ++m_.memory_binaries;
          RowBuilder rb2;
          rb2.Add(1.0, g);
          rb2.Add(-1.0, ya);
          AddRow(rb2.Finish(Sense::kLe, 0.0));
          AddPrecedence(k, r, 0.0, {Lit::Var(g)});
          rb.Add(-fr, g);
        }
      }
      for (int b : dev_cands_[d]) {
        if (b == a) continue;
        const int cb = cand_[b];
        const Lit yb = Lit::Var(y_col_[cb]);
        const double off_b = p_.offloadable[b / M_];
        // Other reloads started by now (same link: the link order says).
        const Lit rb_first = LinkBefore(r_id_[cb], r);
        if (rb_first.is_const()) {
          if (rb_first.value == 1) rb.Add(off_b, yb);
        } else if (!rb_first.neg) {
          rb.Add(off_b, rb_first);  // the column is <= y_b
        } else {
          // w >= y_b - h: R_b counts when offloaded and not after R_a.
          const int w = AddCol(0, 1, false);
          RowBuilder rb2;
          rb2.Add(1.0, w);
          rb2.Add(-1.0, yb);
          rb2.Add(1.0, Lit::Var(rb_first.col));
          AddRow(rb2.Finish(Sense::kGe, 0.0));
          rb.Add(off_b, w);
        }
        // Other offloads ended by now.
        const Lit ob_first = LinkBefore(o_id_[cb], r);
        if (ob_first.is_const()) {
          if (ob_first.value == 1) rb.Add(-off_b, yb);
        } else if (!ob_first.neg) {
          rb.Add(-off_b, ob_first);
        } else {
          // g <= 1 - h and g <= y_b: the offload ended first and happened.
          const int g = AddCol(0, 1, false);
          RowBuilder rb2;
          rb2.Add(1.0, g);
          rb2.Add(1.0, Lit::Var(ob_first.col));
          AddRow(rb2.Finish(Sense::kLe, 1.0));
          RowBuilder rb3;
          rb3.Add(1.0, g);
          rb3.Add(-1.0, yb);
          AddRow(rb3.Finish(Sense::kLe, 0.0));
          rb.Add(-off_b, g);
        }
      }
      const double big = rb.constant() + rb.MaxVariablePart() - limit;
      if (big <= eps) continue;
      if (rb.empty() && rb.constant() <= limit + eps) continue;
      // sum <= limit + big * (1 - y_a)
      rb.Add(big, ya);
      AddRow(rb.Finish(Sense::kLe, limit + big));
    }
  }
}

void Builder::AddObjective() {
  const bool span = p_.objective == Objective::kDeviceSpan;
  const int C = m_.objective_col;
  for (int i = 0; i < nc_; ++i) {
    const int d = dev_[i];
    bool last = true;
    if (span) {
      for (int j : dev_ops_[d]) {
        if (j != i && Reach(i, j)) {
          last = false;
          break;
        }
      }
    } else {
      for (std::uint64_t w : reach_[i]) {
        if (w) {
          last = false;
          break;
        }
      }
    }
    if (!last) continue;
    RowBuilder rb;
    rb.Add(1.0, C);
    rb.Add(-1.0, x_col_[i]);
    AddRow(rb.Finish(Sense::kGe, T_[i] - Sigma(rb, d)));
  }
  if (!o_.load_cuts) return;
  for (int i = 0; i < nc_; ++i) {
    const int d = dev_[i];
    RowBuilder after, before;
    after.Add(1.0, C);
    after.Add(-1.0, x_col_[i]);
    before.Add(1.0, x_col_[i]);
    bool var_after = false, var_before = false;
    for (int j : dev_ops_[d]) {
      if (j == i || T_[j] == 0) continue;
      const Lit ij = Before(i, j);
      after.Add(-T_[j], ij);
      before.Add(-T_[j], ij.Not());
      var_after |= !ij.is_const();
      var_before |= !ij.is_const();
    }
    if (var_after) AddRow(after.Finish(Sense::kGe, T_[i] + tail_min_[d] - Sigma(after, d)));
    if (var_before) AddRow(before.Finish(Sense::kGe, head_[d]));
  }
}

void Builder::AddTriangleCuts() {
  if (!o_.triangle_cuts) return;
  for (int d = 0; d < D_; ++d) {
    const auto& ops = dev_ops_[d];
    const std::size_t n = ops.size();
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = a + 1; b < n; ++b) {
        const Lit ab = before_[d][a * n + b];
        for (std::size_t c = b + 1; c < n; ++c) {
          const Lit bc = before_[d][b * n + c], ac = before_[d][a * n + c];
          const int vars = !ab.is_const() + !bc.is_const() + !ac.is_const();
          if (vars < 2) continue;
          // No cycle a->b->c->a, and none a->c->b->a.
          for (int orient = 0; orient < 2; ++orient) {
            if (m_.triangle_cuts >= o_.max_triangle_cuts) return;
            RowBuilder rb;
            if (orient == 0) {
              rb.Add(1.0, ab);
              rb.Add(1.0, bc);
              rb.Add(-1.0, ac);
            } else {
              rb.Add(-1.0, ab);
              rb.Add(-1.0, bc);
              rb.Add(1.0, ac);
            }
            const double rhs = orient == 0 ? 1.0 : 0.0;
            if (rb.constant() + rb.MaxVariablePart() <= rhs + 1e-9) continue;
            AddRow(rb.Finish(Sense::kLe, rhs));
            ++m_.triangle_cuts;
          }
        }
      }
    }
  }
}

Model Builder::Build() {
  ComputeGraph();
  ComputeHints();
  m_.objective_col =
      AddCol(std::max(0.0, o_.lower_bound), o_.horizon + 1e-9 * std::max(1.0, o_.horizon), false);
  if (o_.lower_bound > o_.horizon + 1e-9 * std::max(1.0, o_.horizon)) {
    Infeasible("the lower bound exceeds the horizon");
  }
  if (!FixOrders()) return std::move(m_);
  ChooseOffloadCandidates();
  x_col_.resize(op_.size());
  for (std::size_t i = 0; i < op_.size(); ++i) {
    x_col_[i] = AddCol(es_[i], std::max(es_[i], ls_[i]), false);
  }
  sigma_col_.assign(D_, -1);
  if (p_.objective == Objective::kDeviceSpan && !HeadsExact(p_)) {
    // The span of d starts at its first op: no later than any F of its lowest stage.
    for (int d = 0; d < D_; ++d) {
      int lowest = -1;
      for (int s = S_ - 1; s >= 0; --s) {
        if (p_.stage_device[s] == d) lowest = s;
      }
      if (lowest < 0) continue;
      sigma_col_[d] = AddCol(head_[d], deadline_[d], false);
      for (int m = 0; m < M_; ++m) {
        RowBuilder rb;
        rb.Add(1.0, x_col_[Id(OpType::kF, lowest, m)]);
        rb.Add(-1.0, sigma_col_[d]);
        AddRow(rb.Finish(Sense::kGe, 0.0));
      }
    }
  }
  for (const Edge& e : edges_) AddPrecedence(e.from, e.to, e.lag, {});
  AddOrderColumns();
  AddOffload();
  AddMemory();
  AddObjective();
  AddTriangleCuts();

  m_.ops = op_;
  m_.start_col = x_col_;
  m_.activation = act_;
  m_.topo_rank.assign(op_.size(), 0);
  for (std::size_t k = 0; k < topo_.size(); ++k) m_.topo_rank[topo_[k]] = static_cast<int>(k);
  for (std::size_t c = 0; c < o_id_.size(); ++c) {
    m_.topo_rank[o_id_[c]] = static_cast<int>(topo_.size() + 2 * c);
    m_.topo_rank[r_id_[c]] = static_cast<int>(topo_.size() + 2 * c + 1);
  }
  return std::move(m_);
}

}  // namespace

std::int64_t Model::nonzeros() const {
  std::int64_t n = 0;
  for (const Row& r : rows) n += static_cast<std::int64_t>(r.terms.size());
  return n;
}

Model BuildModel(const Problem& p, const BuildOptions& opt, const Hint& hint) {
  return Builder(p, opt, hint).Build();
}

Schedule Decode(const Problem& p, const Model& m, const std::vector<double>& values) {
  Schedule s = Schedule::Empty(p, "milp");
  const std::vector<int> link = LinkOfDevice(p);
  double scale = 1.0;
  for (int c : m.start_col) scale = std::max(scale, std::abs(values[c]));
  const double grid = 1e-7 * scale;
  struct Key {
    double start, end;
    int rank, op;
  };
  std::vector<std::vector<Key>> compute(p.devices), copy(p.host_links.size());
  for (std::size_t i = 0; i < m.ops.size(); ++i) {
    const Op& op = m.ops[i];
    const double x = std::round(values[m.start_col[i]] / grid) * grid;
    const double end = std::round((values[m.start_col[i]] + Duration(p, op)) / grid) * grid;
    const Key k{x, end, m.topo_rank[i], static_cast<int>(i)};
    const int d = DeviceOf(p, op);
    if (IsCompute(op.type)) {
      compute[d].push_back(k);
    } else {
      const int y = m.offload_col[m.activation[i]];
      if (y >= 0 && values[y] > 0.5) copy[link[d]].push_back(k);
    }
  }
  const auto order = [&](std::vector<Key>& keys, std::vector<Op>& lane) {
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      return std::tie(a.start, a.end, a.rank) < std::tie(b.start, b.end, b.rank);
    });
    for (const Key& k : keys) lane.push_back(m.ops[k.op]);
  };
  for (int d = 0; d < p.devices; ++d) order(compute[d], s.compute[d]);
  for (std::size_t l = 0; l < copy.size(); ++l) order(copy[l], s.copy[l]);
  return s;
}

double TimeGrain(const Problem& p) {
  std::vector<double> v;
  for (int s = 0; s < p.stages(); ++s) {
    v.push_back(p.f[s]);
    v.push_back(p.b[s]);
    v.push_back(p.w[s]);
    if (p.offload) v.push_back((*p.offload)[s]);
  }
  for (double c : p.comm) v.push_back(c);
  for (double g :
       {1.0, 0.5, 0.25, 0.2, 0.125, 0.1, 0.05, 0.04, 0.025, 0.02, 0.01, 0.005, 0.002, 0.001}) {
    bool ok = true;
    for (double x : v) {
      const double q = x / g;
      if (std::abs(q - std::round(q)) > 1e-9 * std::max(1.0, q)) {
        ok = false;
        break;
      }
    }
    if (ok) return g;
  }
  return 0.0;
}

double ModelObjective(const Problem& p, const SimResult& sim) {
  if (p.objective == Objective::kMakespan) return sim.makespan;
  if (!HeadsExact(p)) return sim.objective;
  const std::vector<double> head = Heads(p);
  std::vector<double> last(p.devices, -kInf);
  const OpSpace space = p.op_space();
  for (int i = 0; i < space.size(); ++i) {
    if (std::isnan(sim.end[i])) continue;
    const int d = DeviceOf(p, space.At(i));
    last[d] = std::max(last[d], sim.end[i]);
  }
  double obj = 0;
  for (int d = 0; d < p.devices; ++d) {
    if (last[d] > -kInf) obj = std::max(obj, last[d] - head[d]);
  }
  return std::max(obj, sim.objective);
}

}  // namespace optpipe::milp
