// The CUDA backend's entry points in a build without CUDA (OPTPIPE_HAVE_CUDA off).
#include "runtime/cuda_backend.h"

namespace optpipe::runtime {
namespace {
Status NotBuilt() {
  return NotApplicable(
      "the CUDA backend is not built (CMake found no CUDA toolkit and NCCL, "
      "or OPTPIPE_WITH_CUDA=OFF)");
}
}  // namespace

bool CudaBackendBuilt() { return false; }
StatusOr<int> CudaDeviceCount() { return NotBuilt(); }
std::string CudaVersions() { return "CUDA backend not built"; }
StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const CudaBackendOptions&) { return NotBuilt(); }
Status CudaCallStatus(int code, bool nccl, const char* call, const char* file, int line,
                      const std::string& op) {
  return Internal(std::string(call) + " failed: " + (nccl ? "NCCL" : "CUDA") + " error " +
                  std::to_string(code) + " at " + file + ":" + std::to_string(line) +
                  (op.empty() ? "" : " (" + op + ")"));
}

}  // namespace optpipe::runtime
