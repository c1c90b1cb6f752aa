#include "heuristics/list_scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "core/event.h"
#include "core/simulator.h"

namespace optpipe {
namespace {

// A ready op with its ordering key (smaller first).
struct Ready {
  double key1, key2;
  int op;
  bool operator>(const Ready& o) const {
    if (key1 != o.key1) return key1 > o.key1;
    if (key2 != o.key2) return key2 > o.key2;
    return op > o.op;
  }
};
constexpr double kNever = std::numeric_limits<double>::infinity();

template <typename T>
using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<T>>;

class ListScheduler {
 public:
  ListScheduler(const Problem& p, const ListOptions& opt)
      : p_(p),
        opt_(opt),
        sp_(p.op_space()),
        S_(p.stages()),
        M_(p.microbatches),
        D_(p.devices),
        link_(LinkOfDevice(p)) {}

  // `timing`, when given, gets the times the ops run at (see ListSchedule).
  StatusOr<Schedule> Run(SimResult* timing);

 private:
  void Prepare();
  void Release(int op, double t);  // all predecessors done; ready at t
  void Finish(int op, double t);
  void DispatchDevice(int d, double t);
  void DispatchLink(int l, double t);
  void Start(int op, int lane, double t);
  // Queues a look for work by `lane` at t, unless one is queued for then.
  void Wake(int lane, double t) {
    if (queued_[lane] == t) return;
    queued_[lane] = t;
    events_.push({t, Event::kLaneLooks, lane});
  }
  bool Fits(int d, double amount, double reserve) const {
    return !limit_ ||
           mem_[d] + amount + reserve <= (*limit_)[d] + 1e-9 * std::max(1.0, (*limit_)[d]);
  }
  double TailB(int s) const { return tail_b_[s]; }
  // Micro-batch m's ops form one chain, F(0)..F(S-1), B(S-1)..B(0); from the
  // last of them that ended, B(s,m) is at least the rest of the chain away. A
  // reload that ends before then only holds memory.
  static int ChainIndex(int S, const Op& op) {
    return op.type == OpType::kF ? op.stage : 2 * S - 1 - op.stage;
  }
  Op ChainOp(int i, int m) const {  // the converse
    return i < S_ ? Op{OpType::kF, i, m} : Op{OpType::kB, 2 * S_ - 1 - i, m};
  }
  double EarliestReload(int s, int m) const {
    const int b = 2 * S_ - 1 - s;
    const double from = front_[m] < 0 ? 0.0 : front_end_[m] - chain_end_[front_[m]];
    return from + chain_start_[b] - (*p_.offload)[s];
  }
  // Admitting F(s,m') must not starve the reload of the earliest offloaded
  // activation m0: once the activations whose backward precedes B(m0) have
  // freed theirs, what later micro-batches hold, plus F and the reload, must fit.
  bool LeavesRoomForReload(int d, const Op& f) {
    if (!limit_ || awaiting_reload_[d].empty()) return true;
    const int k0 = awaiting_reload_[d].front();
    const int m0 = k0 % M_;
    auto& hold = holding_[d];
    double later = 0;
    std::size_t w = 0;
    for (int k : hold) {  // drop activations that hold nothing any more
      if (held_[k] <= 1e-12) {
        listed_[k] = 0;
        continue;
      }
      hold[w++] = k;
      if (k % M_ > m0) later += held_[k];
    }
    hold.resize(w);
    // A forward that goes to the host as it ends holds only what stays behind
    // by the time the reload needs the room (its offload does not wait for memory).
    const double own = WillOffload(f.stage, f.microbatch)
                           ? p_.activation[f.stage] - p_.offloadable[f.stage]
                           : p_.activation[f.stage];
    return p_.static_memory[d] + later + own + p_.offloadable[k0 / M_] <=
           (*limit_)[d] + 1e-9 * std::max(1.0, (*limit_)[d]);
  }

