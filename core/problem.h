// Problem: one pipeline-parallel training iteration to schedule (optpipe-problem/1).
//
// D devices run S = D*v stages; each of M micro-batches passes F through every
// stage, then B (activation gradient) and W (weight gradient) back. Activations
// live on the device from F's start until B/W free them, unless offloaded (O)
// to the host and reloaded (R) before B. All arrays are expanded to full length
// by the loader, so code indexes them directly.
//
//   StatusOr<Problem> p = LoadProblem("unit-4x8.json");   // core/format.h
//   double t = Duration(*p, Op{OpType::kB, 2, 0});
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/status.h"

namespace optpipe {

enum class Objective { kMakespan, kDeviceSpan };

struct Problem {
  std::string name;
  int devices = 1;            // D
  int microbatches = 1;       // M
  int stages_per_device = 1;  // v
  // "interleaved", "vshape" or "explicit"; stage_device holds the result [S].
  std::string placement = "interleaved";
  std::vector<int> stage_device;
  bool split_backward = true;

  std::vector<double> f, b, w;                 // [S] durations of one micro-batch's F, B, W
  std::vector<double> comm;                    // [S-1] transfer time between stage s and s+1
  std::optional<std::vector<double>> offload;  // [S] one O or one R; nullopt: no offload

  std::vector<double> activation;                   // [S] allocated when F starts
  std::vector<double> freed_by_b;                   // [S] freed when B ends; the rest when W ends
  std::vector<double> offloadable;                  // [S] moved out by O, back by R
  std::vector<double> static_memory;                // [D]
  std::optional<std::vector<double>> memory_limit;  // [D]; nullopt: unlimited

  // A partition of the devices: O and R of one group run one at a time. The
  // loader fills in a singleton group for every device the file leaves out.
  std::vector<std::vector<int>> host_links;
  Objective objective = Objective::kMakespan;

