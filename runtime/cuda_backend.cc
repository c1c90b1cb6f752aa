// The CUDA/NCCL backend (compiled only when OPTPIPE_HAVE_CUDA). See cuda_backend.h.
#include "runtime/cuda_backend.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

#include "runtime/copy_pieces.h"
#include "runtime/cuda_spin.h"

namespace optpipe::runtime {
namespace {

bool Failed(cudaError_t e) { return e != cudaSuccess; }
bool Failed(ncclResult_t r) { return r != ncclSuccess; }
Status CallStatus(cudaError_t e, const char* call, const char* file, int line,
                  const std::string& op) {
  return CudaCallStatus(static_cast<int>(e), false, call, file, line, op);
}
Status CallStatus(ncclResult_t r, const char* call, const char* file, int line,
                  const std::string& op) {
  return CudaCallStatus(static_cast<int>(r), true, call, file, line, op);
}

}  // namespace

// The one check for every CUDA and NCCL call: a failure returns a Status that
// names the call, its file:line and the op it served.
#define OPTPIPE_CHECK(call, op)                                                  \
  do {                                                                           \
    const auto optpipe_check_result_ = (call);                                   \
    if (Failed(optpipe_check_result_)) {                                         \
      return CallStatus(optpipe_check_result_, #call, __FILE__, __LINE__, (op)); \
    }                                                                            \
  } while (0)

Status CudaCallStatus(int code, bool nccl, const char* call, const char* file, int line,
                      const std::string& op) {
  std::string what;
  if (nccl) {
    what = "NCCL error " + std::to_string(code) + ": " +
           ncclGetErrorString(static_cast<ncclResult_t>(code));
    const char* last = ncclGetLastError(nullptr);
    if (last != nullptr && *last != '\0') what += " (" + std::string(last) + ")";
  } else {
    const auto e = static_cast<cudaError_t>(code);
    what = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }
  std::string where = file;  // from the repository root on
  if (const std::size_t k = where.rfind("runtime/"); k != std::string::npos)
    where = where.substr(k);
  return Internal(std::string(call) + " failed: " + what + " at " + where + ":" +
                  std::to_string(line) + (op.empty() ? "" : " (" + op + ")"));
}

bool CudaBackendBuilt() { return true; }

StatusOr<int> CudaDeviceCount() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return CallStatus(e, "cudaGetDeviceCount(&n)", __FILE__, __LINE__, "");
  }
  return n;
}

std::string CudaVersions() {
  int rt = 0, drv = 0, nccl = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  ncclGetVersion(&nccl);
  return "CUDA runtime " + std::to_string(rt) + ", driver " + std::to_string(drv) + ", NCCL " +
         std::to_string(nccl);
}

