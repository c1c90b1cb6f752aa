// optpipe run's arguments, shared by the fixed-schedule run (cmd_run.cc) and
// the online run (cmd_run_online.cc).
#pragma once

#include <memory>
#include <string>

#include "core/problem.h"
#include "core/status.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "runtime/peers.h"

namespace optpipe::cli {

struct RunArgs {
  std::string problem, schedule, backend = "cpu", measured_out, profile_out;
  std::string trace, svg;  // views of the measured schedule
  int iterations = 1;
  double time_scale = 0;  // 0: the shortest compute op lasts 10 ms
  double bytes_per_unit = 1 << 20;
  double watchdog_s = 0;
  int gpus = 0;
  std::size_t payload_bytes = 64 << 10;
  std::string fault;  // fail:OP or hang:OP, for tests of fault handling
  // --online
  bool online = false;
  bool json = false;
  double refine_seconds = 10;
  std::string methods = "auto,milp";
  std::string drift;  // STAGE:FACTOR@ITERATION
  double drift_threshold = 0.05;
  bool use_cache = false;
  std::string cache;  // empty with use_cache: the default file
};

// The executor's options from the flags (time scale: the shortest compute op
// lasts 10 ms unless --time-scale), with Ctrl-C as its stop and `peers`.
runtime::ExecutorOptions ExecutorOptionsFor(const RunArgs& a, const Problem& p,
                                            runtime::Peers* peers);

// The backend `a.backend` names (cuda: one hardware queue per stream).
StatusOr<std::unique_ptr<runtime::Backend>> MakeBackend(const RunArgs& a);

// Under a launcher (mpirun): this process's rank, checked against the
// problem's devices and the backend; null without a launcher.
StatusOr<std::unique_ptr<runtime::Peers>> JoinRanks(const RunArgs& a, const Problem& p);

int RunOnline(const RunArgs& a);  // tools/cmd_run_online.cc

}  // namespace optpipe::cli
