// The pieces an O or R op moves (runtime/backend.h, Backend::RunCopy): each
// device piece paired with its host copy, shared by the CPU and CUDA backends.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/status.h"
#include "runtime/backend.h"

namespace optpipe::runtime {

// Calls copy(dst, src, bytes) for every piece that both `dev` and `host` hold
// (device to host when `to_host`, host to device otherwise), over the bytes both
// sides have; returns the first failure.
template <typename CopyFn>
Status CopyPieces(const std::vector<Buffer>& dev, const std::vector<Buffer>& host, bool to_host,
                  CopyFn&& copy) {
  for (std::size_t k = 0; k < dev.size() && k < host.size(); ++k) {
    if (dev[k].data == nullptr || host[k].data == nullptr) continue;
    const std::size_t n = std::min(dev[k].bytes, host[k].bytes);
    Status st = to_host ? copy(host[k].data, dev[k].data, n) : copy(dev[k].data, host[k].data, n);
    if (!st.ok()) return st;
  }
  return OkStatus();
}

}  // namespace optpipe::runtime
