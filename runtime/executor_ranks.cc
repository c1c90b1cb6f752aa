// One process per device (runtime/peers.h): after an iteration every rank
// sends rank 0 the times of its ops and its device's peaks, and rank 0 puts
// the whole iteration together, lane orders from the measured starts.
#include <algorithm>
#include <numeric>

#include "runtime/executor_internal.h"

namespace optpipe::runtime::internal {

Status Iteration::GatherRanks() {
  const int n = pl_.space.size();
  // Per op: ran, start, end (this rank's ops); then the device's peak units and bytes.
  std::vector<double> mine(3 * static_cast<std::size_t>(n) + 2, 0.0);
  for (int i = 0; i < n; ++i) {
    if (!ran_[i]) continue;
    mine[3 * i] = 1;
    mine[3 * i + 1] = times_[i].start;
    mine[3 * i + 2] = times_[i].end;
  }
  mine[3 * n] = peak_[pl_.me];
  mine[3 * n + 1] = static_cast<double>(peak_bytes_[pl_.me]);
  std::vector<double> all;
  if (Status st = o_.peers->Gather(mine, &all); !st.ok()) return st;
  if (o_.peers->rank() != 0) return OkStatus();
  const std::size_t stride = mine.size();
  for (int i = 0; i < n; ++i) {
    if (pl_.device_of[i] < 0) continue;  // not in the schedule (an O/R never placed)
    const double* from = &all[stride * pl_.device_of[i]];
    if (from[3 * i] == 0) continue;
    ran_[i] = 1;
    times_[i] = OpTimes{from[3 * i + 1], from[3 * i + 2]};
  }
  for (int d = 0; d < pl_.D; ++d) {
    peak_[d] = all[stride * d + 3 * n];
    peak_bytes_[d] = static_cast<std::int64_t>(all[stride * d + 3 * n + 1]);
  }
  for (int r = 0; r < pl_.lanes; ++r) {  // each lane's ops in the order they started
    std::vector<int> order = pl_.all_lane_ops[r];
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return times_[a].start < times_[b].start; });
    lane_order_[r].clear();
    for (int i : order) lane_order_[r].push_back(pl_.space.At(i));
  }
  return OkStatus();
}

}  // namespace optpipe::runtime::internal
