// EdfSlack: the least slack of a set of jobs run back to back, earliest
// deadline first, kept under insertions and removals in O(log n). PipeOffload's
// copy planning (heuristics/pipe_offload.cc) asks it, at every step, whether
// the reloads it holds back can still all land before their backwards.
//
//   EdfSlack edf(deadline, duration);   // per job, fixed
//   edf.Insert(3); edf.Insert(7);
//   if (edf.LeastWith(t + o_dur, 5) >= 0) ...  // would job 5 still fit?
#pragma once

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace optpipe::pipe_offload {

// The least slack of a set of reloads run back to back, earliest deadline
// first, from time t: min over members k of deadline(k) - (t + the durations
// of the members up to k in deadline order). Members are inserted and erased
// in O(log n): a segment tree over the deadline ranks holds deadline(k) minus
// the durations up to k (range add when a member before k comes or goes, +inf
// for non-members), a Fenwick tree the durations for a new member's prefix.
// It keeps references to `deadline` and `dur`: they must outlive it.
class EdfSlack {
 public:
  EdfSlack(const std::vector<double>& deadline, const std::vector<double>& dur)
      : deadline_(deadline), dur_(dur), rank_(deadline.size()), n_(deadline.size()) {
    std::vector<int> order(n_);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int x, int y) { return deadline[x] < deadline[y]; });
    for (int r = 0; r < n_; ++r) rank_[order[r]] = r;
    min_.assign(4 * std::max(n_, 1), std::numeric_limits<double>::infinity());
    add_.assign(4 * std::max(n_, 1), 0.0);
    fenwick_.assign(n_ + 1, 0.0);
  }
  void Insert(int k) {
    const int r = rank_[k];
    Set(1, 0, n_ - 1, r, deadline_[k] - PrefixDur(r) - dur_[k]);
    Add(1, 0, n_ - 1, r + 1, n_ - 1, -dur_[k]);
    for (int i = r + 1; i <= n_; i += i & -i) fenwick_[i] += dur_[k];
  }
  void Erase(int k) {
    const int r = rank_[k];
    Set(1, 0, n_ - 1, r, std::numeric_limits<double>::infinity());
    Add(1, 0, n_ - 1, r + 1, n_ - 1, dur_[k]);
    for (int i = r + 1; i <= n_; i += i & -i) fenwick_[i] -= dur_[k];
  }
  double Least(double t) const {
    return n_ ? min_[1] - t : std::numeric_limits<double>::infinity();
  }
  // The least slack were k a member too.
  double LeastWith(double t, int k) {
    Insert(k);
    const double least = Least(t);
    Erase(k);
    return least;
  }

 private:
  double PrefixDur(int r) const {  // durations of the members ranked before r
    double sum = 0;
    for (int i = r; i > 0; i -= i & -i) sum += fenwick_[i];
    return sum;
  }
  void Push(int node) {
    for (int c : {2 * node, 2 * node + 1}) {
      min_[c] += add_[node];
      add_[c] += add_[node];
    }
    add_[node] = 0;
  }
  void Set(int node, int lo, int hi, int at, double value) {
    if (lo == hi) {
      min_[node] = value;
      return;
    }
    Push(node);
    const int mid = (lo + hi) / 2;
    if (at <= mid) {
      Set(2 * node, lo, mid, at, value);
    } else {
      Set(2 * node + 1, mid + 1, hi, at, value);
    }
    min_[node] = std::min(min_[2 * node], min_[2 * node + 1]);
  }
  void Add(int node, int lo, int hi, int from, int to, double delta) {
    if (from > hi || to < lo || from > to) return;
    if (from <= lo && hi <= to) {
      min_[node] += delta;
      add_[node] += delta;
      return;
    }
    Push(node);
    const int mid = (lo + hi) / 2;
    Add(2 * node, lo, mid, from, to, delta);
    Add(2 * node + 1, mid + 1, hi, from, to, delta);
    min_[node] = std::min(min_[2 * node], min_[2 * node + 1]);
  }

  const std::vector<double>& deadline_;
  const std::vector<double>& dur_;
  std::vector<int> rank_;
  int n_;
  std::vector<double> min_, add_, fenwick_;
};

}  // namespace optpipe::pipe_offload
