// CudaBackend: runs a schedule on GPUs (built only when CMake finds CUDA and
// NCCL: OPTPIPE_HAVE_CUDA; otherwise these functions say so).
//
// Logical device d runs on GPU d % gpus with a compute stream (F/B/W), a copy
// stream (O/R: cudaMemcpyAsync to pinned host memory and back) and streams for
// stage-to-stage transfers. A transfer between devices on distinct GPUs is an
// NCCL send/recv (one process, ncclCommInitAll, one rank per device, one p2p
// stream a device), otherwise a device-to-device copy (one stream per pair of
// devices); it lasts at least the problem's comm time, and the consumer's
// stream waits on its CUDA event. Every F/B/W/O/R is bracketed by CUDA events
// (its measured start and end) and the lane's host thread waits for the end
// event before the next op, so memory is allocated (cudaMallocAsync on the
// lane's stream) and freed in the executor's order. Without NCCL, and where
// every stream of a GPU has a hardware queue of its own
// (CUDA_DEVICE_MAX_CONNECTIONS, 8 unless set; `optpipe run` sets 32), consumers
// queue behind an op as soon as it is launched (Launched): they start when it
// ends, not when the host has seen it end (docs/runtime.md). Synthetic kernels are a
// one-thread spin on the GPU's %globaltimer, which needs no calibration and
// polls an abort flag in mapped host memory so a stopped run ends in
// microseconds. Every CUDA/NCCL failure becomes a Status naming the call,
// file:line and op.
//
//   StatusOr<int> gpus = CudaDeviceCount();              // error: no driver; 0: no GPU
//   StatusOr<std::unique_ptr<Backend>> cuda = MakeCudaBackend();
//   Executor ex(problem, **cuda, kernel, opt);
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/status.h"
#include "runtime/backend.h"

namespace optpipe::runtime {

struct CudaBackendOptions {
  int gpus = 0;      // GPUs to use (the first ones); 0: every visible GPU
  bool nccl = true;  // NCCL between devices when every device has its own GPU
  // Bytes every stage-to-stage transfer moves (0: none); a transfer lasts at
  // least the problem's comm time either way.
  std::size_t transfer_bytes = 1 << 20;
  // How long an aborted iteration waits for its streams to drain before it
  // aborts the NCCL communicators.
  double drain_timeout_s = 5.0;
};

// Whether this build has the CUDA backend.
bool CudaBackendBuilt();
// GPUs the CUDA runtime sees: an error naming the CUDA error when the runtime
// cannot start (no driver), kNotApplicable when built without CUDA.
StatusOr<int> CudaDeviceCount();
// "CUDA runtime 13000, driver 0, NCCL 22803": what the backend was built and runs with.
std::string CudaVersions();
StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& opt = {});

// The status the backend's check macro makes of a failed CUDA (nccl false) or
// NCCL (nccl true) call: "<call> failed: <error name>: <error text> at
// <file>:<line> (<op>)". Exposed for tests.
Status CudaCallStatus(int code, bool nccl, const char* call, const char* file, int line,
                      const std::string& op);

}  // namespace optpipe::runtime
