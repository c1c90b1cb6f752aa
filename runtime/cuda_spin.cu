#include "runtime/cuda_spin.h"

namespace optpipe::runtime::cuda {
namespace {

__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void Stamp(unsigned long long* stamp) { *stamp = GlobalTimer(); }

// Polls the abort flag (host memory over PCIe/NVLink) every 256 reads of the timer.
__global__ void SpinUntil(const unsigned long long* stamp, unsigned long long ns,
                          const volatile int* abort) {
  const unsigned long long deadline = *stamp + ns;
  for (unsigned k = 0; GlobalTimer() < deadline; ++k) {
    if ((k & 255u) == 0 && abort != nullptr && *abort != 0) return;
  }
}

}  // namespace

cudaError_t LaunchStamp(cudaStream_t stream, unsigned long long* stamp) {
  Stamp<<<1, 1, 0, stream>>>(stamp);
  return cudaGetLastError();
}

cudaError_t LaunchSpinUntil(cudaStream_t stream, const unsigned long long* stamp,
                            unsigned long long ns, const volatile int* abort) {
  SpinUntil<<<1, 1, 0, stream>>>(stamp, ns, abort);
  return cudaGetLastError();
}

}  // namespace optpipe::runtime::cuda
