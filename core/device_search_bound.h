// DeviceSearchBound: a lower bound on the makespan from each device alone,
// solved exactly by a branch-and-bound search; stronger than
// ComputeLowerBound (core/lower_bound.h) where a device is both busy and
// short of memory, and too costly to run on every call of it.
//
// A device runs, for each stage s it holds, M forwards, backwards (and weight
// gradients) and, with offload, copies on its host link. The relaxation keeps
// only that device and its own link (other devices' copies are dropped), and
// replaces the rest of the pipeline by bounds on when its ops may run, with
// t0 = 0 the first start of the iteration:
//  * the k-th forward of stage s to start starts no earlier than rF_s(k):
//    rF_0(k) = k f_0, rF_s(k) = max(rF_{s-1}(k) + f_{s-1} + comm, rF_s(k-1) + f_s)
//    (the k first F(s) each need a distinct F(s-1) ended), and, when the
//    device's room holds at most c_s activations of stage s (counting what
//    cannot go to the host), rF_s(k) >= rB_s(k - c_s) + b_s: the k-th F(s)
//    waits for k - c_s + 1 backwards of s to end. With offload, what must
//    be freed before the k-th F(u) starts, (k + 1) a_u - room, comes from
//    backwards ended (at most a_u each) and offloads ended (at most the
//    offloadable part each). The k-th F of each stage u <= s starts before
//    the k-th F(s), and the offloads of the stages on one host link run one
//    at a time on it: rF_s(k) is at least the earliest time by which the
//    backwards and the link's offloads could have freed enough for every
//    such u on s's link. Through the recursions a device sees its
//    neighbours' memory limits and host links too;
//  * the k-th backward to start, likewise from the backwards of stage s+1;
//  * after the end of the k-th last backward, at least qB_s(k) of time:
//    the backwards of the stages below and the device's own last ops;
//  * B(s,m) starts at least ForwardToBackward(s) after F(s,m) ends;
//  * between two stages s < s' the device holds next in pipeline order (the
//    stages between on other devices), the k-th F(s') starts at least their
//    forwards' time after the k-th F(s) ends, and the k-th B(s) at least
//    their backwards' time after the k-th B(s') ends;
//  * memory as in FORMAT.md: F allocates the activation at its start, O frees
//    the offloadable part at its end, R brings it back at its start, B and W
//    free at their ends; at most limit - static at any instant.
// The micro-batches of the relaxation differ only by position, so in each
// stage the kept activations may be taken in forward order for their
// backwards, the offloaded ones likewise for their copies and backwards, and
// the weight gradients in backward order (each swap keeps every count of
// resident memory and every precedence, those between stages being on
// counts). The search places the ops in order of start
// time, each as early as its lane, its predecessors and memory allow; states
// whose times are all no earlier than a visited state's with the same counts
// are pruned (the times of the activations still waiting, class by class in
// forward order, whichever micro-batches were offloaded: fz4x8v2-L2's
// devices finish at 66 in 7M nodes, where 120M had proved 65; 1.2-2.5 times
// fewer nodes on most finished 4x8 and 8x16 searches), and so are those
// whose memory-time cannot fit: from the last
// start on the device holds at most its room at a time, each forward still to
// run holds at least its kept life (or offloaded, its offloadable part over
// f + 2t + b, for 2t of the link after the copies owed), each activation
// placed what is left of its own, which keeping or offloading trades for
// link time (a fractional choice; fz8x16v1-L2, 8x16 with room for two
// activations: 73 -> 78 at 2M nodes a device, where 100M nodes gave 76).
// Where the room holds a fraction more than a whole number n of activations,
// the same count in whole activations, at most n resident at a time, each
// from its forward's start to its offload's end and from its reload's start
// to its backward's end (r48-6s, room for 1.6: 305k -> 22k nodes).
// It probes upward from the bound of the empty state: a probe at
// T looks only for completions ending before T (it proves T when it finds
// none, the least makespan when it finds some). With a time grain g
// (TimeGrain) the targets are multiples of g and a node is pruned when its
// bound, raised to g, reaches the target: the problem's least makespan is a
// multiple of g. The least makespan of the
// relaxation is a lower bound on the problem's; a search cut short by its
// budget reports the best bound it proved or the least bound of the nodes it
// left (cost: about 2 us a node; 4x8 problems with one stage a device finish
// in < 1 s; at 8x24 with offload, and with two stages a device from 4x8 on,
// the budget binds). The devices share their budget: each searches first
// with a sixteenth of its share, then those cut short that proved something
// search again from what they proved, the highest value first, each with
// half of the nodes left (the last with all of them), since the bound is
// their largest value.
//
// Devices sharing a host link are then coupled by a link budget: the same
// relaxation with at most c activations offloaded has least makespan v_d(c),
// so a schedule ending by T offloads at least n_d(T) = the least c with
// v_d(c) <= T on device d (a relaxation cut short bounds v_d(c), which only
// lowers n_d). The link runs every round trip of its devices one copy at a
// time, none before the first forward of its stages ends, and the last (a
// reload) at least a backward and the least tail after it before the end:
// T >= that head + sum_d n_d(T) * (d's shortest round trip) + that tail. The
// least such T is found by raising T from the devices' bound to the next
// point where some n_d falls, computing v_d(c) only for the c it needs
// (r48-6s: 47.44 -> 48.21, each device of its link needing nearly every
// activation on the host).
//
// Last, pairs of devices, those running consecutive stages and those sharing
// a host link, are searched together, most promising first: the same
// relaxation over both devices' stages, each device with its compute and
// room, their host link (or each its own) carrying their copies one at a
// time. It sees what neither device sees alone: when the downstream device's
// forwards arrive, given the upstream device's room and link, and how two
// devices' round trips share a link (r48-6s 48.21 -> 51.17 at 6M nodes;
// hetoff-5f 52.87 -> 53.45, its optimum; the 2x2 offload problem of the
// tests, its brute-force optimum). A pair starts from what its devices (and
// a link of theirs alone) proved, with a sixteenth of its budget, and runs
// again with all of it only where it proved more. Its memo of visited states
// takes up to about 200 MB (8x16 with two stages a device, where a device
// alone takes 30 MB). Given a known schedule's objective (`upper`), no
// probe aims above it: where a pair's least makespan is that schedule's,
// the probe at it proves it at once (r48-6s: 51.64 in 2.5M nodes; probing
// up from 50.77, the last probe aims at 54.57 and lowers its target as it
// finds completions, 4.7M nodes, more than its share of 6M).
//
//   DeviceSearchOptions opt;
//   double lb = ComputeDeviceSearchBound(problem, opt).value;  // 0 if nothing applies
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/problem.h"

