#include "core/problem.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/text_format.h"

namespace optpipe {
namespace {

Status CheckArray(const std::vector<double>& a, std::size_t n, const std::string& field) {
  if (a.size() != n) {
    return InvalidArgument(field + ": expected " + std::to_string(n) + " values, got " +
                           std::to_string(a.size()));
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || a[i] < 0) {
      return InvalidArgument(field + "[" + std::to_string(i) +
                             "]: must be a finite number >= 0 (got " + FormatNumber(a[i]) + ")");
    }
  }
  return OkStatus();
}

}  // namespace

Status CheckShape(std::int64_t devices, std::int64_t stages_per_device, std::int64_t microbatches) {
  // Each count is at most 1e9 (the readers' integers), so these products of
  // int64 cannot overflow.
  const std::int64_t slots = devices * stages_per_device * microbatches * kNumOpTypes;
  if (slots > kMaxOpSlots) {
    return InvalidArgument(
        "devices x stages_per_device x microbatches: " + std::to_string(devices) + " x " +
        std::to_string(stages_per_device) + " x " + std::to_string(microbatches) + " gives " +
        std::to_string(slots / kNumOpTypes) + " stage-micro-batch pairs, more than the " +
        std::to_string(kMaxOpSlots / kNumOpTypes) + " that op indices (32-bit) can hold");
  }
  return OkStatus();
}

StatusOr<std::vector<int>> PlaceStages(const std::string& placement, int devices, int v) {
  if (devices < 1 || v < 1 || std::int64_t{devices} * v > kMaxOpSlots / kNumOpTypes) {
    return InvalidArgument("placement: " + std::to_string(devices) + " devices x " +
                           std::to_string(v) + " stages per device is not a stage count " +
                           "optpipe can index");
  }
  const int stages = devices * v;
  std::vector<int> dev(stages);
  if (placement == "interleaved") {
    for (int s = 0; s < stages; ++s) dev[s] = s % devices;
  } else if (placement == "vshape") {
    for (int k = 0; k < v; ++k) {
      for (int d = 0; d < devices; ++d) {
        dev[k % 2 == 0 ? k * devices + d : k * devices + devices - 1 - d] = d;
      }
    }
  } else {
    return InvalidArgument("placement: expected \"interleaved\", \"vshape\" or an array of " +
                           std::to_string(stages) + " device ids, got \"" + placement + "\"");
  }
  return dev;
}

