// Cooperative cancellation of a run (runtime/backend.h): RunControl and the
// Cancelled status that kernels and backends return once a run stops.
#include <mutex>
#include <string>

#include "runtime/backend.h"

namespace optpipe::runtime {

bool RunControl::SleepUntil(Clock::time_point t) const {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_until(lock, t, [this] { return stopped(); });
}

void RunControl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

Status Cancelled(const std::string& what) { return optpipe::Cancelled("cancelled: " + what); }
bool IsCancelled(const Status& st) { return st.code() == StatusCode::kCancelled; }

}  // namespace optpipe::runtime