  // LeavesRoomForReload within one scan of the ready forwards: its answer
  // depends on F(s,m) only through s and whether it offloads, so a no is
  // remembered, and it holds the whole stage back where no other forward of
  // the stage can keep less (it offloads, or none of the stage's may). A
  // device with every forward of a stage ready had rejected them one by one:
  // quadratic in the micro-batches.
  bool RoomForReload(int d, const Op& f) {
    const std::pair key{f.stage, WillOffload(f.stage, f.microbatch)};
    if (std::find(no_room_.begin(), no_room_.end(), key) != no_room_.end()) return false;
    if (LeavesRoomForReload(d, f)) return true;
    no_room_.push_back(key);
    if (key.second || !may_offload_early_[f.stage]) held_stages_.push_back(f.stage);
    return false;
  }

  // (s,m) may go to the host as its F ends: offload is on, its device is
  // short of memory, it is not the last stage nor kept.
  bool MayOffload(int s, int m) const {
    return opt_.offload && p_.offload && pressure_[p_.stage_device[s]] && s + 1 < S_ &&
           Choice(s, m) != ListOptions::kKeep;
  }
  // Offloaded as its F ends whatever the backwards ahead of it: sent by
  // choice, or by the warm-up rule (its own trip through the later stages
  // hides the round trip).
  bool WillOffload(int s, int m) const {
    return MayOffload(s, m) && ((opt_.offload_warmup && chain_[s] >= 2 * (*p_.offload)[s]) ||
                                Choice(s, m) == ListOptions::kSend);
  }
  // Offloaded as its F ends, now: by the warm-up rule, or because the
  // backwards of its stage still ahead of it hide the round trip.
  bool Offloads(int s, int m) const {
    if (WillOffload(s, m)) return true;
    const int d = p_.stage_device[s];
    return MayOffload(s, m) && (m - b_started_[s]) * period_[d] >= 2 * (*p_.offload)[s];
  }
  // The activations Choices() marks kKeep stay on the device (a link that
  // cannot carry them all does better keeping some than queueing them);
  // those it marks kSend go.
  ListOptions::Choice Choice(int s, int m) const {
    return static_cast<ListOptions::Choice>(choice_[static_cast<std::size_t>(s) * M_ + m]);
  }

  const Problem& p_;
  const ListOptions opt_;
  const OpSpace sp_;
  const int S_, M_, D_;
  const std::vector<int> link_;
  const std::vector<double>* limit_ = nullptr;

