#include "exact/order_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "core/text_format.h"
#include "exact/model_internal.h"

namespace optpipe {
namespace milp::internal {

// One probe: a depth-first search over the open pairs of a Builder whose
// horizon is the probe's target.
class OrderSearcher {
 public:
  enum class Outcome { kNone, kFound, kOpen };  // none ends by T; a schedule; not proven

  OrderSearcher(const Problem& p, double horizon, Simulator& sim, std::int64_t max_nodes,
                std::chrono::steady_clock::time_point deadline, const std::atomic<bool>* stop)
      : b_(p, Options(horizon), Hint{}),
        sim_(sim),
        max_nodes_(max_nodes),
        deadline_(deadline),
        stop_(stop) {}

  Outcome Run() {
    b_.ComputeGraph();
    if (!Propagate()) return Outcome::kNone;
    return Dfs();
  }
  std::int64_t nodes() const { return nodes_; }
  Schedule& schedule() { return found_; }
  SimResult& sim() { return found_sim_; }

 private:
  static BuildOptions Options(double horizon) {
    BuildOptions o;
    o.horizon = horizon;
    return o;
  }

  Outcome Dfs() {
    if (cut_ || ++nodes_ > max_nodes_ || (stop_ && stop_->load()) ||
        ((nodes_ & 15) == 0 && std::chrono::steady_clock::now() >= deadline_)) {
      cut_ = true;
      return Outcome::kOpen;
    }
    // The open pair with the least room: whose roomier order has the least
    // slack (most constrained first); that order first.
    int best_d = -1;
    std::size_t best_a = 0, best_b = 0;
    double best_key = kInf;
    struct Pair {
      int d;
      std::size_t a, b;
    };
    std::vector<Pair> open_pairs;  // what a branch may fix, to undo
    for (int d = 0; d < b_.D_; ++d) {
      const auto& ops = b_.dev_ops_[d];
      const std::size_t n = ops.size();
      for (std::size_t a = 0; a < n; ++a) {
        for (std::size_t c = a + 1; c < n; ++c) {
          const Lit& l = b_.before_[d][a * n + c];
          if (l.is_const() && l.value >= 0) continue;
          open_pairs.push_back({d, a, c});
          const double key = std::max(Slack(ops[a], ops[c]), Slack(ops[c], ops[a]));
          if (key < best_key) {
            best_key = key;
            best_d = d;
            best_a = a;
            best_b = c;
          }
        }
      }
    }
    if (best_d < 0) return Leaf();
    const auto& ops = b_.dev_ops_[best_d];
    const int i = ops[best_a], j = ops[best_b];
    const bool i_first = Slack(i, j) >= Slack(j, i);
    bool open = false;
    for (int k = 0; k < 2; ++k) {
      const bool first = (k == 0) == i_first;  // this branch: i before j
      const std::size_t edges = b_.edges_.size();
      b_.SetOrder(best_d, best_a, best_b, first);
      b_.edges_.push_back(first ? Edge{i, j, 0.0} : Edge{j, i, 0.0});
      Outcome r = Propagate() ? Dfs() : Outcome::kNone;
      for (const Pair& q : open_pairs) b_.Unorder(q.d, q.a, q.b);
      b_.edges_.resize(edges);
      if (r == Outcome::kFound) return r;
      open = open || r == Outcome::kOpen;
      if (cut_) return Outcome::kOpen;
    }
    return open ? Outcome::kOpen : Outcome::kNone;
  }

  // The windows' fixing and the memory rule's, until neither orders a pair;
  // then the devices' preemptive bound. False: no schedule of the node fits.
  bool Propagate() {
    for (;;) {
      if (!b_.FixOrders()) return false;
      bool changed = false;
      if (!MemoryFits(changed)) return false;
      if (!changed) return DevicesFit();
    }
  }