Status Validate(const Problem& p) {
  if (p.devices < 1)
    return InvalidArgument("devices: must be >= 1 (got " + std::to_string(p.devices) + ")");
  if (p.microbatches < 1) {
    return InvalidArgument("microbatches: must be >= 1 (got " + std::to_string(p.microbatches) +
                           ")");
  }
  if (p.stages_per_device < 1) {
    return InvalidArgument("stages_per_device: must be >= 1 (got " +
                           std::to_string(p.stages_per_device) + ")");
  }
  if (Status st = CheckShape(p.devices, p.stages_per_device, p.microbatches); !st.ok()) return st;
  const std::size_t S = p.stages(), D = p.devices;
  if (p.stage_device.size() != S) {
    return InvalidArgument("placement: expected " + std::to_string(S) + " device ids, got " +
                           std::to_string(p.stage_device.size()));
  }
  for (std::size_t s = 0; s < S; ++s) {
    if (p.stage_device[s] < 0 || p.stage_device[s] >= p.devices) {
      return InvalidArgument("placement[" + std::to_string(s) + "]: device " +
                             std::to_string(p.stage_device[s]) + " is not in [0, " +
                             std::to_string(D) + ")");
    }
  }
  for (auto [a, name] : {std::pair{&p.f, "stage_time.f"},
                         {&p.b, "stage_time.b"},
                         {&p.w, "stage_time.w"},
                         {&p.activation, "memory.activation"},
                         {&p.freed_by_b, "memory.freed_by_b"},
                         {&p.offloadable, "memory.offloadable"}}) {
    if (Status st = CheckArray(*a, S, name); !st.ok()) return st;
  }
  if (Status st = CheckArray(p.comm, S - 1, "comm_time"); !st.ok()) return st;
  if (p.offload) {
    if (Status st = CheckArray(*p.offload, S, "offload_time"); !st.ok()) return st;
  }
  if (Status st = CheckArray(p.static_memory, D, "memory.static"); !st.ok()) return st;
  // Every time the simulator and checker add up stays below the iteration's
  // serial time (each op of each micro-batch one after another, comm and
  // copies included); their tolerance is kTimeTolerance of a unit, which a
  // double holds for sums up to about kMaxTotal (docs/FORMAT.md).
  const auto too_large = [](const std::string& what, double amount, const std::string& units) {
    return InvalidArgument(what + " is " + FormatNumber(amount) + ", more than " +
                           FormatNumber(kMaxTotal) + " units: they are checked to " +
                           FormatNumber(kTimeTolerance) + " of a unit, which sums that large " +
                           "cannot hold; give them in a coarser unit (" + units + ")");
  };
  double serial = 0;
  for (std::size_t s = 0; s < S; ++s) {
    serial += p.f[s] + p.b[s] + p.w[s] + (s + 1 < S ? 2 * p.comm[s] : 0.0) +
              (p.offload ? 2 * (*p.offload)[s] : 0.0);
  }
  serial *= p.microbatches;
  if (!(serial <= kMaxTotal)) {
    return too_large(
        "stage_time: the iteration's serial time (every op of every micro-batch, comm and "
        "copies, one after another)",
        serial, "ms or us rather than ns");
  }
  // Memory likewise: the most a device could hold, its static memory and an
  // activation of each of its stages for every micro-batch.
  std::vector<double> most(p.static_memory);
  for (std::size_t s = 0; s < S; ++s) most[p.stage_device[s]] += p.activation[s] * p.microbatches;
  for (std::size_t d = 0; d < D; ++d) {
    if (!(most[d] <= kMaxTotal)) {
      return too_large("memory: what device " + std::to_string(d) +
                           " could hold (its static memory and an activation of each of its "
                           "stages for every micro-batch)",
                       most[d], "MiB or GiB rather than bytes");
    }
  }
  for (std::size_t s = 0; s < S; ++s) {
    const std::string i = '[' + std::to_string(s) + ']';
    if (p.freed_by_b[s] > p.activation[s]) {
      return InvalidArgument("memory.freed_by_b" + i + ": must be <= memory.activation" + i + " (" +
                             FormatNumber(p.freed_by_b[s]) + " > " + FormatNumber(p.activation[s]) +
                             ")");
    }
    if (p.offloadable[s] > p.activation[s]) {
      return InvalidArgument("memory.offloadable" + i + ": must be <= memory.activation" + i +
                             " (" + FormatNumber(p.offloadable[s]) + " > " +
                             FormatNumber(p.activation[s]) + ")");
    }
  }
  if (p.memory_limit) {
    if (Status st = CheckArray(*p.memory_limit, D, "memory.limit"); !st.ok()) return st;
    for (std::size_t d = 0; d < D; ++d) {
      if ((*p.memory_limit)[d] < p.static_memory[d]) {
        const std::string i = "[" + std::to_string(d) + "]";
        return InvalidArgument("memory.limit" + i + ": must be >= memory.static" + i + " (" +
                               FormatNumber((*p.memory_limit)[d]) + " < " +
                               FormatNumber(p.static_memory[d]) + ")");
      }
    }
  }
  std::vector<int> seen(D, -1);
  for (std::size_t g = 0; g < p.host_links.size(); ++g) {
    if (p.host_links[g].empty()) {
      return InvalidArgument("host_links[" + std::to_string(g) +
                             "]: a group needs at least one device");
    }
    for (int d : p.host_links[g]) {
      const std::string where = "host_links[" + std::to_string(g) + "]: ";
      if (d < 0 || d >= p.devices) {
        return InvalidArgument(where + "device " + std::to_string(d) + " is not in [0, " +
                               std::to_string(D) + ")");
      }
      if (seen[d] >= 0) {
        return InvalidArgument(where + "device " + std::to_string(d) +
                               " is already in host_links[" + std::to_string(seen[d]) + "]");
      }
      seen[d] = static_cast<int>(g);
    }
  }
  for (std::size_t d = 0; d < D; ++d) {
    if (seen[d] < 0)
      return InvalidArgument("host_links: device " + std::to_string(d) + " is in no group");
  }
  return OkStatus();
}

