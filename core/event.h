// Event: what the simulator and the list scheduler advance time by. Events
// run in order of time, then kind (kOpEnds before kLaneLooks at one instant,
// so that frees count before allocations), then id (op index or lane). The
// three are packed in two integers whose order is that order: times are
// never negative, and the bits of non-negative doubles order like the
// doubles; one integer comparison decides almost every pair, which keeps the
// event heap, the hottest loop of both, cheap.
#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace optpipe {

class Event {
 public:
  enum Kind : int { kOpEnds = 0, kLaneLooks = 1 };  // an op ends; a lane looks for work

  Event(double t, Kind kind, int id)
      : time_bits_(std::bit_cast<std::uint64_t>(t + 0.0)),  // + 0.0: no -0.0
        kind_id_(static_cast<std::uint64_t>(kind) << 32 | static_cast<std::uint32_t>(id)) {}
  double t() const { return std::bit_cast<double>(time_bits_); }
  Kind kind() const { return static_cast<Kind>(kind_id_ >> 32); }
  int id() const { return static_cast<int>(static_cast<std::uint32_t>(kind_id_)); }
  bool operator>(const Event& o) const {
    return time_bits_ != o.time_bits_ ? time_bits_ > o.time_bits_ : kind_id_ > o.kind_id_;
  }

 private:
  std::uint64_t time_bits_, kind_id_;
};

// Earliest first.
using EventQueue = std::priority_queue<Event, std::vector<Event>, std::greater<>>;

}  // namespace optpipe