namespace {

// The hardware queues a GPU gives a process's streams: CUDA_DEVICE_MAX_CONNECTIONS
// (1-32, 8 unless set), read when CUDA creates its context.
int HardwareQueues() {
  const char* env = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int n = env != nullptr ? std::atoi(env) : 0;
  return n > 0 ? std::min(n, 32) : 8;
}

constexpr auto kSpinAhead = std::chrono::microseconds(300);
constexpr auto kSpinAfter = std::chrono::milliseconds(2);

unsigned long long Nanoseconds(double seconds) {
  return seconds > 0 ? static_cast<unsigned long long>(std::llround(seconds * 1e9)) : 0ULL;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(CudaBackendOptions opt) : opt_(opt) {}
  ~CudaBackend() override { Release(); }
  std::string name() const override { return "cuda"; }

  Status Prepare(const BackendSetup& setup) override {
    Release();
    p_ = setup.problem;
    control_ = setup.control;
    space_ = p_->op_space();
    D_ = p_->devices;
    edges_ = setup.edges;
    int count = 0;
    OPTPIPE_CHECK(cudaGetDeviceCount(&count), "setup");
    if (count == 0) return NotApplicable("no CUDA device");
    gpus_ = opt_.gpus > 0 ? std::min(opt_.gpus, count) : count;
    used_gpus_ = std::min(gpus_, D_);
    nccl_ = opt_.nccl && D_ > 1 && gpus_ >= D_ && opt_.transfer_bytes > 0;
    devs_.assign(D_, Device{});
    for (int d = 0; d < D_; ++d) devs_[d].gpu = d % gpus_;

    OPTPIPE_CHECK(cudaSetDevice(0), "setup");
    void* flag = nullptr;
    OPTPIPE_CHECK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable),
                  "setup: abort flag");
    abort_ = static_cast<volatile int*>(flag);
    *abort_ = 0;
    void* flag_dev = nullptr;
    OPTPIPE_CHECK(cudaHostGetDevicePointer(&flag_dev, flag, 0), "setup: abort flag");
    abort_dev_ = static_cast<volatile int*>(flag_dev);
    for (int d = 0; d < D_; ++d) {
      Device& dv = devs_[d];
      const std::string what = "setup of device " + std::to_string(d);
      OPTPIPE_CHECK(cudaSetDevice(dv.gpu), what);
      OPTPIPE_CHECK(cudaStreamCreateWithFlags(&dv.compute, cudaStreamNonBlocking), what);
      OPTPIPE_CHECK(cudaStreamCreateWithFlags(&dv.copy, cudaStreamNonBlocking), what);
      if (nccl_) OPTPIPE_CHECK(cudaStreamCreateWithFlags(&dv.p2p, cudaStreamNonBlocking), what);
      dv.inbound.assign(D_, nullptr);
      OPTPIPE_CHECK(
          cudaMalloc(reinterpret_cast<void**>(&dv.stamps), (2 + D_) * sizeof(unsigned long long)),
          what);
      if (opt_.transfer_bytes > 0) {
        OPTPIPE_CHECK(cudaMalloc(&dv.send, opt_.transfer_bytes), what);
        OPTPIPE_CHECK(cudaMalloc(&dv.recv, opt_.transfer_bytes), what);
        OPTPIPE_CHECK(cudaMemset(dv.send, 0, opt_.transfer_bytes), what);
      }
      if (d < static_cast<int>(setup.host_bytes.size()) && setup.host_bytes[d] > 0) {
        dv.host_size = setup.host_bytes[d] + 256 * static_cast<std::size_t>(space_.size());
        OPTPIPE_CHECK(
            cudaHostAlloc(reinterpret_cast<void**>(&dv.host), dv.host_size, cudaHostAllocPortable),
            what + ": pinned host memory");
      }
      // Keep freed activations in the pool: the next F reuses them without the OS.
      cudaMemPool_t pool;
      OPTPIPE_CHECK(cudaDeviceGetDefaultMemPool(&pool, dv.gpu), what);
      std::uint64_t keep = UINT64_MAX;
      OPTPIPE_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), what);
      // And never let an allocation wait for another stream to reach a free:
      // a dependency the schedule does not have.
      int no = 0;
      OPTPIPE_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no),
                    what);
    }
    if (nccl_) {
      std::vector<int> list(D_);
      std::iota(list.begin(), list.end(), 0);
      std::vector<ncclComm_t> comms(D_);
      OPTPIPE_CHECK(ncclCommInitAll(comms.data(), D_, list.data()), "setup: NCCL");
      for (int d = 0; d < D_; ++d) devs_[d].comm = comms[d];
    }
    expected_start_.assign(setup.ops, Clock::time_point{});
    expected_end_.assign(setup.ops, Clock::time_point{});
    start_ev_.assign(setup.ops, nullptr);
    end_ev_.assign(setup.ops, nullptr);
    for (int i = 0; i < setup.ops; ++i) {
      const Op op = space_.At(i);
      OPTPIPE_CHECK(cudaSetDevice(devs_[DeviceOf(*p_, op)].gpu), "setup of " + ToString(op));
      OPTPIPE_CHECK(cudaEventCreate(&start_ev_[i]), "setup of " + ToString(op));
      OPTPIPE_CHECK(cudaEventCreate(&end_ev_[i]), "setup of " + ToString(op));
    }
    arrive_ev_.assign(edges_.size(), nullptr);
    for (const Edge& e : edges_) {
      if (e.from_device == e.to_device) continue;
      OPTPIPE_CHECK(cudaSetDevice(devs_[e.to_device].gpu), "setup of a transfer");
      cudaStream_t& link = devs_[e.to_device].inbound[e.from_device];
      if (!nccl_ && link == nullptr) {
        OPTPIPE_CHECK(cudaStreamCreateWithFlags(&link, cudaStreamNonBlocking),
                      "setup of a transfer");
      }
      OPTPIPE_CHECK(cudaEventCreateWithFlags(&arrive_ev_[e.id], cudaEventDisableTiming),
                    "setup of a transfer");
    }
    // Consumers queue behind running ops (early_) only where every stream of
    // a GPU has a hardware queue of its own: streams that share one wait
    // behind each other's waits (docs/runtime.md has the measurement).
    std::vector<std::size_t> streams(gpus_, 0);
    for (const Device& dv : devs_) streams[dv.gpu] += Streams(dv).size();
    early_ = !nccl_ && *std::max_element(streams.begin(), streams.end()) <=
                           static_cast<std::size_t>(HardwareQueues());
    ref_ev_.assign(used_gpus_, nullptr);
    ref_s_.assign(used_gpus_, 0.0);
    for (int g = 0; g < used_gpus_; ++g) {
      OPTPIPE_CHECK(cudaSetDevice(g), "setup");
      OPTPIPE_CHECK(cudaEventCreate(&ref_ev_[g]), "setup");
    }
    prepared_ = true;
    return OkStatus();
  }

  Status BeginIteration(Clock::time_point origin) override {
    origin_ = origin;
    *abort_ = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (Device& dv : devs_) dv.host_used = 0;
    std::fill(expected_start_.begin(), expected_start_.end(), Clock::time_point{});
    // Pin every GPU's event clock to the host's: record, wait, read the host clock.
    for (int g = 0; g < used_gpus_; ++g) {
      OPTPIPE_CHECK(cudaSetDevice(g), "start of an iteration");
      OPTPIPE_CHECK(cudaEventRecord(ref_ev_[g], devs_[g].compute), "start of an iteration");
      OPTPIPE_CHECK(cudaEventSynchronize(ref_ev_[g]), "start of an iteration");
      ref_s_[g] = std::chrono::duration<double>(Clock::now() - origin_).count();
    }
    return OkStatus();
  }

  Status EndIteration(bool aborted) override {
    if (aborted) {
      *abort_ = 1;
      std::atomic_thread_fence(std::memory_order_seq_cst);
      const Clock::time_point deadline = After(Clock::now(), opt_.drain_timeout_s);
      for (int d = 0; d < D_; ++d) {
        Device& dv = devs_[d];
        OPTPIPE_CHECK(cudaSetDevice(dv.gpu), "abort");
        for (cudaStream_t s : Streams(dv)) {
          while (cudaStreamQuery(s) == cudaErrorNotReady && Clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
          if (cudaStreamQuery(s) == cudaErrorNotReady) {
            AbortNccl();
            return Internal("device " + std::to_string(d) + ": its streams were still busy " +
                            std::to_string(opt_.drain_timeout_s) +
                            " s after the run stopped; the NCCL communicators were aborted");
          }
        }
      }
    }
    for (int d = 0; d < D_; ++d) {
      Device& dv = devs_[d];
      OPTPIPE_CHECK(cudaSetDevice(dv.gpu), "end of an iteration");
      for (cudaStream_t s : Streams(dv)) {
        OPTPIPE_CHECK(cudaStreamSynchronize(s), "end of an iteration");
      }
    }
    *abort_ = 0;
    std::lock_guard<std::mutex> lock(mu_);
    Status st = deferred_;
    deferred_ = OkStatus();
    return st;
  }

  StatusOr<Buffer> AllocateDevice(int lane, int device, std::size_t bytes) override {
    Device& dv = devs_[device];
    const std::string what = std::to_string(bytes) + " bytes on device " + std::to_string(device);
    OPTPIPE_CHECK(cudaSetDevice(dv.gpu), what);
    void* ptr = nullptr;
    OPTPIPE_CHECK(cudaMallocAsync(&ptr, bytes, lane < D_ ? dv.compute : dv.copy), what);
    return Buffer{ptr, bytes};
  }

  void FreeDevice(int lane, int device, Buffer b) override {
    Device& dv = devs_[device];
    // On the freeing lane's stream, where nothing waits now (its last op has
    // ended); on another lane's, the free could lie behind an op queued for a
    // transfer (early_), and so could an allocation that reuses the block.
    cudaStream_t s = lane < D_ ? dv.compute : dv.copy;
    cudaError_t e = cudaSetDevice(dv.gpu);
    if (e == cudaSuccess) e = cudaFreeAsync(b.data, s);
    if (e != cudaSuccess) {
      std::lock_guard<std::mutex> lock(mu_);
      if (deferred_.ok()) {
        deferred_ = CallStatus(e, "cudaFreeAsync(b.data, s)", __FILE__, __LINE__,
                               "free on device " + std::to_string(device));
      }
    }
  }

  StatusOr<Buffer> AllocateHost(int device, std::size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    Device& dv = devs_[device];
    const std::size_t rounded = (bytes + 255) / 256 * 256;
    if (dv.host == nullptr || dv.host_used + rounded > dv.host_size) {
      return Internal("device " + std::to_string(device) + ": pinned host memory exhausted");
    }
    Buffer b{dv.host + dv.host_used, bytes};
    dv.host_used += rounded;
    return b;
  }

  void FreeHost(int, Buffer) override {}  // the arena is reset every iteration

  StatusOr<Message> Deliver(const Edge& e, double end_s) override {
    Message m;
    m.ready_s = end_s + e.lag_s;
    m.slot = e.id;
    if (e.from_device == e.to_device) return m;  // the consumer waits on the producer's end event
    const std::string what = "transfer of " + ToString(space_.At(e.from)) + " from device " +
                             std::to_string(e.from_device) + " to device " +
                             std::to_string(e.to_device);
    Device& src = devs_[e.from_device];
    Device& dst = devs_[e.to_device];
    cudaEvent_t produced = end_ev_[e.from];
    const std::size_t n = opt_.transfer_bytes;
    std::lock_guard<std::mutex> lock(mu_);  // one NCCL group at a time keeps every pair in order
    // Without NCCL every pair of devices has its own stream: a transfer queued
    // behind an op still running (early_) holds up no other pair's.
    cudaStream_t link = nccl_ ? dst.p2p : dst.inbound[e.from_device];
    unsigned long long* stamp = dst.stamps + 2 + e.from_device;
    const bool lag = e.lag_s > 0;
    // The transfer starts on the consumer's side when its producer ends.
    OPTPIPE_CHECK(cudaSetDevice(dst.gpu), what);
    OPTPIPE_CHECK(cudaStreamWaitEvent(link, produced, 0), what);
    if (lag) OPTPIPE_CHECK(cuda::LaunchStamp(link, stamp), what);
    if (n > 0 && nccl_) {
      OPTPIPE_CHECK(cudaSetDevice(src.gpu), what);
      OPTPIPE_CHECK(cudaStreamWaitEvent(src.p2p, produced, 0), what);
      OPTPIPE_CHECK(ncclGroupStart(), what);
      OPTPIPE_CHECK(ncclSend(src.send, n, ncclInt8, e.to_device, src.comm, src.p2p), what);
      OPTPIPE_CHECK(ncclRecv(dst.recv, n, ncclInt8, e.from_device, dst.comm, dst.p2p), what);
      OPTPIPE_CHECK(ncclGroupEnd(), what);
      OPTPIPE_CHECK(cudaSetDevice(dst.gpu), what);
    } else if (n > 0 && src.gpu == dst.gpu) {
      OPTPIPE_CHECK(cudaMemcpyAsync(dst.recv, src.send, n, cudaMemcpyDeviceToDevice, link), what);
    } else if (n > 0) {
      OPTPIPE_CHECK(cudaMemcpyPeerAsync(dst.recv, dst.gpu, src.send, src.gpu, n, link), what);
    }
    // It lasts at least the problem's comm time (the real copy may be shorter).
    if (lag) {
      OPTPIPE_CHECK(cuda::LaunchSpinUntil(link, stamp, Nanoseconds(e.lag_s), abort_dev_), what);
    }
    OPTPIPE_CHECK(cudaEventRecord(arrive_ev_[e.id], link), what);
    return m;
  }

  Status Await(const Edge& e, const Message&) override {
    Device& dv = devs_[e.to_device];
    const std::string what =
        ToString(space_.At(e.to)) + " waiting for " + ToString(space_.At(e.from));
    cudaEvent_t ev = e.from_device == e.to_device ? end_ev_[e.from] : arrive_ev_[e.id];
    OPTPIPE_CHECK(cudaSetDevice(dv.gpu), what);
    OPTPIPE_CHECK(cudaStreamWaitEvent(e.to_lane < D_ ? dv.compute : dv.copy, ev, 0), what);
    expected_start_[e.to] = std::max(expected_start_[e.to], After(expected_end_[e.from], e.lag_s));
    return OkStatus();
  }

  Status RunCompute(int, StageKernel& kernel, KernelContext& ctx, Clock::time_point,
                    const Launched& launched, OpTimes* t) override {
    const int i = space_.Index(ctx.op);
    Device& dv = devs_[ctx.device];
    const std::string what = ToString(ctx.op) + " on device " + std::to_string(ctx.device);
    const Clock::time_point enqueued = Clock::now();
    OPTPIPE_CHECK(cudaSetDevice(dv.gpu), what);
    OPTPIPE_CHECK(cudaEventRecord(start_ev_[i], dv.compute), what);
    OPTPIPE_CHECK(cuda::LaunchStamp(dv.compute, dv.stamps), what);
    ctx.stream = dv.compute;
    double occupied = 0;  // each occupy() lasts from the op's stamp: the longest one counts
    ctx.occupy = [this, &dv, &occupied, what](double seconds) -> Status {
      OPTPIPE_CHECK(cuda::LaunchSpinUntil(dv.compute, dv.stamps, Nanoseconds(seconds), abort_dev_),
                    what);
      occupied = std::max(occupied, seconds);
      return OkStatus();
    };
    const Status st = kernel.Run(ctx);
    if (!st.ok()) return st;
    OPTPIPE_CHECK(cudaSetDevice(dv.gpu), what);  // the kernel may have switched devices
    OPTPIPE_CHECK(cudaEventRecord(end_ev_[i], dv.compute), what);
    return Launch(i, enqueued, occupied, launched, dv.gpu, what, t);
  }

  Status RunCopy(int, int device, const Op& op, std::vector<Buffer>& dev, std::vector<Buffer>& host,
                 bool to_host, double seconds, Clock::time_point, const Launched& launched,
                 OpTimes* t) override {
    const int i = space_.Index(op);
    Device& dv = devs_[device];
    const std::string what = ToString(op) + " on device " + std::to_string(device);
    const Clock::time_point enqueued = Clock::now();
    OPTPIPE_CHECK(cudaSetDevice(dv.gpu), what);
    OPTPIPE_CHECK(cudaEventRecord(start_ev_[i], dv.copy), what);
    OPTPIPE_CHECK(cuda::LaunchStamp(dv.copy, dv.stamps + 1), what);
    const cudaMemcpyKind kind = to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    const Status copied =
        CopyPieces(dev, host, to_host, [&](void* dst, const void* src, std::size_t n) -> Status {
          OPTPIPE_CHECK(cudaMemcpyAsync(dst, src, n, kind, dv.copy), what);
          return OkStatus();
        });
    if (!copied.ok()) return copied;
    // The copy lasts at least the problem's offload time (the real copy may be shorter).
    OPTPIPE_CHECK(cuda::LaunchSpinUntil(dv.copy, dv.stamps + 1, Nanoseconds(seconds), abort_dev_),
                  what);
    OPTPIPE_CHECK(cudaEventRecord(end_ev_[i], dv.copy), what);
    return Launch(i, enqueued, seconds, launched, dv.gpu, what, t);
  }

 private:
  struct Device {
    int gpu = 0;
    cudaStream_t compute = nullptr, copy = nullptr;
    cudaStream_t p2p = nullptr;         // transfers to and from here (NCCL)
    std::vector<cudaStream_t> inbound;  // [source device] transfers from there (no NCCL)
    void* send = nullptr;
    void* recv = nullptr;
    // Start of the running op [compute lane, copy lane] and of the transfer
    // from each device [2 + source].
    unsigned long long* stamps = nullptr;
    char* host = nullptr;  // pinned arena for offloaded activations
    std::size_t host_size = 0, host_used = 0;
    ncclComm_t comm = nullptr;
  };

  // Op i is queued up to its end event. Where early_, its consumers hear of
  // it now and queue behind it; else once it has ended. It starts once the
  // GPU has run what it waits for, as expected_start_ has it (Await), or on
  // its enqueuing, and lasts `seconds`.
  Status Launch(int i, Clock::time_point enqueued, double seconds, const Launched& launched,
                int gpu, const std::string& what, OpTimes* t) {
    expected_end_[i] = After(std::max(enqueued, expected_start_[i]), seconds);
    if (!early_) {
      const Status st = Finish(gpu, i, expected_end_[i], what, t);
      return st.ok() ? launched(t->end) : st;
    }
    if (Status st = launched(std::chrono::duration<double>(expected_end_[i] - origin_).count());
        !st.ok()) {
      return st;
    }
    return Finish(gpu, i, expected_end_[i], what, t);
  }

  static std::vector<cudaStream_t> Streams(const Device& dv) {
    std::vector<cudaStream_t> out;
    for (cudaStream_t s : {dv.compute, dv.copy, dv.p2p}) {
      if (s != nullptr) out.push_back(s);
    }
    for (cudaStream_t s : dv.inbound) {
      if (s != nullptr) out.push_back(s);
    }
    return out;
  }

  // Waits (polling, so that a stopped run is noticed) for op i's end event and
  // converts its events to seconds since the origin. The host sleeps until
  // kSpinAhead before `due`, the op's expected end, and then spins on the event:
  // the lane's next op follows within microseconds, where waking from a sleep
  // takes tens of them. An op that overruns `due` by kSpinAfter is polled.
  Status Finish(int gpu, int i, Clock::time_point due, const std::string& what, OpTimes* t) {
    const Clock::time_point wake = due - kSpinAhead, poll = due + kSpinAfter;
    for (;;) {
      const cudaError_t e = cudaEventQuery(end_ev_[i]);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady)
        return CallStatus(e, "cudaEventQuery(end)", __FILE__, __LINE__, what);
      if (control_->stopped()) {
        *abort_ = 1;
        return Cancelled(what + " was stopped");
      }
      const Clock::time_point now = Clock::now();
      if (now < wake) {
        control_->SleepUntil(wake);  // early when the run stops
      } else if (now < poll) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
    float start_ms = 0, end_ms = 0;
    OPTPIPE_CHECK(cudaEventElapsedTime(&start_ms, ref_ev_[gpu], start_ev_[i]), what);
    OPTPIPE_CHECK(cudaEventElapsedTime(&end_ms, ref_ev_[gpu], end_ev_[i]), what);
    t->start = ref_s_[gpu] + 1e-3 * start_ms;
    t->end = ref_s_[gpu] + 1e-3 * end_ms;
    return OkStatus();
  }

  void AbortNccl() {
    for (Device& dv : devs_) {
      if (dv.comm != nullptr) ncclCommAbort(dv.comm);
      dv.comm = nullptr;
    }
    nccl_ = false;
  }

  // Best effort: errors while tearing down have nowhere to go.
  void Release() {
    if (abort_ != nullptr) *abort_ = 1;
    for (Device& dv : devs_) {
      if (cudaSetDevice(dv.gpu) != cudaSuccess) continue;
      for (cudaStream_t s : Streams(dv)) cudaStreamSynchronize(s);
    }
    for (Device& dv : devs_) {
      if (dv.comm != nullptr) ncclCommDestroy(dv.comm);
    }
    for (Device& dv : devs_) {
      if (cudaSetDevice(dv.gpu) != cudaSuccess) continue;
      for (cudaStream_t s : Streams(dv)) cudaStreamDestroy(s);
      if (dv.send) cudaFree(dv.send);
      if (dv.recv) cudaFree(dv.recv);
      if (dv.stamps) cudaFree(dv.stamps);
      if (dv.host) cudaFreeHost(dv.host);
    }
    for (std::vector<cudaEvent_t>* evs : {&start_ev_, &end_ev_, &arrive_ev_, &ref_ev_}) {
      for (cudaEvent_t ev : *evs) {
        if (ev != nullptr) cudaEventDestroy(ev);
      }
      evs->clear();
    }
    if (abort_ != nullptr) cudaFreeHost(const_cast<int*>(abort_));
    abort_ = nullptr;
    abort_dev_ = nullptr;
    devs_.clear();
    prepared_ = false;
  }

  CudaBackendOptions opt_;
  const Problem* p_ = nullptr;
  const RunControl* control_ = nullptr;
  OpSpace space_;
  int D_ = 0, gpus_ = 0, used_gpus_ = 0;
  bool nccl_ = false, prepared_ = false;
  bool early_ = false;  // consumers hear of an op once it is queued (Launch)
  std::vector<Device> devs_;
  std::vector<Edge> edges_;
  std::vector<cudaEvent_t> start_ev_, end_ev_, arrive_ev_;  // [op], [op], [edge]
  // [op] when the host expects it to start on the GPU (after what it waits
  // for) and to end: its lane's thread sleeps until shortly before the end.
  std::vector<Clock::time_point> expected_start_, expected_end_;
  std::vector<cudaEvent_t> ref_ev_;    // [gpu] the iteration's clock pin
  std::vector<double> ref_s_;          // [gpu] its host time since the origin
  volatile int* abort_ = nullptr;      // mapped pinned host memory
  volatile int* abort_dev_ = nullptr;  // the same, as the GPUs see it
  std::mutex mu_;                      // NCCL groups, host arenas, deferred_
  Status deferred_;
  Clock::time_point origin_;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions& opt) {
  if (opt.gpus < 0) return InvalidArgument("gpus: must be >= 0");
  if (!(opt.drain_timeout_s >= 0)) return InvalidArgument("drain_timeout_s: must be >= 0");
  constexpr const char* kNeeds =
      ": the cuda backend needs an NVIDIA GPU and its driver; "
      "--backend cpu runs without one";
  StatusOr<int> n = CudaDeviceCount();
  if (!n.ok()) return NotApplicable("no usable GPU (" + n.status().message() + ")" + kNeeds);
  if (*n == 0) return NotApplicable(std::string("no CUDA device") + kNeeds);
  return std::unique_ptr<Backend>(new CudaBackend(opt));
}

}  // namespace optpipe::runtime
