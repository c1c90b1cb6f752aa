// The executor's memory ledger: every device's allocations and frees applied in
// the simulator's order (an allocation waits for its turn, an early free is held
// back until its turn), with the activation pieces each op allocates or frees.
#include <algorithm>

#include "core/text_format.h"
#include "runtime/executor_internal.h"

namespace optpipe::runtime::internal {

bool Iteration::AwaitMemoryTurn(int r, int i, int d, int ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  SetState(r, LaneKind::kWaitMemory, i, -1);
  lane_cv_[r].wait(lock, [&] { return stopped_ || next_[d] == ticket; });
  return !stopped_;
}

bool Iteration::AllocatePieces(int r, int i, int d, int ticket, std::vector<Buffer>& dev, int from,
                               int to) {
  const int stage = pl_.space.At(i).stage;
  const MemEvent& e = pl_.mem_seq[d][ticket];
  if (dev.empty()) dev.assign(pl_.piece_bytes[stage].size(), Buffer{});
  for (int k = from; k < to; ++k) {
    const std::size_t bytes = pl_.piece_bytes[stage][k];
    if (bytes == 0) continue;
    StatusOr<Buffer> b = be_.AllocateDevice(r, d, bytes);
    if (!b.ok()) {
      Fail(r, i, b.status());
      return false;
    }
    dev[k] = *b;
  }
  std::vector<Buffer> to_free;
  bool over = false;
  double now_mem = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    mem_[d] += e.units;
    mem_bytes_[d] += e.bytes;
    peak_[d] = std::max(peak_[d], mem_[d]);
    peak_bytes_[d] = std::max(peak_bytes_[d], mem_bytes_[d]);
    now_mem = mem_[d];
    if (p_.memory_limit) {
      const double limit = (*p_.memory_limit)[d];
      over = now_mem > limit + 1e-9 * std::max(1.0, limit);
    }
    ++next_[d];
    AdvanceLocked(d, &to_free);
    NotifyDevice(d);
  }
  FreeNow(r, d, to_free);
  if (over) {
    Fail(r, i,
         Internal("memory " + FormatNumber(now_mem, 3) + " exceeds memory.limit " +
                  FormatNumber((*p_.memory_limit)[d], 3)));
    return false;
  }
  return true;
}

void Iteration::ReleasePiecesLocked(int i, int d, int ticket, std::vector<Buffer>& dev, int from,
                                    int to, std::vector<Buffer>* to_free) {
  std::vector<Buffer>& out = free_bufs_[i];
  for (int k = from; k < to; ++k) {
    if (dev[k].data) out.push_back(dev[k]);
    dev[k] = Buffer{};
  }
  free_ready_[pl_.mem_offset[d] + ticket] = 1;
  AdvanceLocked(d, to_free);
}

// Applies the frees at the head of device d's memory order that have happened.
void Iteration::AdvanceLocked(int d, std::vector<Buffer>* to_free) {
  const std::vector<MemEvent>& seq = pl_.mem_seq[d];
  bool moved = false;
  while (next_[d] < static_cast<int>(seq.size())) {
    const MemEvent& e = seq[next_[d]];
    if (e.alloc || !free_ready_[pl_.mem_offset[d] + next_[d]]) break;
    mem_[d] -= e.units;
    mem_bytes_[d] -= e.bytes;
    for (Buffer& b : free_bufs_[e.op]) to_free->push_back(b);
    free_bufs_[e.op].clear();
    ++next_[d];
    moved = true;
  }
  if (moved) NotifyDevice(d);
}

void Iteration::NotifyDevice(int d) {
  lane_cv_[d].notify_all();
  lane_cv_[pl_.D + pl_.link_of_device[d]].notify_all();
}

void Iteration::FreeNow(int r, int d, std::vector<Buffer>& bufs) {
  for (Buffer& b : bufs) {
    if (b.data) be_.FreeDevice(r, d, b);
  }
  bufs.clear();
}

// The activation pieces an op allocates or frees: [from, to).
std::pair<int, int> Iteration::PieceRange(const Op& op) const {
  const int all = static_cast<int>(pl_.piece_bytes[op.stage].size());
  switch (op.type) {
    case OpType::kF:
      return {0, all};
    case OpType::kR:
    case OpType::kO:
      return {0, pl_.o_pieces[op.stage]};
    case OpType::kB:
      return {0, pl_.b_pieces[op.stage]};
    case OpType::kW:
      return {pl_.b_pieces[op.stage], all};
  }
  return {0, 0};
}

// Frees whatever an aborted iteration left allocated.
void Iteration::ReleaseAll() {
  for (std::size_t k = 0; k < dev_.size(); ++k) {
    const int d = p_.stage_device[k / pl_.M];
    for (Buffer& b : dev_[k]) {
      if (b.data) be_.FreeDevice(d, d, b);
    }
    for (Buffer& b : host_[k]) {
      if (b.data) be_.FreeHost(d, b);
    }
  }
  for (int i = 0; i < pl_.space.size(); ++i) {
    for (Buffer& b : free_bufs_[i]) {
      if (b.data) be_.FreeDevice(pl_.device_of[i], pl_.device_of[i], b);
    }
  }
}

}  // namespace optpipe::runtime::internal
