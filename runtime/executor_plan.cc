// The Plan of a run: lanes and their ops, the dependency edges, and every
// device's memory events in the simulator's order, with activation pieces in bytes.
#include <algorithm>
#include <string>
#include <vector>

#include "core/dag.h"
#include "runtime/executor_internal.h"
#include "runtime/peers.h"

namespace optpipe::runtime::internal {

std::string LaneName(const Plan& pl, int r) {
  return r < pl.D ? "device " + std::to_string(r) : "host link " + std::to_string(r - pl.D);
}

namespace {

// A topological rank of every op over dependencies and lane order: breaks ties
// between memory events at one instant without ever ordering an op before one
// it waits for.
std::vector<int> TopologicalRank(const Problem& p, const Plan& pl) {
  const int n = pl.space.size();
  std::vector<std::vector<int>> succ(n);
  std::vector<int> indeg(n, 0), rank(n, -1);
  for (const std::vector<int>& lane : pl.lane_ops) {
    for (std::size_t k = 0; k + 1 < lane.size(); ++k) {
      succ[lane[k]].push_back(lane[k + 1]);
      ++indeg[lane[k + 1]];
    }
  }
  for (const Edge& e : pl.edges) {
    succ[e.from].push_back(e.to);
    ++indeg[e.to];
  }
  std::vector<int> ready;
  for (const std::vector<int>& lane : pl.lane_ops) {
    if (!lane.empty() && indeg[lane.front()] == 0) ready.push_back(lane.front());
  }
  int next = 0;
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    rank[i] = next++;
    for (int j : succ[i]) {
      if (--indeg[j] == 0) ready.push_back(j);
    }
  }
  (void)p;
  return rank;
}

// One process per device: this process keeps device `me`'s ops in every lane.
// A host link's lane may hold ops of devices in other processes; where one
// op follows another's, an edge (no lag, no payload) keeps their order.
void KeepDevice(Plan& pl, int me) {
  pl.me = me;
  for (std::vector<int>& lane : pl.lane_ops) {
    std::vector<int> mine;
    for (std::size_t k = 0; k < lane.size(); ++k) {
      const int i = lane[k];
      if (k > 0 && pl.device_of[lane[k - 1]] != pl.device_of[i]) {
        Edge e;
        e.id = static_cast<int>(pl.edges.size());
        e.from = lane[k - 1];
        e.to = i;
        e.from_lane = e.to_lane = pl.lane_of[i];
        e.from_device = pl.device_of[e.from];
        e.to_device = pl.device_of[i];
        pl.in_edges[i].push_back(e.id);
        pl.out_edges[e.from].push_back(e.id);
        pl.edges.push_back(e);
      }
      if (pl.device_of[i] == me) mine.push_back(i);
    }
    lane = std::move(mine);
  }
}

}  // namespace

