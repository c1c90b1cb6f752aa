// The clauses of one SAT probe of SearchTimeIndexed (exact/sat_search.h):
// "does a schedule end by H grains?", in the order encoding for CaDiCaL.
// Internal to exact/.
//
//   CaDiCaL::Solver solver;
//   sat::Encoding enc(p, horizon, g, q, solver);
//   if (enc.Build(max_literals, stop) == sat::Encoding::Built::kOk) {
//     solver.assume(enc.Cap(target));   // every op ends by target <= horizon
//     if (solver.solve() == 10) TimedSchedule t = enc.Decode();
//   }
#pragma once

#include <cadical.hpp>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/problem.h"
#include "core/schedule.h"
#include "core/simulator.h"

namespace optpipe::sat {

// The most grains an encoding's horizon may span: a horizon of more is too
// large (the encoding adds up to three such spans in an int: a window's end,
// a duration and a lag).
constexpr int kMaxGrains = 1 << 28;

// x in grains of g, to the nearest, clamped to [-kMaxGrains - 1, kMaxGrains + 1].
int Grains(double x, double g);

// The largest grain of which every amount an activation takes or frees is a
// multiple (0: none).
double MemoryGrain(const Problem& p);

// One probe: every op starts at an integer t in [0, H) grains and ends by H.
class Encoding {
 public:
  enum class Built { kOk, kEmpty, kTooLarge, kCut };

  Encoding(const Problem& p, int horizon, double g, double q, CaDiCaL::Solver& solver)
      : p_(p), H_(horizon), g_(g), q_(q), solver_(solver), S_(p.stages()), M_(p.microbatches) {}

  // kTooLarge: the horizon spans kMaxGrains or more, or the lanes' order
  // clauses and the start variables alone would pass max_literals;
  // kCut: `stop` said so while building.
  Built Build(std::int64_t max_literals, const std::function<bool()>& stop);

  // The literals the lanes' order clauses and the start variables' chains
  // would take (most of the encoding), without building it; 0 where an op
  // has no window, the largest int64 where the horizon is too large.
  std::int64_t Estimate();

  TimedSchedule Decode();

  // The solver's first guesses from a known schedule's times: each start
  // variable, each lane order and each offload as that schedule has them.
  void Phases(const SimResult& hint);

  // Assumptions that hold a known schedule (`hint`'s times) outside a
  // neighbourhood, for a large neighbourhood search: the order of every two
  // ops of a lane that are not both free (`loose`: that are both fixed, so a
  // free op may move past fixed ones), and the offload choice of every
  // activation whose forward and backward are both fixed, as `hint` has them.
  // `free(op index in the op space)` names the ops left to the solver.
  std::vector<int> Keep(const SimResult& hint, const std::function<bool(int)>& free,
                        bool loose = false) const;

  // Narrower start windows than the chains give, for a neighbourhood that
  // builds only what it leaves free: [lo, hi] in grains per op (indexed by
  // the op space; before Build). An O or R whose window is then empty is left
  // out (its activation stays on the device); a compute op's makes the
  // encoding empty.
  void Limit(std::vector<std::pair<int, int>> starts) { limit_ = std::move(starts); }

  // A new literal that, assumed, makes every op end by `horizon` grains (at
  // most the encoding's): one solver serves every probe below its first,
  // keeping what it learned.
  int Cap(int horizon);

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
  void Add(const Lits& lits);
  void Add(std::initializer_list<int> lits) { Add<std::initializer_list<int>>(lits); }

  // "op i starts at or before t", a literal or a constant.
  int Le(std::size_t i, int t) const;

  int Id(OpType t, int s, int m) const { return id_[p_.op_space().Index(t, s, m)]; }

  // s_j >= s_i + d_i + lag, unless one of `guards` is false.
  void Precedence(int i, int j, int lag, int g1 = kTrue, int g2 = kTrue, int g3 = kTrue);

  // Windows from the chains of every micro-batch: heads (stage 0's forwards
  // in micro-batch order, one lane) and tails (what must follow an op).
  bool AddOps();

  // One variable per op and grid column of its window, numbered op by op.
  void NumberStarts();

  bool AddChains(const std::function<bool()>& stop);  // false: cut short by `stop`

  // Compute op i reaches compute op j through the micro-batch chain, or
  // through stage 0's forwards in micro-batch order.
  bool Reaches(int i, int j) const;

  // Two ops of one lane: an order variable, or the one order their windows
  // allow (under `guards`); false when neither fits.
  bool Disjoint(int i, int j, int g1, int g2);

  // The literals of the compute lanes' order clauses (most of the encoding):
  // each pair of one device's ops, over both windows, four a clause; and of
  // every op's start variables' chain, two a clause (copies' windows may
  // span far more grains than the compute ops').
  std::int64_t LaneLiterals() const;

  Built AddLanes(const std::function<bool()>& stop);

  Built AddLinks(const std::function<bool()>& stop);

  // At every grid instant t (memory changes only there), the activations of a
  // device weigh at most its room: per activation, "started, not freed by B,
  // not out" weighs the activation, "out" (O ended, R not started) what O
  // leaves, "B ended, W not" what W frees. Each literal is implied by its
  // condition (never false when it holds), enough for an upper bound.
  Built AddMemory(const std::function<bool()>& stop);

  template <class Term>
  void Activation(int s, int m, int t, const Term& term);

  // sum(w * lit) <= k. The literals of one weight are counted in unary up to
  // the fewest of them that alone weigh more than k (a sequential counter,
  // Sinz, CP 2005), and every least combination of counts that weighs more
  // is one clause: a device's activations come in a few weights (one per
  // stage and state), so this stays small on fine memory grains. With many
  // weights, one sequential weighted counter over all of them.
  void AtMost(const std::vector<std::pair<int, int>>& terms, int k);

  // A one-directional sequential weighted counter (Hoelldobler, Manthey,
  // Steinke, KI 2012): c[j] is implied by "the terms weigh at least j + 1",
  // for j < cap.
  std::vector<int> Counter(const std::vector<std::pair<int, int>>& terms, int cap);

  const Problem& p_;
  const int H_;
  const double g_, q_;
  CaDiCaL::Solver& solver_;
  const int S_, M_;
  std::vector<OpInfo> ops_;
  std::vector<int> id_;                     // OpSpace index -> op, -1 if none
  std::vector<std::pair<int, int>> limit_;  // OpSpace index -> [lo, hi]; empty: none
  struct Order {
    int i, j, x;  // x: "i before j"
  };
  std::vector<Order> orders_;
  int compute_ops_ = 0;
  int next_var_ = 1;
  std::int64_t clauses_ = 0, literals_ = 0, max_literals_ = 0;
};

}  // namespace optpipe::sat