namespace optpipe {

struct DeviceSearchBound;

// Search nodes a second, about: what a caller that budgets the search by its
// nodes (deterministic, and ending where the clock would not) gives it for a
// second of wall-clock time.
constexpr double kSearchNodesPerSecond = 1e6;

struct DeviceSearchOptions {
  // Search nodes per device (a deterministic budget: the devices share D
  // times this, see ComputeDeviceSearchBound), and wall-clock seconds for
  // the whole call (devices search in order: a device the clock cut short
  // leaves the next ones nothing). A search cut short still bounds: the
  // least node bound it left unexplored (weaker than the finished search's).
  std::int64_t max_nodes_per_device = 1'000'000;
  double time_limit_s = 2.0;
  // Search nodes per pair of devices searched together (0: none); the pairs
  // run after every device, in the time the devices left.
  std::int64_t max_nodes_per_pair = 1'000'000;
  // The objective of a known schedule (an incumbent's): no search aims
  // above it, and the bound ends there, which proves that schedule optimal
  // (see above). Any value is sound: below the least makespan it is proven
  // as it is.
  double upper = std::numeric_limits<double>::infinity();
  // A previous call's result on the same problem: its device, link and
  // finished pair values stand; its pairs cut short search again from their
  // values, most promising first, each with up to max_nodes_per_pair nodes in
  // one round (below a new `upper`, where a first round of a sixteenth would
  // prove nothing and end there).
  const DeviceSearchBound* resume = nullptr;
  // Set from any thread to end every search as the clock would.
  const std::atomic<bool>* stop = nullptr;
};

struct DevicePairValue {
  std::array<int, 2> devices;  // d < e
  double value = 0;            // their relaxation's optimum (or a bound on it)
  bool finished = false;       // the search ran to its end
};

struct DeviceSearchBound {
  double value = 0;                         // max over devices of device_value
  std::vector<double> device_value;         // [D] the relaxation's optimum (or a bound on it)
  std::vector<double> link_value;           // [host links] the link budget's bound (0: none)
  std::vector<DevicePairValue> pair_value;  // the pairs searched, most promising first
  std::int64_t nodes = 0;                   // search nodes over all devices
  bool finished = true;  // every device's search ran to its end (else the budget bound it)
};

// Makespan objective under a memory limit, at most 24 micro-batches (0 where
// nothing applies).
DeviceSearchBound ComputeDeviceSearchBound(const Problem& p, const DeviceSearchOptions& opt = {});

// The best lower bound core proves: ComputeLowerBound's and this search's,
// at the time grain (AtGrain).
double BestLowerBound(const Problem& p, const DeviceSearchOptions& opt = {});
// The same from a device search already run on p.
double BestLowerBound(const Problem& p, const DeviceSearchBound& search);

// "value (N nodes[, cut short]<more>)": a search as progress lines print it.
std::string Describe(const DeviceSearchBound& search, const std::string& more = "");

}  // namespace optpipe
