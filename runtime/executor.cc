// Executor::Run: checks the options, simulates the schedule, builds the plan,
// prepares the backend and runs the iterations (runtime/executor_internal.h).
#include "runtime/executor.h"

#include <cmath>
#include <string>
#include <vector>

#include "runtime/executor_internal.h"
#include "runtime/peers.h"

namespace optpipe::runtime {

std::int64_t BytesOf(double units, double bytes_per_unit) {
  return static_cast<std::int64_t>(std::llround(units * bytes_per_unit));
}

Executor::Executor(const Problem& p, Backend& backend, StageKernel& kernel, ExecutorOptions opt)
    : p_(p), backend_(backend), kernel_(kernel), opt_(opt) {}

StatusOr<RunResult> Executor::Run(const Schedule& s) {
  trace_ = RunTrace{};
  if (!(opt_.time_scale > 0) || !std::isfinite(opt_.time_scale)) {
    return InvalidArgument("time_scale: must be a finite number > 0");
  }
  if (!(opt_.bytes_per_unit > 0) || !std::isfinite(opt_.bytes_per_unit)) {
    return InvalidArgument("bytes_per_unit: must be a finite number > 0");
  }
  if (opt_.iterations < 1) return InvalidArgument("iterations: must be >= 1");
  if (opt_.watchdog_s < 0) return InvalidArgument("watchdog_s: must be >= 0");
  if (opt_.peers && opt_.peers->size() != p_.devices) {
    return InvalidArgument("peers: " + std::to_string(opt_.peers->size()) +
                           " ranks for a problem of " + std::to_string(p_.devices) +
                           " devices: start one rank per device");
  }
  StatusOr<SimResult> sim = Simulate(p_, s);
  if (!sim.ok()) return sim.status();
  const internal::Plan plan = internal::BuildPlan(p_, s, *sim, opt_);
  const double watchdog = opt_.watchdog_s > 0 ? opt_.watchdog_s : 2.0 + 4.0 * plan.longest_s;

  RunControl control;
  BackendSetup setup;
  setup.problem = &p_;
  setup.time_scale = opt_.time_scale;
  setup.control = &control;
  setup.ops = plan.space.size();
  setup.edges = plan.edges;
  setup.host_bytes = plan.host_bytes;
  if (Status st = backend_.Prepare(setup); !st.ok()) return st;

  RunResult res;
  res.predicted = *sim;
  res.predicted_peak_bytes = plan.peak_bytes;
  res.time_scale = opt_.time_scale;
  res.bytes_per_unit = opt_.bytes_per_unit;

  // Static memory (weights, optimizer state) held for the whole run.
  std::vector<Buffer> statics(plan.D);
  const auto release_statics = [&] {
    for (int d = 0; d < plan.D; ++d) {
      if (statics[d].data) backend_.FreeDevice(d, d, statics[d]);
      statics[d] = Buffer{};
    }
  };
  if (opt_.allocate_static) {
    for (int d = 0; d < plan.D; ++d) {
      if (plan.static_bytes[d] <= 0 || (plan.me >= 0 && d != plan.me)) continue;
      StatusOr<Buffer> b =
          backend_.AllocateDevice(d, d, static_cast<std::size_t>(plan.static_bytes[d]));
      if (!b.ok()) {
        release_statics();
        return Status(b.status().code(),
                      "device " + std::to_string(d) + ": static memory: " + b.status().message());
      }
      statics[d] = *b;
    }
  }
  for (int it = 0; it < opt_.iterations; ++it) {
    internal::Iteration iter(p_, plan, opt_, backend_, kernel_, control);
    Status st = iter.Run(watchdog, &trace_, it);
    if (opt_.peers) {  // every rank learns whether all went well, then rank 0 gathers
      StatusOr<bool> all = opt_.peers->AllOk(st.ok());
      if (!all.ok()) {
        st = all.status();
      } else if (st.ok() && !*all) {
        st = Internal("another rank failed; its own report says why");
      } else if (st.ok()) {
        st = iter.GatherRanks();
      }
    }
    if (!st.ok()) {
      release_statics();
      if (IsCancelled(st) && opt_.stop && opt_.stop->load() && !res.iterations.empty()) {
        res.interrupted = true;  // the iterations that ended stand
        return res;
      }
      if (opt_.iterations > 1) {
        return Status(st.code(), "iteration " + std::to_string(it) + ": " + st.message());
      }
      return st;
    }
    res.iterations.push_back(iter.Result());
  }
  release_statics();
  return res;
}

}  // namespace optpipe::runtime
