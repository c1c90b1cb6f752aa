// Device code of the CUDA backend (runtime/cuda_spin.cu): one-thread kernels
// that stamp %globaltimer and spin on it. Only runtime/cuda_backend.cc includes this.
#pragma once

#include <cuda_runtime_api.h>

namespace optpipe::runtime::cuda {

// Writes the GPU's %globaltimer (ns) to *stamp when the stream reaches it.
cudaError_t LaunchStamp(cudaStream_t stream, unsigned long long* stamp);
// Spins until %globaltimer >= *stamp + ns, or until *abort != 0.
cudaError_t LaunchSpinUntil(cudaStream_t stream, const unsigned long long* stamp,
                            unsigned long long ns, const volatile int* abort);

}  // namespace optpipe::runtime::cuda
