// optpipe run: execute a schedule on the stage runtime (CPU threads or CUDA
// streams) with synthetic kernels of the problem's op times, and compare what
// it measured with what the simulator predicted.
#include "tools/cmd_run.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>

#include "core/chrome_trace.h"
#include "core/format.h"
#include "core/gantt_svg.h"
#include "runtime/cpu_backend.h"
#include "runtime/cuda_backend.h"
#include "runtime/executor.h"
#include "runtime/measure.h"
#include "runtime/peers.h"
#include "runtime/synthetic_kernel.h"
#include "tools/cli.h"

namespace optpipe::cli {
namespace {}  // namespace

runtime::ExecutorOptions ExecutorOptionsFor(const RunArgs& a, const Problem& p,
                                            runtime::Peers* peers) {
  runtime::ExecutorOptions opt;
  opt.time_scale = a.time_scale > 0 ? a.time_scale : runtime::TimeScaleFor(p, 0.01);
  opt.bytes_per_unit = a.bytes_per_unit;
  opt.iterations = a.iterations;
  opt.watchdog_s = a.watchdog_s;
  opt.stop = InterruptFlag();
  opt.payload_bytes = a.payload_bytes;
  opt.peers = peers;
  return opt;
}

StatusOr<std::unique_ptr<runtime::Peers>> JoinRanks(const RunArgs& a, const Problem& p) {
  if (!runtime::LaunchedAsRanks()) return std::unique_ptr<runtime::Peers>();
  StatusOr<std::unique_ptr<runtime::Peers>> joined = runtime::ConnectPeers();
  if (!joined.ok()) return joined.status();
  std::unique_ptr<runtime::Peers> peers = std::move(*joined);
  SetRank(peers->rank());
  if (peers->rank() != 0) SetQuiet(true);
  if (peers->size() != p.devices) {
    return InvalidArgument("ranks: " + std::to_string(peers->size()) + " started for " +
                           std::to_string(p.devices) + " devices; start one a device (mpirun -np " +
                           std::to_string(p.devices) + ")");
  }
  if (a.backend != "cpu") {
    return Status(StatusCode::kNotApplicable,
                  "--backend cuda runs every device in one process for now; one rank per GPU "
                  "(NCCL across processes) is not built yet: use --backend cpu under mpirun, "
                  "or cuda without it");
  }
  return peers;
}

StatusOr<std::unique_ptr<runtime::Backend>> MakeBackend(const RunArgs& a) {
  if (a.backend == "cpu") return std::unique_ptr<runtime::Backend>(new runtime::CpuBackend());
  // A hardware queue for every stream (up to 32), so that ops can queue
  // behind the ones they wait for (runtime/cuda_backend.h); before CUDA
  // creates its context, and not over the user's choice.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
  runtime::CudaBackendOptions copt;
  copt.gpus = a.gpus;
  return runtime::MakeCudaBackend(copt);
}

namespace {

int RunSchedule(const RunArgs& a) {
  if (a.online) return RunOnline(a);
  if (a.schedule.empty()) {
    return Fail(InvalidArgument("schedule: a schedule file is needed (or --online)"));
  }
  StatusOr<Problem> p = LoadProblemFor(a.problem);
  if (!p.ok()) return Fail(p.status());
  StatusOr<TimedSchedule> timed = LoadScheduleFor(a.schedule);
  if (!timed.ok()) return Fail(timed.status());
  StatusOr<Schedule> s = OrdersOf(*p, *timed);
  if (!s.ok()) return Fail(s.status());
  s->method = timed->method;

  StatusOr<std::unique_ptr<runtime::Peers>> joined = JoinRanks(a, *p);
  if (!joined.ok()) return Fail(joined.status());
  std::unique_ptr<runtime::Peers> peers = std::move(*joined);
  const bool reports = !peers || peers->rank() == 0;  // rank 0 prints and writes

  StatusOr<std::unique_ptr<runtime::Backend>> made = MakeBackend(a);
  if (!made.ok()) return Fail(made.status());
  std::unique_ptr<runtime::Backend> backend = std::move(*made);
  runtime::ExecutorOptions opt = ExecutorOptionsFor(a, *p, peers.get());
  Progress() << "optpipe: running " << p->name << " (" << p->devices << " devices x "
             << p->microbatches << " micro-batches) with " << s->method << " on the " << a.backend
             << " backend: " << a.iterations
             << " iteration(s), 1 time unit = " << opt.time_scale * 1e3
             << " ms, 1 memory unit = " << std::fixed << std::setprecision(0) << opt.bytes_per_unit
             << " bytes, " << a.payload_bytes << " bytes a transfer";
  if (peers) {
    Progress() << ", " << peers->size() << " ranks (clocks aligned within "
               << peers->clock_error_s() * 1e6 << " us)";
  }
  Progress() << "\n" << std::defaultfloat << std::setprecision(6);

  runtime::SyntheticFaults faults;
  if (!a.fault.empty()) {
    const std::size_t colon = a.fault.find(':');
    StatusOr<Op> op = ParseOp(colon == std::string::npos ? "" : a.fault.substr(colon + 1));
    const std::string kind = a.fault.substr(0, colon);
    if (!op.ok() || (kind != "fail" && kind != "hang")) {
      return Fail(InvalidArgument("--fault: '" + a.fault + "' is not fail:OP or hang:OP (2F3)"));
    }
    (kind == "fail" ? faults.fail : faults.hang) = *op;
  }
  runtime::SyntheticKernel kernel(*p, opt.time_scale, faults);
  runtime::Executor ex(*p, *backend, kernel, opt);
  StatusOr<runtime::RunResult> r = ex.Run(*s);
  if (!r.ok()) {
    for (const runtime::LaneReport& l : ex.trace().lanes) {
      if (l.state == "another rank's") continue;
      std::cerr << "optpipe: " << (peers ? "rank " + std::to_string(peers->rank()) + ": " : "")
                << "  " << l.lane << ": " << l.state << " (" << l.ops_done << "/" << l.ops_total
                << " ops)\n";
    }
    if (Interrupted()) {
      std::cerr << "optpipe: run interrupted: every lane stopped, nothing measured\n";
      return kInterrupted;
    }
    const int code = Fail(r.status());
    // Every rank has stopped (they tell each other): let all say where they stood
    // before any exits, which makes the launcher end the job.
    if (peers) (void)peers->AllOk(false);
    return code;
  }
  // The payload chain: every micro-batch checked forward (last stage) and backward (first).
  std::vector<double> checked = {double(kernel.forward_checked()),
                                 double(kernel.backward_checked())};
  if (peers) {
    std::vector<double> all;
    if (Status st = peers->Gather(checked, &all); !st.ok()) return Fail(st);
    for (std::size_t k = 2; k < all.size(); ++k) all[k % 2] += all[k];
    if (!all.empty()) checked = {all[0], all[1]};
    peers->Finalize();
  }
  if (!reports) return kOk;
  if (a.payload_bytes >= 8 && !r->interrupted) {  // an interrupted iteration checked some
    const int want = p->microbatches * static_cast<int>(r->iterations.size());
    Progress() << "optpipe: payloads: checksum chain right for " << checked[0] << "/" << want
               << " micro-batches forward and " << checked[1] << "/" << want << " backward\n";
    if (checked[0] != want || checked[1] != want) {
      return Fail(Internal("payloads: the checksum chain missed micro-batches"));
    }
  }
  const runtime::IterationResult& med = runtime::MedianIteration(*r);
  double lo = med.makespan, hi = med.makespan;
  for (const runtime::IterationResult& it : r->iterations) {
    lo = std::min(lo, it.makespan);
    hi = std::max(hi, it.makespan);
  }
  const double sim = r->predicted.makespan;
  std::printf("makespan: simulated %.6g, measured %.6g (%+.2f%%)", sim, med.makespan,
              sim > 0 ? 100 * (med.makespan - sim) / sim : 0.0);
  if (r->iterations.size() > 1) {
    std::printf(" [median of %zu iterations; min %.6g, max %.6g]", r->iterations.size(), lo, hi);
  }
  std::printf("\n%-7s %-15s %-15s %s\n", "device", "peak simulated", "peak measured",
              "bytes measured");
  for (int d = 0; d < p->devices; ++d) {
    std::printf("%-7d %-15.6g %-15.6g %lld\n", d, r->predicted.peak_memory[d], med.peak_memory[d],
                static_cast<long long>(med.peak_bytes[d]));
  }
  const TimedSchedule measured = runtime::MeasuredSchedule(*p, *s, med);
  for (const auto& [path, content] :
       {std::pair{&a.measured_out, 0}, std::pair{&a.trace, 1}, std::pair{&a.svg, 2}}) {
    if (path->empty()) continue;
    const std::string text = content == 0   ? ToJson(measured)
                             : content == 1 ? ChromeTrace(*p, measured)
                                            : GanttSvg(*p, measured);
    if (Status st = WriteFile(*path, text); !st.ok()) return Fail(st);
  }
  if (!a.profile_out.empty()) {
    if (Status st = WriteFile(a.profile_out, ToJson(runtime::ProfileFromRun(*p, *r))); !st.ok()) {
      return Fail(st);
    }
  }
  if (r->interrupted) {
    std::cerr << "optpipe: run interrupted: the figures are those of the " << r->iterations.size()
              << " iteration(s) that ended\n";
    return kInterrupted;
  }
  return kOk;
}

}  // namespace

Command AddRun(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* sub = app.add_subcommand(
      "run", "Execute a schedule on the stage runtime and compare it with the simulator");
  sub->add_option("problem", args->problem, "optpipe-problem/1 JSON file")->required();
  sub->add_option("schedule", args->schedule,
                  "optpipe-schedule/1 JSON file (its per-lane order is run); none with --online");
  sub->add_option("--backend", args->backend, "cpu (threads) or cuda (GPU streams, NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--iterations", args->iterations, "Runs of the whole schedule")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option(
         "--time-scale", args->time_scale,
         "Wall seconds per problem time unit (default: the shortest compute op lasts 10 ms)")
      ->check(kPositive);
  sub->add_option("--bytes-per-unit", args->bytes_per_unit, "Bytes per problem memory unit")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option("--watchdog", args->watchdog_s,
                  "Seconds without any op starting or ending that stop the run (default: 2 s + 4x "
                  "the longest op)")
      ->check(kPositive);
  sub->add_option("--payload-bytes", args->payload_bytes,
                  "Bytes every activation and gradient carries between stages (a checksum "
                  "chain through them is checked)")
      ->capture_default_str();
  sub->add_option("--fault", args->fault,
                  "Testing: fail:OP makes that op's kernel fail halfway, hang:OP never end "
                  "(e.g. hang:2F3); every lane, and every rank, must stop and say where");
  sub->add_option("--gpus", args->gpus,
                  "cuda: GPUs to use (default: all); device d runs on GPU d % gpus")
      ->check(kNonNegative);
  sub->add_option("--measured-out", args->measured_out,
                  "Write the measured schedule (optpipe-schedule/1, the median iteration) here");
  sub->add_option("--trace", args->trace,
                  "Write the measured schedule as a Chrome/Perfetto trace (1 unit = 1 ms) here");
  sub->add_option("--svg", args->svg, "Draw the measured schedule as a Gantt chart SVG here");
  sub->add_option("--profile-out", args->profile_out,
                  "Write the problem with the measured median op times (optpipe-problem/1) here");
  sub->add_flag("--online", args->online,
                "Schedule while running: start on a schedule that fits at once, refine it in the "
                "background, adopt every better one at an iteration boundary, re-solve when the "
                "measured times drift");
  sub->add_option("--refine-seconds", args->refine_seconds,
                  "--online: the background refinement's budget (and again after a drift)")
      ->check(kNonNegative)
      ->capture_default_str();
  sub->add_option("--methods", args->methods, "--online: the refinement's methods, in turn")
      ->capture_default_str();
  sub->add_option("--drift", args->drift,
                  "--online: STAGE:FACTOR@ITERATION scales one stage's kernel times by FACTOR "
                  "from that iteration (1-based) on, to show a re-solve");
  sub->add_option("--drift-threshold", args->drift_threshold,
                  "--online: re-solve when a stage's median measured time differs from the "
                  "model by more than this fraction")
      ->check(kPositive)
      ->capture_default_str();
  CLI::Option* cache =
      sub->add_option("--cache", args->cache,
                      "--online: start from the schedule cache and store what is solved: FILE, "
                      "or the default (see `optpipe cache --help`)")
          ->expected(0, 1)
          ->type_name("[FILE]");
  sub->add_flag("--json", args->json,
                "--online: one record per iteration on stdout (optpipe-online-run/1)");
  sub->footer(
      "Synthetic kernels last the problem's op times; activations are real buffers, counted by\n"
      "the executor, so the measured peak memory is exact. Under mpirun (Open MPI) each rank\n"
      "runs one device: mpirun -np D optpipe run P S (CPU backend; messages and payloads over\n"
      "MPI; rank 0 prints and writes; a rank that fails or hangs stops every other one).\n"
      "Exit 1 when an op fails or the watchdog fires (the message names the device and op), 3\n"
      "when the backend is unavailable,\n"
      "130 when Ctrl-C stopped it (every lane stops within 0.1 s; the iterations that ended\n"
      "are reported and written).\n"
      "--online: each iteration runs the schedule in use, measures it and reports the measured\n"
      "op times to the scheduler, which re-solves once their medians over 3 iterations differ\n"
      "from its model by more than 5% on a stage.\n"
      "Example: optpipe run tests/cases/unit-4x8.json s.json --iterations 3 --profile-out p.json\n"
      "         optpipe run tests/cases/llama-8dev-offload.json --online --iterations 20\n"
      "         --refine-seconds 5 --drift 3:1.5@8 --json");
  return {sub, [args, cache] {
            args->use_cache = cache->count() > 0;
            return RunSchedule(*args);
          }};
}

}  // namespace optpipe::cli