std::vector<int> LinkOfDevice(const Problem& p) {
  std::vector<int> link(p.devices, -1);
  for (std::size_t g = 0; g < p.host_links.size(); ++g) {
    for (int d : p.host_links[g]) link[d] = static_cast<int>(g);
  }
  return link;
}

Problem RoundedUp(const Problem& p, double grain, double memory_grain) {
  const auto up = [](double x, double g) { return std::ceil(x / g - 1e-9) * g; };
  const auto down = [](double x, double g) { return std::floor(x / g + 1e-9) * g; };
  Problem q = p;
  if (memory_grain > 0) {
    for (double& x : q.activation) x = up(x, memory_grain);
    for (double& x : q.static_memory) x = up(x, memory_grain);
    for (double& x : q.freed_by_b) x = down(x, memory_grain);
    for (double& x : q.offloadable) x = down(x, memory_grain);
    if (q.memory_limit) {
      for (double& x : *q.memory_limit) x = down(x, memory_grain);
    }
  }
  for (int s = 0; s < p.stages(); ++s) {
    q.f[s] = up(p.f[s], grain);
    q.b[s] = up(p.split_backward ? p.b[s] : p.b[s] + p.w[s], grain);
    q.w[s] = p.split_backward ? up(p.w[s], grain) : 0.0;
    if (q.offload) (*q.offload)[s] = up((*p.offload)[s], grain);
  }
  for (double& c : q.comm) c = up(c, grain);
  return q;
}

std::vector<double> ForwardToBackward(const Problem& p) {
  const int S = p.stages();
  std::vector<double> gap(S, 0.0);
  for (int s = S - 2; s >= 0; --s) {
    gap[s] = gap[s + 1] + 2 * CommTime(p, s) + p.f[s + 1] + Duration(p, Op{OpType::kB, s + 1, 0});
  }
  return gap;
}

double CommonGrain(const std::vector<double>& values) {
  for (double g : kGrains) {
    bool ok = true;
    for (double x : values) {
      // A multiple up to rounding error: a billionth of it, at most a
      // thousandth of a grain (beyond a million grains a relative tolerance
      // alone would take any value for a multiple of 2).
      const double q = x / g;
      if (std::abs(q - std::round(q)) > std::min(1e-3, 1e-9 * std::max(1.0, q))) {
        ok = false;
        break;
      }
    }
    if (ok) return g;
  }
  return 0.0;
}

double TimeGrain(const Problem& p) {
  std::vector<double> v;
  for (int s = 0; s < p.stages(); ++s) {
    v.push_back(p.f[s]);
    v.push_back(p.b[s]);
    v.push_back(p.w[s]);
    if (p.offload) v.push_back((*p.offload)[s]);
  }
  for (double c : p.comm) v.push_back(c);
  return CommonGrain(v);
}

double AtGrain(const Problem& p, double bound) {
  const double g = TimeGrain(p);
  if (g <= 0 || !std::isfinite(bound)) return bound;
  const double q = bound / g;
  return std::max(bound, std::ceil(q - 1e-9 * std::max(1.0, std::abs(q))) * g);
}

double BelowGrain(const Problem& p, double x) {
  const double g = TimeGrain(p);
  if (g <= 0 || !std::isfinite(x)) return x;
  return (std::ceil(x / g - 1e-9) - 1) * g;
}

}  // namespace optpipe