  // Without offload a device's memory changes only with its own ops, so at
  // the start of each forward x it is static + x's activation + what the ops
  // ordered before x allocated less what they freed. Open ops that would
  // free memory before x count as before x when they can be (a B whose F is
  // before x, a W whose B is, or whose B can be): the least memory x can
  // start with. Above the limit, the node fails; an open op without which it
  // would be must precede x (ordered here, with an edge).
  bool MemoryFits(bool& changed) {
    const Problem& p = b_.p_;
    if (!p.memory_limit) return true;
    for (int d = 0; d < b_.D_; ++d) {
      const auto& ops = b_.dev_ops_[d];
      const std::size_t n = ops.size();
      const double limit = (*p.memory_limit)[d] - p.static_memory[d];
      const double eps = 1e-9 * std::max(1.0, limit);
      for (std::size_t a = 0; a < n; ++a) {
        const Op& x = b_.op_[ops[a]];
        if (x.type != OpType::kF) continue;
        // The state of "op at index c before x": 1 yes, 0 no, -1 open.
        const auto before = [&](std::size_t c) {
          const Lit& l = b_.before_[d][c * n + a];
          return l.is_const() ? static_cast<int>(l.value) : -1;
        };
        const auto index = [&](OpType t, const Op& o) {
          return static_cast<std::size_t>(b_.pos_[b_.Id(t, o.stage, o.microbatch)]);
        };
        double least = Allocates(p, x);
        frees_.clear();
        for (std::size_t c = 0; c < n; ++c) {
          if (c == a) continue;
          const Op& y = b_.op_[ops[c]];
          const double delta = Allocates(p, y) - Frees(p, y);
          const int state = before(c);
          if (state == 1) {
            least += delta;
          } else if (state == -1 && delta < 0) {
            bool can = false;
            if (y.type == OpType::kB) {
              can = before(index(OpType::kF, y)) == 1;
            } else if (y.type == OpType::kW) {
              const int bs = before(index(OpType::kB, y));
              can = bs == 1 || (bs == -1 && before(index(OpType::kF, y)) == 1);
            }
            if (can) {
              least += delta;
              frees_.push_back({c, delta});
            }
          }
        }
        if (least > limit + eps) return false;
        for (auto [c, delta] : frees_) {
          if (least - delta > limit + eps) {
            b_.SetOrder(d, c, a, true);
            b_.edges_.push_back({ops[c], ops[a], 0.0});
            changed = true;
          }
        }
      }
    }
    return true;
  }

  // Each device alone, preemptive (Jackson's schedule: at every moment the
  // released op with the longest tail runs), with its ops' earliest starts as
  // release times and what must follow their ends before the device's
  // deadline as tails: the least time by which that device could finish
  // everything; beyond its deadline (the horizon; for device_span, its head
  // plus the horizon), no schedule of the node fits. O(n log n) per device.
  bool DevicesFit() {
    for (int d = 0; d < b_.D_; ++d) {
      const double deadline = b_.deadline_[d];
      const double horizon = deadline + b_.Eps();
      jobs_.clear();
      for (int i : b_.dev_ops_[d]) {
        jobs_.push_back({b_.es_[i], b_.T_[i], deadline - b_.ls_[i] - b_.T_[i]});
      }
      std::sort(jobs_.begin(), jobs_.end(),
                [](const Job& x, const Job& y) { return x.release < y.release; });
      ready_.clear();  // (tail, remaining) max-heap on tail
      double t = 0;
      std::size_t next = 0;
      while (next < jobs_.size() || !ready_.empty()) {
        if (ready_.empty()) t = std::max(t, jobs_[next].release);
        while (next < jobs_.size() && jobs_[next].release <= t) {
          ready_.push_back({jobs_[next].tail, jobs_[next].duration});
          std::push_heap(ready_.begin(), ready_.end());
          ++next;
        }
        // Run the longest tail until it ends or the next release.
        std::pop_heap(ready_.begin(), ready_.end());
        auto [tail, left] = ready_.back();
        const double until = next < jobs_.size() ? jobs_[next].release : kInf;
        if (t + left <= until) {
          t += left;
          ready_.pop_back();
          if (t + tail > horizon) return false;
        } else {
          ready_.back().second = left - (until - t);
          std::push_heap(ready_.begin(), ready_.end());
          t = until;
        }
      }
    }
    return true;
  }

  // Room left for x then y: y's latest start less x's earliest end.
  double Slack(int x, int y) const { return b_.ls_[y] - b_.es_[x] - b_.T_[x]; }

  // Every pair ordered: the orders by earliest start, simulated.
  Outcome Leaf() {
    Schedule s = Schedule::Empty(b_.p_, "order-search");
    for (int d = 0; d < b_.D_; ++d) {
      std::vector<int> ops = b_.dev_ops_[d];
      std::sort(ops.begin(), ops.end(),
                [&](int x, int y) { return std::tie(b_.es_[x], x) < std::tie(b_.es_[y], y); });
      for (int i : ops) s.compute[d].push_back(b_.op_[i]);
    }
    StatusOr<SimResult> r = sim_.Run(s);
    if (!r.ok() || r->objective > b_.o_.horizon + b_.Eps()) return Outcome::kOpen;
    found_ = std::move(s);
    found_sim_ = std::move(*r);
    return Outcome::kFound;
  }

