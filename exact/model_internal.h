// Internals of the MILP builder (exact/model.h): the row helpers and the
// Builder whose steps the exact/model_*.cc files define, one concept each.
// Private to exact/: nothing outside it includes this header.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "exact/model.h"

namespace optpipe::milp::internal {

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

// head_d: the earliest any op of device d can start (an F of its lowest stage).
std::vector<double> Heads(const Problem& p);

// Builds one Model. Ops get dense ids: compute ops [0, nc_), then the O and R
// of every offload candidate. The steps run in the order Build() calls them;
// each file exact/model_*.cc defines one group of them.
class Builder {
 public:
  Builder(const Problem& p, const BuildOptions& o, const Hint& h)
      : p_(p), o_(o), hint_(h), S_(p.stages()), M_(p.microbatches), D_(p.devices) {}

  Model Build();  // exact/model.cc

 private:
  // Branches on the open pairs of the windows' fixing (exact/order_search.cc).
  friend class OrderSearcher;

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
  bool Reach(int a, int b) const { return (reach_[a * words_ + (b >> 6)] >> (b & 63)) & 1; }
  // a before-or-equal b in the compute precedence order.
  bool Precedes(int a, int b) const { return a == b || Reach(a, b); }
  // Tolerance on times: relative to the horizon.
  double Eps() const { return 1e-9 * std::max(1.0, o_.horizon); }

  // --- graph, closure and windows (exact/model_windows.cc) ---
  void ComputeGraph();
  void AddMemoryPrecedences();
  bool FixOrders();  // false: infeasible
  void ComputeWindows();
  // Order a pair of device d's ops (indices into dev_ops_[d]), or open it
  // again; both keep the loads of fixed predecessors and successors.
  void SetOrder(int d, std::size_t a, std::size_t b, bool a_first);
  void Unorder(int d, std::size_t a, std::size_t b);
  // What the windows allow of two ops of one lane: i and j in either order,
  // only i first (i cannot start after j ends), only j first, or neither.
  enum class WindowOrder { kEither, kIFirst, kJFirst, kNeither };
  WindowOrder OrderByWindows(int i, int j) const;

  // --- warm-start hints (exact/model_hints.cc) ---
  void ComputeHints();
  int HintOrder(int a, int b) const;  // +1: a first in the hint, -1: b first, 0: unknown

  // --- columns and rows ---
  int AddCol(double lb, double ub, bool integer, int hint = 0) {
    m_.cols.push_back(Column{lb, ub, integer, hint});
    return static_cast<int>(m_.cols.size()) - 1;
  }
  int AddBinary(int hint) { return AddCol(0, 1, true, hint); }
  void AddRow(Row r) {
    if (!r.terms.empty()) m_.rows.push_back(std::move(r));
  }
  // col <= bound: an indicator that may be 1 only when `bound` is.
  void AddAtMost(int col, const Lit& bound) {
    RowBuilder rb;
    rb.Add(1.0, col);
    rb.Add(-1.0, bound);
    AddRow(rb.Finish(Sense::kLe, 0.0));
  }

  // --- device order (exact/model_orders.cc) ---
  // x_j >= x_i + T_i + lag unless some literal in `conds` is 0.
  void AddPrecedence(int i, int j, double lag, const std::vector<Lit>& conds);
  Lit Before(int a, int b) const;  // compute ops of one device
  void AddOrderColumns();

  // --- offload (exact/model_offload.cc) ---
  void ChooseOffloadCandidates();
  Lit LinkBefore(int a, int b) const;
  void AddOffload();

  // --- memory (exact/model_memory.cc) ---
  void AddMemory();
  Lit EndedBy(int op, int at, int graph, const Lit& ended, const Lit& guard, int a);

  // --- objective and cuts (exact/model_objective.cc) ---
  void AddSpanStarts();
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
  std::vector<std::uint64_t> reach_;  // nc_ rows of words_: the ops each op reaches
  std::size_t words_ = 0;
  // ComputeWindows' scratch, kept between calls: edges by source and by target.
  std::vector<int> succ_start_, pred_start_, indeg_;
  std::vector<std::pair<int, double>> succ_, pred_;
  // Per op: the durations of the ops fixed before / after it on its device.
  std::vector<double> load_before_, load_after_;
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

}  // namespace optpipe::milp::internal
