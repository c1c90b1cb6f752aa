// DeviceSearchBound: a lower bound on the makespan from each device alone,
// solved exactly by a branch-and-bound search; stronger than
// ComputeLowerBound (core/lower_bound.h) where a device is both busy and
// short of memory, and too costly to run on every call of it. docs/exact.md
// ("Device search") gives the whole argument.
//
// The relaxation keeps one device and its own host link (other devices'
// copies are dropped) and replaces the rest of the pipeline by bounds on when
// its ops may run, with t0 = 0 the first start of the iteration:
//  * the k-th forward of stage s starts no earlier than rF_s(k), from the
//    forwards of stage s-1 and, where the device's room holds at most c_s
//    activations of s, after k - c_s + 1 backwards of s ended; with offload,
//    once the backwards and the link's offloads (those of every earlier stage
//    on it first) could have freed enough room. Through these recursions a
//    device sees its neighbours' memory limits and host links too;
//  * the k-th backward likewise from stage s+1's; after the k-th last
//    backward ends, at least qB_s(k) of work follows;
//  * B(s,m) starts at least ForwardToBackward(s) after F(s,m) ends; the
//    stages between two stages of the device separate their k-th ops;
//  * memory as in docs/FORMAT.md, at most limit - static at any instant.
// Its least makespan bounds the problem's. Micro-batches differ only by
// position, so each stage's kept activations may take their backwards in
// forward order, offloaded ones likewise, W's in backward order: each swap
// keeps every count of resident memory and every precedence.
//
// The search places ops in order of start time, each as early as its lane,
// predecessors and memory allow. It prunes a state no earlier than a visited
// one with the same counts, one whose memory-time cannot fit the room in the
// time left (kept or offloaded, a fractional trade for link time; in whole
// activations where the room holds a fraction more than n), and a node whose
// bound, raised to the time grain, reaches the target. It probes upward: a
// probe at T looks only for completions before T and proves T when it finds
// none. A search cut short reports the least bound of the nodes it left.
// Searches run in two rounds, a sixteenth of the nodes first; the devices
// share their budget, second rounds to those cut short, highest value first.
//
// Then devices that share a host link are coupled by a link budget (each
// device's least makespan with at most c activations offloaded says how many
// round trips it needs to end by T; the link runs them one at a time), and
// pairs of devices (consecutive stages, or a shared link) are searched
// together, each with its compute and room, in the time the devices left.
// Given a schedule's objective (`upper`) no probe aims above it, so a pair
// whose least makespan is that schedule's proves it with one probe.
//
// Cost: exponential in the worst case, about 1-2 us a node; a pair's memo of
// visited states takes up to about 200 MB.
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
