#include "runtime/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runtime/copy_pieces.h"

namespace optpipe::runtime {
namespace {

constexpr std::size_t kPage = 4096;

}  // namespace

double TimeScaleFor(const Problem& p, double shortest_op_s) {
  double shortest = std::numeric_limits<double>::infinity();
  for (int s = 0; s < p.stages(); ++s) {
    for (OpType t : {OpType::kF, OpType::kB, OpType::kW}) {
      if (t == OpType::kW && !p.split_backward) continue;
      const double d = Duration(p, Op{t, s, 0});
      if (d > 0) shortest = std::min(shortest, d);
    }
  }
  return std::isfinite(shortest) ? shortest_op_s / shortest : shortest_op_s;
}

Status CpuBackend::Prepare(const BackendSetup& setup) {
  if (opt_.spin_s < 0) return InvalidArgument("spin_s: must be >= 0");
  p_ = setup.problem;
  control_ = setup.control;
  space_ = p_->op_space();
  return OkStatus();
}

Status CpuBackend::BeginIteration(Clock::time_point origin) {
  origin_ = origin;
  return OkStatus();
}

Status CpuBackend::EndIteration(bool) { return OkStatus(); }

double CpuBackend::Since(Clock::time_point t) const {
  return std::chrono::duration<double>(t - origin_).count();
}

StatusOr<Buffer> CpuBackend::Allocate(std::size_t bytes) const {
  void* data = std::malloc(bytes);
  if (data == nullptr) return Internal("malloc of " + std::to_string(bytes) + " bytes failed");
  if (opt_.touch_pages) {
    auto* c = static_cast<unsigned char*>(data);
    for (std::size_t k = 0; k < bytes; k += kPage) c[k] = 0;
    c[bytes - 1] = 0;
  }
  return Buffer{data, bytes};
}

StatusOr<Buffer> CpuBackend::AllocateDevice(int, int, std::size_t bytes) { return Allocate(bytes); }
void CpuBackend::FreeDevice(int, int, Buffer b) { std::free(b.data); }
StatusOr<Buffer> CpuBackend::AllocateHost(int, std::size_t bytes) { return Allocate(bytes); }
void CpuBackend::FreeHost(int, Buffer b) { std::free(b.data); }

Status CpuBackend::BusyUntil(Clock::time_point deadline) const {
  if (!control_->SleepUntil(After(deadline, -opt_.spin_s))) return Cancelled("stopped");
  for (int k = 0; Clock::now() < deadline; ++k) {
    if ((k & 63) == 0 && control_->stopped()) return Cancelled("stopped");
  }
  return OkStatus();
}

StatusOr<Message> CpuBackend::Deliver(const Edge& e, double end_s) {
  Message m;
  m.ready_s = end_s + e.lag_s;
  if (opt_.lose_transfer_of && space_.Index(*opt_.lose_transfer_of) == e.from &&
      e.from_device != e.to_device) {
    m.ready_s = std::numeric_limits<double>::infinity();
  }
  return m;
}

Status CpuBackend::Await(const Edge& e, const Message& m) {
  if (!std::isfinite(m.ready_s)) {
    control_->SleepUntil(Clock::time_point::max());
    return Cancelled("the transfer of " + ToString(space_.At(e.from)) + " never arrived");
  }
  if (e.lag_s <= 0) return OkStatus();
  return BusyUntil(After(origin_, m.ready_s));
}

// Threads run ops synchronously: an op is launched when it has ended.
Status CpuBackend::RunCompute(int, StageKernel& kernel, KernelContext& ctx,
                              Clock::time_point started, const Launched& launched, OpTimes* t) {
  ctx.stream = nullptr;
  ctx.occupy = [this, started](double seconds) { return BusyUntil(After(started, seconds)); };
  const Status st = kernel.Run(ctx);
  t->start = Since(started);
  t->end = Since(Clock::now());
  return st.ok() ? launched(t->end) : st;
}

Status CpuBackend::RunCopy(int, int, const Op&, std::vector<Buffer>& dev, std::vector<Buffer>& host,
                           bool to_host, double seconds, Clock::time_point started,
                           const Launched& launched, OpTimes* t) {
  Status st = CopyPieces(dev, host, to_host, [](void* dst, const void* src, std::size_t n) {
    std::memcpy(dst, src, n);
    return OkStatus();
  });
  if (st.ok()) st = BusyUntil(After(started, seconds));
  t->start = Since(started);
  t->end = Since(Clock::now());
  return st.ok() ? launched(t->end) : st;
}

}  // namespace optpipe::runtime