  Builder b_;
  Simulator& sim_;
  std::int64_t max_nodes_, nodes_ = 0;
  bool cut_ = false;  // a limit was reached: unwind
  std::chrono::steady_clock::time_point deadline_;
  const std::atomic<bool>* stop_;
  Schedule found_;
  SimResult found_sim_;
  struct Job {
    double release, duration, tail;
  };
  std::vector<Job> jobs_;                              // DevicesFit's scratch
  std::vector<std::pair<std::size_t, double>> frees_;  // MemoryFits' scratch
  std::vector<std::pair<double, double>> ready_;       // (tail, time left), a heap
};

}  // namespace milp::internal

bool OrderSearchApplies(const Problem& p) {
  if (p.offload_allowed() || p.devices <= 0) return false;
  if (p.objective == Objective::kDeviceSpan && !milp::HeadsExact(p)) return false;
  // The builder keeps an order literal per pair of a device's ops and the
  // closure as ops^2 bits: bounded to some 100 MB.
  std::vector<std::int64_t> ops(p.devices, 0);
  for (int s = 0; s < p.stages(); ++s)
    ops[p.stage_device[s]] += p.microbatches * (p.split_backward ? 3 : 2);
  std::int64_t pairs = 0, all = 0;
  for (std::int64_t n : ops) {
    pairs += n * n;
    all += n;
  }
  return pairs <= 4'000'000 && all <= 16'384;
}

OrderSearchResult SearchOrders(const Problem& p, double lower_bound, double incumbent,
                               const OrderSearchOptions& opt) {
  using Searcher = milp::internal::OrderSearcher;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(std::max(0.0, opt.time_limit_s)));
  OrderSearchResult res;
  res.bound = lower_bound;
  res.best = incumbent;
  const double grain = TimeGrain(p);
  const double tol = 1e-9 * std::max(1.0, incumbent);
  // With a grain, the least multiple of it above T; else T.
  const auto above = [&](double t) {
    return grain > 0 ? (std::floor(t / grain + 1e-9) + 1) * grain : t;
  };
  // Proven optimal: with a grain, the least objective is the bound's next
  // multiple of it (TimeGrain), which the best may exceed (holds off the grain).
  const auto closed = [&] {
    return grain > 0 ? AtGrain(p, res.bound) >= res.best - tol
                     : res.bound >= res.best - 1e-6 * res.best - tol;
  };
  Simulator sim(p);
  sim.set_describe_deadlocks(false);
  double ceiling = incumbent;  // probes aim below this (lowered when one is cut short)
  while (!closed() && res.nodes < opt.max_nodes && Clock::now() < deadline &&
         !(opt.stop && opt.stop->load())) {
    double target = 0.5 * (res.bound + ceiling);
    if (grain > 0) {
      target = std::floor(target / grain + 1e-9) * grain;
      if (target < res.bound - tol) target = AtGrain(p, res.bound);
      // Nothing left to probe below the ceiling (its largest multiple below it).
      if (target > BelowGrain(p, ceiling) + tol) break;
    } else if (ceiling - res.bound <= 1e-6 * ceiling) {
      break;
    }
    // Half of the nodes and time left, all of them for the only target left
    // (a probe there left open ends the search).
    const int part = grain > 0 && BelowGrain(p, ceiling) <= AtGrain(p, res.bound) + tol ? 1 : 2;
    const std::int64_t budget = (opt.max_nodes - res.nodes + 1) / part;
    if (budget < 16) break;
    const Clock::time_point now = Clock::now();
    Searcher probe(p, target, sim, budget, now + (deadline - now) / part, opt.stop);
    const Searcher::Outcome out = probe.Run();
    res.nodes += probe.nodes();
    ++res.probes;
    std::string what;
    switch (out) {
      case Searcher::Outcome::kNone:
        res.bound = std::max(res.bound, above(target));
        what = "none: bound " + FormatNumber(res.bound);
        break;
      case Searcher::Outcome::kFound:
        res.best = probe.sim().objective;
        ceiling = res.best;
        res.schedule = std::move(probe.schedule());
        res.sim = std::move(probe.sim());
        what = "schedule " + FormatNumber(res.best);
        break;
      case Searcher::Outcome::kOpen:
        ceiling = target;
        what = "open";
        break;
    }
    if (opt.log) {
      opt.log("order search: probe " + FormatNumber(target) + " " + what + " (" +
              std::to_string(probe.nodes()) + " nodes)");
    }
  }
  res.optimal = closed();
  if (res.optimal) res.bound = res.best;
  return res;
}

}  // namespace optpipe