  int stages() const { return devices * stages_per_device; }
  OpSpace op_space() const { return OpSpace(stages(), microbatches); }
  bool offload_allowed() const { return offload.has_value(); }
  bool memory_limited() const { return memory_limit.has_value(); }
  friend bool operator==(const Problem&, const Problem&) = default;
};

// Times and memory amounts are checked to kTimeTolerance of a unit
// (core/checker.h), which sums of doubles hold up to totals of about
// kMaxTotal: Validate refuses a problem whose iteration, run one op after
// another, takes longer, or one where a device could hold more memory.
constexpr double kTimeTolerance = 1e-6;
constexpr double kMaxTotal = 1e10;

// Op slots have int indices (OpSpace): kNumOpTypes of them for every stage
// and micro-batch. A problem with more is refused as unrepresentable.
constexpr std::int64_t kMaxOpSlots = INT_MAX;

// The ops a problem of this shape schedules: F and B (and W when the
// backward is split) for every stage and micro-batch, O and R where offload
// is allowed. 64-bit, so that it can be checked before anything is sized.
inline std::int64_t OpCount(std::int64_t devices, std::int64_t stages_per_device,
                            std::int64_t microbatches, bool split_backward, bool offload) {
  return devices * stages_per_device * microbatches *
         ((split_backward ? 3 : 2) + (offload ? 2 : 0));
}
inline std::int64_t OpCount(const Problem& p) {
  return OpCount(p.devices, p.stages_per_device, p.microbatches, p.split_backward,
                 p.offload_allowed());
}

// Checks every field and cross-field rule; the message names the first bad
// field, e.g. "memory.limit[3]: must be >= memory.static[3] (10 < 12)".
Status Validate(const Problem& p);

// Refuses counts whose ops optpipe cannot index (see kMaxOpSlots), naming
// the fields; counts are >= 1 and at most 1e9 each.
Status CheckShape(std::int64_t devices, std::int64_t stages_per_device, std::int64_t microbatches);

// Device of every stage for a placement name ("interleaved", "vshape").
StatusOr<std::vector<int>> PlaceStages(const std::string& placement, int devices, int v);

// Host-link id of every device [D].
std::vector<int> LinkOfDevice(const Problem& p);

// --- Per-op quantities, the one definition every component uses (inline:
// the simulator calls them for every op of every simulation). ---

inline int DeviceOf(const Problem& p, const Op& op) { return p.stage_device[op.stage]; }

inline double Duration(const Problem& p, const Op& op) {
  const int s = op.stage;
  switch (op.type) {
    case OpType::kF:
      return p.f[s];
    case OpType::kB:
      return p.split_backward ? p.b[s] : p.b[s] + p.w[s];
    case OpType::kW:
      return p.w[s];
    case OpType::kO:
    case OpType::kR:
      return p.offload ? (*p.offload)[s] : 0.0;
  }
  return 0.0;
}

// Transfer time from stage s to s+1 (either direction); 0 on one device.
inline double CommTime(const Problem& p, int s) {
  return p.stage_device[s] == p.stage_device[s + 1] ? 0.0 : p.comm[s];
}

// [S] the least time from F(s,m)'s end to B(s,m)'s start: the forwards of the
// later stages, their backwards back, and the comms both ways.
std::vector<double> ForwardToBackward(const Problem& p);

// The grains CommonGrain tries, coarsest first: steps of 1, 2 and 5 (and 2.5,
// 1.25, 4) from 1000 down to 0.001, so that a problem in microseconds gets
// the grid it has in milliseconds (docs/exact.md, "The time grain").
inline constexpr std::array<double, 27> kGrains = {
    1000, 500,  250, 200,   125, 100,  50,   40,    25,   20,   10,    5,     2,    1.0,
    0.5,  0.25, 0.2, 0.125, 0.1, 0.05, 0.04, 0.025, 0.02, 0.01, 0.005, 0.002, 0.001};

// The largest step g in kGrains of which every value is a multiple (0 if none).
double CommonGrain(const std::vector<double>& values);

// CommonGrain of every duration and comm time. The least objective is then a
// multiple of it too: with its event order fixed (which op of a lane, which allocation
// or free on a device, comes first), a schedule stays valid and ends no later
// when every op starts as early as that order allows, and such starts are sums
// of durations and comm times. So a lower bound may be raised to the next
// multiple of g (AtGrain), and a schedule that ends there is optimal.
double TimeGrain(const Problem& p);

// The least multiple of TimeGrain(p) at or above `bound` (up to rounding
// error); `bound` itself where there is no grain.
double AtGrain(const Problem& p, double bound);

// p with every duration and comm time rounded up to a multiple of `grain` (a
// backward that is not split: B and W together, W then 0) and, given a
// `memory_grain`, every memory amount rounded to a multiple of it the way
// that only adds to the memory in use (activations and static memory up,
// what B frees and O moves out down, limits down): each schedule of it,
// replayed on p with its orders and start times, stays valid and ends no
// later (see Replay, core/simulator.h). A coarser time grid for searches
// whose size grows with the grid's columns.
Problem RoundedUp(const Problem& p, double grain, double memory_grain = 0);

// The largest multiple of TimeGrain(p) below `x` (by more than rounding
// error): a schedule better than one whose objective is x ends by it. `x`
// itself where there is no grain.
double BelowGrain(const Problem& p, double x);

// Memory an op allocates at its start (F: activation, R: offloadable).
inline double Allocates(const Problem& p, const Op& op) {
  switch (op.type) {
    case OpType::kF:
      return p.activation[op.stage];
    case OpType::kR:
      return p.offloadable[op.stage];
    default:
      return 0.0;
  }
}

// Memory an op frees at its end (B, W, O).
inline double Frees(const Problem& p, const Op& op) {
  const int s = op.stage;
  switch (op.type) {
    case OpType::kB:
      return p.split_backward ? p.freed_by_b[s] : p.activation[s];
    case OpType::kW:
      return p.activation[s] - p.freed_by_b[s];
    case OpType::kO:
      return p.offloadable[s];
    default:
      return 0.0;
  }
}

}  // namespace optpipe
