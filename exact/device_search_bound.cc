#include "exact/device_search_bound.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>

#include "core/lower_bound.h"
#include "core/text_format.h"
#include "exact/device_search.h"

namespace optpipe {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using device_search::kMaxMicrobatches;
using device_search::Lane;
using device_search::Relaxed;

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
    const device_search::Result res =
        device_search::Solve(r, known, opt.upper, nodes, deadline, opt.stop);
    out.nodes += res.nodes;
    finished = finished && res.finished;
    return res.value;
  };
  // The same in two rounds: a sixteenth of the nodes, then the rest from what
  // that proved where it was cut short but proved more than `known`: a fresh
  // search from a higher bound climbs faster than one probing on.
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
  // A pair of devices searched together from its value, and the bound
  // raised to what it proves.
  const auto search_pair = [&](DevicePairValue& q, std::int64_t nodes) {
    q.finished = true;
    const double v = solve(relaxed({q.devices[0], q.devices[1]}), q.value, nodes, q.finished);
    if (v < kInf) q.value = std::max(q.value, v);
    out.value = std::max(out.value, q.value);
  };
  const auto proved = [&] { return out.value >= opt.upper - 1e-9 * std::max(1.0, out.value); };
  // The pairs a previous call cut short, again from their values (see
  // DeviceSearchOptions::resume).
  if (opt.resume) {
    out = *opt.resume;
    out.nodes = 0;
    for (DevicePairValue& q : out.pair_value) {
      if (!q.finished && !proved()) search_pair(q, opt.max_nodes_per_pair);
    }
    return out;
  }
  // Every device's first round (a sixteenth of its nodes), then second rounds
  // from what is left of all of them, for the devices cut short that proved
  // more than nothing, most promising first (the higher value first), each
  // half of what is left, the last all of it: the bound is their largest
  // value, so the nodes go where it may rise, not to a device that finished.
  std::vector<Relaxed> devices(D);
  const std::int64_t budget =
      opt.max_nodes_per_device > std::numeric_limits<std::int64_t>::max() / D
          ? std::numeric_limits<std::int64_t>::max()
          : opt.max_nodes_per_device * D;
  const auto left = [&] { return budget - out.nodes; };  // only the devices have searched yet
  std::vector<int> again;                                // the devices for a second round
  for (int d = 0; d < D; ++d) {
    const Relaxed& r = devices[d] = relaxed({d});
    if (r.lanes.empty()) continue;
    bool done = true;
    const double v = solve(r, 0, std::max<std::int64_t>(1, opt.max_nodes_per_device / 16), done);
    if (v < kInf) out.device_value[d] = v;
    if (!done && v < kInf && v > 0) {
      again.push_back(d);
    } else {
      out.finished = out.finished && done;
    }
  }
  std::stable_sort(again.begin(), again.end(),
                   [&](int d, int e) { return out.device_value[d] > out.device_value[e]; });
  for (std::size_t i = 0; i < again.size(); ++i) {
    const int d = again[i];
    if (left() <= 0) {  // nothing left for it: cut short
      out.finished = false;
      continue;
    }
    bool done = true;
    const double v =
        solve(devices[d], out.device_value[d],
              i + 1 == again.size() ? left() : std::max<std::int64_t>(1, left() / 2), done);
    out.device_value[d] = std::max(out.device_value[d], v);
    out.finished = out.finished && done;
  }
  for (int d = 0; d < D; ++d) out.value = std::max(out.value, out.device_value[d]);
  if (proved()) return out;
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
    while (std::chrono::steady_clock::now() < deadline && !(opt.stop && opt.stop->load())) {
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
  if (proved()) return out;
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
    // second: most pairs prove nothing more than their devices and stop there.
    const std::int64_t first = std::max<std::int64_t>(1, opt.max_nodes_per_pair / 16);
    std::vector<double> known(pairs.size());
    for (std::size_t i = 0; i < pairs.size(); ++i) known[i] = pairs[i].value;
    for (std::int64_t nodes : {first, opt.max_nodes_per_pair - first}) {
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        DevicePairValue& q = pairs[i];
        if (proved() || (nodes != first && (q.finished || !(q.value > known[i])))) continue;
        search_pair(q, nodes);
      }
    }
    out.pair_value = std::move(pairs);
  }
  return out;
}

double BestLowerBound(const Problem& p, const DeviceSearchOptions& opt) {
  return BestLowerBound(p, ComputeDeviceSearchBound(p, opt));
}

double BestLowerBound(const Problem& p, const DeviceSearchBound& search) {
  return AtGrain(p, std::max(ComputeLowerBound(p).value, search.value));
}

std::string Describe(const DeviceSearchBound& search, const std::string& more) {
  return FormatNumber(search.value) + " (" + std::to_string(search.nodes) + " nodes" +
         (search.finished ? "" : ", cut short") + more + ")";
}

}  // namespace optpipe