Plan BuildPlan(const Problem& p, const Schedule& s, const SimResult& sim,
               const ExecutorOptions& o) {
  Plan pl;
  pl.D = p.devices;
  pl.M = p.microbatches;
  pl.space = p.op_space();
  pl.offloaded = OffloadedSet(p, s);
  pl.link_of_device = LinkOfDevice(p);
  pl.lanes = p.devices + static_cast<int>(p.host_links.size());
  const int n = pl.space.size();
  pl.lane_of.assign(n, -1);
  pl.device_of.assign(n, -1);
  pl.in_edges.assign(n, {});
  pl.out_edges.assign(n, {});
  pl.expected_s.assign(n, 0.0);
  pl.lane_ops.resize(pl.lanes);
  for (int r = 0; r < pl.lanes; ++r) {
    const std::vector<Op>& lane = r < pl.D ? s.compute[r] : s.copy[r - pl.D];
    for (const Op& op : lane) {
      const int i = pl.space.Index(op);
      pl.lane_ops[r].push_back(i);
      pl.lane_of[i] = r;
      pl.device_of[i] = DeviceOf(p, op);
      pl.expected_s[i] = Duration(p, op) * o.time_scale;
      pl.longest_s = std::max(pl.longest_s, pl.expected_s[i]);
    }
  }
  for (int r = 0; r < pl.lanes; ++r) {
    for (int i : pl.lane_ops[r]) {
      ForEachPredecessor(p, pl.offloaded, pl.space.At(i), [&](const Op& q, double lag) {
        const int qi = pl.space.Index(q);
        Edge e;
        e.id = static_cast<int>(pl.edges.size());
        e.from = qi;
        e.to = i;
        e.from_lane = pl.lane_of[qi];
        e.to_lane = r;
        e.from_device = pl.device_of[qi];
        e.to_device = pl.device_of[i];
        e.lag_s = lag * o.time_scale;
        const Op from = pl.space.At(qi), to = pl.space.At(i);
        if (from.type == to.type && IsCompute(from.type) && from.stage != to.stage) {
          e.bytes = o.payload_bytes;  // an activation (F) or a gradient (B)
        }
        pl.longest_s = std::max(pl.longest_s, e.lag_s);
        pl.in_edges[i].push_back(e.id);
        pl.out_edges[qi].push_back(e.id);
        pl.edges.push_back(e);
      });
    }
  }

  // Pieces of every stage's activation.
  const int S = p.stages();
  pl.piece_bytes.resize(S);
  pl.b_pieces.assign(S, 0);
  pl.o_pieces.assign(S, 0);
  for (int st = 0; st < S; ++st) {
    const double a = p.activation[st];
    const double fb = p.split_backward ? p.freed_by_b[st] : a;
    const double off = p.offloadable[st];
    std::vector<std::int64_t> cuts = {0, BytesOf(fb, o.bytes_per_unit),
                                      BytesOf(off, o.bytes_per_unit), BytesOf(a, o.bytes_per_unit)};
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      pl.piece_bytes[st].push_back(static_cast<std::size_t>(cuts[k + 1] - cuts[k]));
    }
    const auto below = [&](std::int64_t b) {
      return static_cast<int>(std::find(cuts.begin(), cuts.end(), b) - cuts.begin());
    };
    pl.b_pieces[st] = below(BytesOf(fb, o.bytes_per_unit));
    pl.o_pieces[st] = below(BytesOf(off, o.bytes_per_unit));
  }
  const auto bytes_of_pieces = [&](int st, int from, int to) {
    std::int64_t b = 0;
    for (int k = from; k < to; ++k) b += static_cast<std::int64_t>(pl.piece_bytes[st][k]);
    return b;
  };

  // Memory events in the simulator's order: by time, frees of ops that took
  // time before anything else at that instant (docs/FORMAT.md), then by topological rank.
  const std::vector<int> rank = TopologicalRank(p, pl);
  struct Keyed {
    double t;
    int cls, rank;
    MemEvent e;
  };
  std::vector<std::vector<Keyed>> keyed(pl.D);
  pl.host_bytes.assign(pl.D, 0);
  for (int r = 0; r < pl.lanes; ++r) {
    for (int i : pl.lane_ops[r]) {
      const Op op = pl.space.At(i);
      const int st = op.stage, d = pl.device_of[i];
      const int npieces = static_cast<int>(pl.piece_bytes[st].size());
      const double al = Allocates(p, op), fr = Frees(p, op);
      MemEvent e;
      e.op = i;
      if (al > 0) {
        e.alloc = true;
        e.units = al;
        e.bytes = op.type == OpType::kF ? bytes_of_pieces(st, 0, npieces)
                                        : bytes_of_pieces(st, 0, pl.o_pieces[st]);
        keyed[d].push_back({sim.start[i], 1, rank[i], e});
      } else if (fr > 0) {
        e.units = fr;
        switch (op.type) {
          case OpType::kB:
            e.bytes = bytes_of_pieces(st, 0, pl.b_pieces[st]);
            break;
          case OpType::kW:
            e.bytes = bytes_of_pieces(st, pl.b_pieces[st], npieces);
            break;
          default:
            e.bytes = bytes_of_pieces(st, 0, pl.o_pieces[st]);
            break;
        }
        const int cls = sim.end[i] > sim.start[i] ? 0 : 1;
        keyed[d].push_back({sim.end[i], cls, rank[i], e});
      }
      if (op.type == OpType::kO) {
        pl.host_bytes[d] += static_cast<std::size_t>(bytes_of_pieces(st, 0, pl.o_pieces[st]));
      }
    }
  }
  pl.ticket.assign(n, -1);
  pl.mem_seq.assign(pl.D, {});
  pl.mem_offset.assign(pl.D + 1, 0);
  pl.static_bytes.assign(pl.D, 0);
  pl.peak_bytes.assign(pl.D, 0);
  for (int d = 0; d < pl.D; ++d) {
    std::sort(keyed[d].begin(), keyed[d].end(), [](const Keyed& a, const Keyed& b) {
      if (a.t != b.t) return a.t < b.t;
      if (a.cls != b.cls) return a.cls < b.cls;
      return a.rank < b.rank;
    });
    pl.static_bytes[d] = BytesOf(p.static_memory[d], o.bytes_per_unit);
    std::int64_t bytes = pl.static_bytes[d];
    pl.peak_bytes[d] = bytes;
    for (const Keyed& k : keyed[d]) {
      pl.ticket[k.e.op] = static_cast<int>(pl.mem_seq[d].size());
      pl.mem_seq[d].push_back(k.e);
      bytes += k.e.alloc ? k.e.bytes : -k.e.bytes;
      pl.peak_bytes[d] = std::max(pl.peak_bytes[d], bytes);
    }
    pl.mem_offset[d + 1] = pl.mem_offset[d] + static_cast<int>(pl.mem_seq[d].size());
  }
  pl.data_in.assign(n, -1);
  pl.data_out.assign(n, -1);
  for (const Edge& e : pl.edges) {
    if (e.bytes == 0) continue;
    pl.data_in[e.to] = e.id;
    pl.data_out[e.from] = e.id;
  }
  pl.all_lane_ops = pl.lane_ops;
  if (o.peers) KeepDevice(pl, o.peers->rank());
  return pl;
}

}  // namespace optpipe::runtime::internal