  Schedule out_;
  SimResult* timing_ = nullptr;  // start, end, busy and peak memory as ops run
  EventQueue events_;
  std::vector<double> queued_;    // per lane: a look for work queued for then (-1: none known)
  std::vector<int> pending_;      // unfinished predecessors per op
  std::vector<double> ready_at_;  // max(pred end + lag)
  std::vector<char> kept_back_;   // per op: an F passed over while ready
  std::vector<int> cap_;          // warm-up depth per stage
  std::vector<char> choice_;      // per activation: Choices(p_, opt_)
  std::vector<char> may_offload_early_;   // per stage: WillOffload may hold for one of its F
  std::vector<int> inflight_;             // F started, B not ended, per stage
  std::vector<int> b_started_;            // B started per stage
  std::vector<double> tail_b_;            // backward chain from B(s) to the end
  std::vector<double> chain_;             // shortest time from F(s,m)'s end to B(s,m)'s start
  std::vector<double> period_;            // one micro-batch of work per device
  std::vector<double> reserve_;           // per stage: room kept for deeper stages on its device
  std::vector<std::vector<int>> deeper_;  // per stage: the later stages on its device
  std::vector<char> pressure_;            // device cannot hold its warm-up in memory
  std::vector<double> mem_;
  std::vector<int> busy_;               // per lane: running op or -1
  std::vector<MinHeap<Ready>> future_;  // per lane: released, waiting for comm lag
  std::vector<MinHeap<Ready>> ready_b_, ready_f_, ready_w_;  // per device
  std::vector<std::vector<int>> ready_o_;                    // per link, FIFO
  // Per stage: reloads whose O is done, by micro-batch, then arrival; per
  // link: the stages whose copies it carries.
  struct Waiting {
    int microbatch;
    std::int64_t arrival;
    int op;
  };
  std::vector<std::vector<Waiting>> waiting_;
  std::vector<std::vector<int>> link_stages_;
  std::int64_t arrivals_ = 0;
  std::vector<double> wake_at_;  // per link: a wake-up pushed for then
  // Per activation (s*M+m): memory it holds now. Per device: activations that
  // hold memory, and offloaded activations not yet reloaded (micro-batch order).
  std::vector<double> held_;
  std::vector<std::vector<int>> holding_;
  std::vector<char> listed_;     // per activation: in holding_
  std::vector<char> f_started_;  // per activation
  // Per chain position: earliest start and end when nothing waits; per
  // micro-batch: the last chain op that ended, and when.
  std::vector<double> chain_start_, chain_end_;
  std::vector<int> front_;
  std::vector<double> front_end_;
  std::vector<std::vector<int>> awaiting_reload_;
  // Express lanes (ListOptions::express): per micro-batch, whether it is one;
  // per op, the time reserved for it (-1: none); per device, the reserved
  // slots not yet started (by start) and the reserved ops that are ready.
  struct Slot {
    double start, end;
    int op;
  };
  std::vector<char> express_;
  std::vector<double> reserved_at_;
  std::vector<std::vector<Slot>> slots_;
  std::vector<std::vector<int>> express_ready_;
  std::vector<double> busy_until_;  // per device: when its running op ends
  // When device d must be free again for a reserved op (kNever: no slot).
  double NextSlot(int d) const { return slots_[d].empty() ? kNever : slots_[d].front().start; }
  // t when micro-batch m's chain, its first forward starting at t, runs into
  // no reserved slot and no running op; else the earliest end of one in its way.
  double PathBlockedUntil(int m, double t) const;
  void Reserve(int m, double t);
  void CancelExpress(int m, double t);
  void PushReady(int d, int i);
  std::vector<Ready> skipped_;                 // scratch for DispatchDevice
  std::vector<int> held_stages_;               // scratch: stages whose every ready F is held back
  std::vector<std::pair<int, bool>> no_room_;  // scratch: see RoomForReload
  // Per device: its stages, its scans of the ready forwards, the last scan
  // that stopped before the end (see DispatchDevice); per F: the scans before
  // it became ready.
  std::vector<int> stages_on_;
  std::vector<std::int64_t> scans_, cut_scan_, pushed_scan_;
  std::size_t total_ = 0, done_ = 0;
};

void ListScheduler::Prepare() {
  if (p_.memory_limit) limit_ = &*p_.memory_limit;
  out_ = Schedule::Empty(p_, "list");
  const int n = sp_.size();
  pending_.assign(n, 0);
  ready_at_.assign(n, 0.0);
  kept_back_.assign(n, 0);
  out_.release.assign(n, 0.0);
  inflight_.assign(S_, 0);
  b_started_.assign(S_, 0);
  mem_ = p_.static_memory;
  const int lanes = D_ + static_cast<int>(p_.host_links.size());
  busy_.assign(lanes, -1);
  queued_.assign(lanes, -1.0);
  future_.assign(lanes, {});
  ready_b_.assign(D_, {});
  ready_f_.assign(D_, {});
  stages_on_.assign(D_, 0);
  for (int s = 0; s < S_; ++s) ++stages_on_[p_.stage_device[s]];
  scans_.assign(D_, 0);
  cut_scan_.assign(D_, 0);
  pushed_scan_.assign(n, 0);
  ready_w_.assign(D_, {});
  ready_o_.assign(p_.host_links.size(), {});
  waiting_.assign(S_, {});
  link_stages_.assign(p_.host_links.size(), {});
  for (int s = 0; s < S_; ++s) link_stages_[link_[p_.stage_device[s]]].push_back(s);
  wake_at_.assign(p_.host_links.size(), -1.0);
  held_.assign(static_cast<std::size_t>(S_) * M_, 0.0);
  holding_.assign(D_, {});
  listed_.assign(static_cast<std::size_t>(S_) * M_, 0);
  f_started_.assign(static_cast<std::size_t>(S_) * M_, 0);
  front_.assign(M_, -1);
  front_end_.assign(M_, 0.0);
  chain_start_.assign(2 * S_, 0.0);
  chain_end_.assign(2 * S_, 0.0);
  for (int i = 0; i < 2 * S_; ++i) {
    const Op op = ChainOp(i, 0);
    if (i > 0) {  // the lag from the previous chain op: F(u) -> F(u+1), B(u) -> B(u-1)
      const int gap = i < S_ ? i - 1 : i == S_ ? -1 : op.stage;
      chain_start_[i] = chain_end_[i - 1] + (gap >= 0 ? CommTime(p_, gap) : 0.0);
    }
    chain_end_[i] = chain_start_[i] + Duration(p_, op);
  }
  awaiting_reload_.assign(D_, {});
  express_.assign(M_, 0);
  reserved_at_.assign(n, -1.0);
  slots_.assign(D_, {});
  express_ready_.assign(D_, {});
  busy_until_.assign(D_, 0.0);

  tail_b_.assign(S_, 0.0);
  for (int s = 0; s < S_; ++s) {
    tail_b_[s] =
        Duration(p_, Op{OpType::kB, s, 0}) + (s > 0 ? CommTime(p_, s - 1) + tail_b_[s - 1] : 0);
  }
  chain_ = ForwardToBackward(p_);
  period_.assign(D_, 0.0);
  for (int s = 0; s < S_; ++s) period_[p_.stage_device[s]] += p_.f[s] + p_.b[s] + p_.w[s];
  cap_ = WarmupDepths(p_, opt_);
  choice_ = Choices(p_, opt_);
  may_offload_early_.assign(S_, 0);
  for (int s = 0; s + 1 < S_ && opt_.offload && p_.offload; ++s) {
    const bool by_rule = opt_.offload_warmup && chain_[s] >= 2 * (*p_.offload)[s];
    for (int m = 0; m < M_ && !may_offload_early_[s]; ++m) {
      may_offload_early_[s] =
          Choice(s, m) == ListOptions::kSend || (by_rule && Choice(s, m) != ListOptions::kKeep);
    }
  }
  for (int m = 0; m < M_ && opt_.express && S_ > 1; ++m)
    express_[m] = Choice(0, m) == ListOptions::kKeep;
  reserve_.assign(S_, 0.0);
  deeper_.assign(S_, {});
  for (int s = 0; s < S_; ++s) {
    for (int u = s + 1; u < S_; ++u) {
      if (p_.stage_device[u] != p_.stage_device[s]) continue;
      reserve_[s] = std::max(reserve_[s], p_.activation[u]);
      deeper_[s].push_back(u);
    }
  }
  pressure_.assign(D_, 0);
  if (limit_) {
    std::vector<double> need = p_.static_memory;
    for (int s = 0; s < S_; ++s) need[p_.stage_device[s]] += cap_[s] * p_.activation[s];
    for (int d = 0; d < D_; ++d) pressure_[d] = need[d] > (*limit_)[d];
  }

  // Predecessor counts; ops without predecessors (F of stage 0) are released at 0.
  for (int s = 0; s < S_; ++s) {
    for (int m = 0; m < M_; ++m) {
      pending_[sp_.Index(OpType::kF, s, m)] = s > 0 ? 1 : 0;
      pending_[sp_.Index(OpType::kB, s, m)] = 1 + (s + 1 < S_ ? 1 : 0);
      pending_[sp_.Index(OpType::kW, s, m)] = 1;
      total_ += p_.split_backward ? 3 : 2;
    }
  }
  for (int m = 0; m < M_; ++m) Release(sp_.Index(OpType::kF, 0, m), 0.0);
}

void ListScheduler::Release(int i, double t) {
  const Op op = sp_.At(i);
  const int d = p_.stage_device[op.stage];
  const int lane = IsCompute(op.type) ? d : D_ + link_[d];
  future_[lane].push({t, 0, i});
  Wake(lane, t);
}

void ListScheduler::Start(int i, int lane, double t) {
  const Op op = sp_.At(i);
  const int d = p_.stage_device[op.stage];
  mem_[d] += Allocates(p_, op);
  busy_[lane] = i;
  // Replayed as soon as possible, an op kept back on purpose would start
  // earlier and take memory planned for others: hold it where it was put. So
  // is an op a device left waiting for a reserved slot that was then given up.
  if (op.type == OpType::kR || kept_back_[i] ||
      (opt_.express && lane < D_ && t > std::max(ready_at_[i], busy_until_[lane]) + 1e-9))
    out_.release[i] = t;
  if (lane < D_) busy_until_[lane] = t + Duration(p_, op);
  if (reserved_at_[i] >= 0) {
    auto& sl = slots_[d];
    sl.erase(std::find_if(sl.begin(), sl.end(), [&](const Slot& x) { return x.op == i; }));
    const bool late = t > reserved_at_[i] + 1e-9;
    reserved_at_[i] = -1.0;
    if (late) CancelExpress(op.microbatch, t);  // the rest of its chain would wait
  }
  if (lane < D_) {
    out_.compute[lane].push_back(op);
  } else {
    out_.copy[lane - D_].push_back(op);
  }
  if (op.type == OpType::kF) ++inflight_[op.stage];
  if (op.type == OpType::kB) {
    ++b_started_[op.stage];
    if (p_.offload) Wake(D_ + link_[d], t);  // a reload may now be due
  }
  if (timing_) {
    timing_->start[i] = t;
    timing_->end[i] = t + Duration(p_, op);
    if (lane < D_) timing_->busy[d] += Duration(p_, op);
    timing_->peak_memory[d] = std::max(timing_->peak_memory[d], mem_[d]);
  }
  const int key = op.stage * M_ + op.microbatch;
  if (op.type == OpType::kF) f_started_[key] = 1;
  if (const double a = Allocates(p_, op); a > 0) {
    held_[key] += a;
    if (!listed_[key]) {
      holding_[d].push_back(key);
      listed_[key] = 1;
    }
  }
  if (op.type == OpType::kR) {
    auto& ar = awaiting_reload_[d];
    ar.erase(std::find(ar.begin(), ar.end(), key));
  }
  events_.push({t + Duration(p_, op), Event::kOpEnds, i});
}

void ListScheduler::Finish(int i, double t) {
  const Op op = sp_.At(i);
  const int s = op.stage, m = op.microbatch, d = p_.stage_device[s];
  const int lane = IsCompute(op.type) ? d : D_ + link_[d];
  ++done_;
  busy_[lane] = -1;
  Wake(lane, t);
  if (const double fr = Frees(p_, op); fr > 0) {
    mem_[d] -= fr;
    held_[s * M_ + m] -= fr;
    Wake(d, t);
    if (p_.offload) Wake(D_ + link_[d], t);
  }
  const auto done_pred = [&](OpType ty, int st, double lag) {
    const int q = sp_.Index(ty, st, m);
    ready_at_[q] = std::max(ready_at_[q], t + lag);
    if (--pending_[q] == 0) Release(q, ready_at_[q]);
  };
  if (op.type == OpType::kF || op.type == OpType::kB) {
    front_[m] = ChainIndex(S_, op);
    front_end_[m] = t;
  }
  switch (op.type) {
    case OpType::kF: {
      if (Offloads(s, m)) {
        ++pending_[sp_.Index(OpType::kB, s, m)];
        pending_[sp_.Index(OpType::kO, s, m)] = 0;
        pending_[sp_.Index(OpType::kR, s, m)] = 1;
        total_ += 2;
        auto& ar = awaiting_reload_[d];
        ar.insert(std::upper_bound(ar.begin(), ar.end(), s * M_ + m,
                                   [&](int a, int b) { return a % M_ < b % M_; }),
                  s * M_ + m);
        Release(sp_.Index(OpType::kO, s, m), t);
      }
      if (s + 1 < S_) done_pred(OpType::kF, s + 1, CommTime(p_, s));
      done_pred(OpType::kB, s, 0.0);
      break;
    }
    case OpType::kB:
      --inflight_[s];
      if (s > 0) done_pred(OpType::kB, s - 1, CommTime(p_, s - 1));
      if (p_.split_backward) done_pred(OpType::kW, s, 0.0);
      break;
    case OpType::kO: {
      const int r = sp_.Index(OpType::kR, s, m);
      pending_[r] = 0;
      auto& w = waiting_[s];
      w.insert(std::upper_bound(w.begin(), w.end(), m,
                                [](int mb, const Waiting& x) { return mb < x.microbatch; }),
               Waiting{m, arrivals_++, r});
      break;
    }
    case OpType::kR:
      done_pred(OpType::kB, s, 0.0);
      break;
    case OpType::kW:
      break;
  }
}

void ListScheduler::PushReady(int d, int i) {
  const Op op = sp_.At(i);
  switch (op.type) {
    case OpType::kB:
      ready_b_[d].push({-TailB(op.stage), double(op.microbatch), i});
      break;
    case OpType::kF:
      pushed_scan_[i] = scans_[d];
      if (opt_.breadth_first) {
        ready_f_[d].push({double(op.stage), double(op.microbatch), i});
      } else {
        ready_f_[d].push({double(op.microbatch), -double(op.stage), i});
      }
      break;
    default:
      ready_w_[d].push({double(op.microbatch), -double(op.stage), i});
      break;
  }
}

double ListScheduler::PathBlockedUntil(int m, double t) const {
  double until = kNever;
  for (int c = 1; c < 2 * S_; ++c) {
    const int d = p_.stage_device[ChainOp(c, m).stage];
    const double a = t + chain_start_[c], b = t + chain_end_[c];
    if (busy_[d] >= 0 && busy_until_[d] > a + 1e-9) until = std::min(until, busy_until_[d]);
    for (const Slot& x : slots_[d]) {
      if (x.start < b - 1e-9 && a < x.end - 1e-9) until = std::min(until, x.end);
    }
  }
  return until == kNever ? t : until;
}

void ListScheduler::Reserve(int m, double t) {
  for (int c = 1; c < 2 * S_; ++c) {
    const Op op = ChainOp(c, m);
    const int i = sp_.Index(op.type, op.stage, m), d = p_.stage_device[op.stage];
    reserved_at_[i] = t + chain_start_[c];
    auto& sl = slots_[d];
    const Slot x{t + chain_start_[c], t + chain_end_[c], i};
    sl.insert(std::upper_bound(sl.begin(), sl.end(), x,
                               [](const Slot& a, const Slot& b) { return a.start < b.start; }),
              x);
  }
}

// m's chain fell behind its reservations: free them; its ops that are ready
// join the others.
void ListScheduler::CancelExpress(int m, double t) {
  for (int c = 1; c < 2 * S_; ++c) {
    const Op op = ChainOp(c, m);
    const int i = sp_.Index(op.type, op.stage, m), d = p_.stage_device[op.stage];
    if (reserved_at_[i] < 0) continue;
    reserved_at_[i] = -1.0;
    auto& sl = slots_[d];
    sl.erase(std::find_if(sl.begin(), sl.end(), [&](const Slot& x) { return x.op == i; }));
    auto& er = express_ready_[d];
    if (auto it = std::find(er.begin(), er.end(), i); it != er.end()) {
      er.erase(it);
      PushReady(d, i);
    }
    Wake(d, t);
  }
}

void ListScheduler::DispatchDevice(int d, double t) {
  auto& fut = future_[d];
  while (!fut.empty() && fut.top().key1 <= t) {
    const int i = fut.top().op;
    fut.pop();
    if (reserved_at_[i] >= 0) {
      express_ready_[d].push_back(i);
    } else {
      PushReady(d, i);
    }
  }
  if (!fut.empty()) Wake(d, fut.top().key1);
  if (busy_[d] >= 0) return;
  // An express op first; a forward that does not fit in memory gives up its lane.
  while (!express_ready_[d].empty()) {
    auto& er = express_ready_[d];
    const auto it = std::min_element(
        er.begin(), er.end(), [&](int a, int b) { return reserved_at_[a] < reserved_at_[b]; });
    const int i = *it;
    const Op op = sp_.At(i);
    if (op.type == OpType::kF && !Fits(d, p_.activation[op.stage], 0)) {
      CancelExpress(op.microbatch, t);
      continue;
    }
    er.erase(it);
    return Start(i, d, t);
  }
  // Other ops only where they end before the device's next reserved slot.
  const double slot = NextSlot(d);
  const auto fits_slot = [&](int i) { return t + Duration(p_, sp_.At(i)) <= slot + 1e-9; };
  const auto take = [&](MinHeap<Ready>& h) {
    if (h.empty() || !fits_slot(h.top().op)) return false;
    const int i = h.top().op;
    h.pop();
    Start(i, d, t);
    return true;
  };
  if (opt_.eager_w && take(ready_w_[d])) return;
  if (!opt_.breadth_first && take(ready_b_[d])) return;
  // The first F (earliest micro-batch; breadth first, earliest stage) whose
  // stage is below its warm-up depth and whose activation fits; the others go
  // back. Breadth first, a B only when no F may start. An express
  // micro-batch's first forward also needs its chain's way clear.
  auto& rf = ready_f_[d];
  skipped_.clear();
  held_stages_.clear();
  no_room_.clear();
  ++scans_[d];
  int chosen = -1;
  double blocked = kNever;  // when a blocked express chain may find its way clear
  while (!rf.empty() && chosen < 0) {
    // Once every stage of the device is held back as a whole (its warm-up
    // depth, the next slot or memory), no F behind may start: the scan stops
    // there, O(stages) instead of O(ready forwards): a device short of memory
    // has every forward of stage 0 ready, and rejecting them one by one would
    // be quadratic (docs/benchmarks.md, "List scheduler"). Those it leaves
    // are held back as if passed over (kept_back_, marked when next taken).
    if (static_cast<int>(held_stages_.size()) == stages_on_[d]) {
      cut_scan_[d] = scans_[d];
      break;
    }
    const Ready r = rf.top();
    rf.pop();
    if (cut_scan_[d] > pushed_scan_[r.op]) kept_back_[r.op] = 1;
    const Op f = sp_.At(r.op);
    const bool lead = f.stage == 0 && express_[f.microbatch];
    const bool held =
        std::find(held_stages_.begin(), held_stages_.end(), f.stage) != held_stages_.end();
    const bool stage_ok =
        !held && inflight_[f.stage] < cap_[f.stage] && fits_slot(r.op) &&
        Fits(d, p_.activation[f.stage], opt_.breadth_first ? 0 : reserve_[f.stage]);
    bool ok = stage_ok && (opt_.breadth_first || RoomForReload(d, f));
    if (!stage_ok && !held) held_stages_.push_back(f.stage);
    if (ok && lead) {
      if (const double until = PathBlockedUntil(f.microbatch, t); until > t) {
        blocked = std::min(blocked, until);
        ok = false;
      }
    }
    if (ok) {
      chosen = r.op;
      if (lead) Reserve(f.microbatch, t);
    } else {
      skipped_.push_back(r);
      kept_back_[r.op] = 1;
    }
  }
  for (const Ready& r : skipped_) rf.push(r);
  if (blocked < kNever) Wake(d, blocked);
  if (chosen >= 0) return Start(chosen, d, t);
  if (take(ready_b_[d])) return;
  take(ready_w_[d]);
}

void ListScheduler::DispatchLink(int l, double t) {
  const int lane = D_ + l;
  auto& fut = future_[lane];
  while (!fut.empty() && fut.top().key1 <= t) {
    ready_o_[l].push_back(fut.top().op);  // only offloads are released through here
    fut.pop();
  }
  if (!fut.empty()) Wake(lane, fut.top().key1);
  if (busy_[lane] >= 0) return;
  const auto offload = [&] {  // the earliest ready offload
    const int i = ready_o_[l].front();
    ready_o_[l].erase(ready_o_[l].begin());
    Start(i, lane, t);
  };
  // As an option, a ready offload goes first: it frees room a forward waits for.
  if (opt_.offload_first && !ready_o_[l].empty()) return offload();
  // Else a reload that is due and fits goes first: a backward waits for it. The
  // earliest micro-batch wins, then the earliest to arrive.
  const Waiting* best = nullptr;
  int best_stage = -1;
  double wake = kNever;  // the next time a reload skipped as early becomes due
  for (int s : link_stages_[l]) {
    const int d = p_.stage_device[s];
    // Breadth first, a device runs the backwards of its later stages first.
    int before = 0;
    if (opt_.breadth_first) {
      for (int u : deeper_[s]) before += M_ - b_started_[u];
    }
    for (const Waiting& w : waiting_[s]) {
      const int m = w.microbatch;
      if (before + m - b_started_[s] >= opt_.reload_lookahead) break;  // and every later one
      if (best && (m > best->microbatch || (m == best->microbatch && w.arrival > best->arrival)))
        break;
      if (const double due = EarliestReload(s, m); t < due - 1e-9) {
        wake = std::min(wake, due);
        continue;
      }
      // B(s,m) also waits for the forwards of m on the device's later stages:
      // a reload must leave room for the next of them.
      double reserve = 0;
      for (int u : deeper_[s]) {
        if (!f_started_[u * M_ + m]) reserve = std::max(reserve, p_.activation[u]);
      }
      if (!Fits(d, p_.offloadable[s], reserve)) continue;
      best = &w;
      best_stage = s;
      break;
    }
  }
  // One wake-up per link and time (the link is looked at after every event).
  if (wake < kNever && !(t < wake_at_[l] && wake_at_[l] <= wake)) {
    Wake(lane, wake);
    wake_at_[l] = wake;
  }
  if (best) {
    const int i = best->op;
    auto& w = waiting_[best_stage];
    w.erase(w.begin() + (best - w.data()));
    return Start(i, lane, t);
  }
  if (!ready_o_[l].empty()) offload();
}

StatusOr<Schedule> ListScheduler::Run(SimResult* timing) {
  Prepare();
  timing_ = timing;
  if (timing) {
    *timing = SimResult{};
    timing->start.assign(sp_.size(), std::numeric_limits<double>::quiet_NaN());
    timing->end = timing->start;
    timing->busy.assign(D_, 0.0);
    timing->peak_memory = p_.static_memory;
  }
  while (!events_.empty()) {
    const Event ev = events_.top();
    events_.pop();
    const double t = ev.t();
    const int id = ev.id();
    if (ev.kind() == Event::kOpEnds) {
      Finish(id, t);
      continue;
    }
    if (queued_[id] == t) queued_[id] = -1.0;
    if (id < D_) {
      DispatchDevice(id, t);
    } else {
      DispatchLink(id - D_, t);
    }
  }
  if (done_ < total_) {
    return Infeasible("list scheduling stalled under the memory limit (warm-up scale " +
                      std::to_string(opt_.warmup_scale) + ")");
  }
  if (timing) Summarize(p_, *timing);
  return out_;
}

}  // namespace

StatusOr<Schedule> ListSchedule(const Problem& p, const ListOptions& opt, SimResult* timing) {
  return ListScheduler(p, opt).Run(timing);
}

}  // namespace optpipe
