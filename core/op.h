// Ops: the closed vocabulary of a pipeline schedule.
//
// Every op is (type, stage, micro-batch). F, B and W run on a device's compute
// lane; O (offload to host) and R (reload) run on a host link's copy lane. The
// text form follows torch.distributed.pipelining: `2F0` is stage 2, forward,
// micro-batch 0.
//
//   Op op{OpType::kB, 3, 7};
//   std::string s = ToString(op);           // "3B7"
//   StatusOr<Op> back = ParseOp("3B7");     // == op
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace optpipe {

enum class OpType : std::uint8_t { kF = 0, kB = 1, kW = 2, kO = 3, kR = 4 };
inline constexpr int kNumOpTypes = 5;

struct Op {
  OpType type = OpType::kF;
  int stage = 0;
  int microbatch = 0;
  friend bool operator==(const Op&, const Op&) = default;
};

inline bool IsCompute(OpType t) { return t == OpType::kF || t == OpType::kB || t == OpType::kW; }
inline bool IsCopy(OpType t) { return !IsCompute(t); }

char TypeLetter(OpType t);
// The type whose letter is `letter` (F, B, W, O or R); none for any other.
std::optional<OpType> TypeOfLetter(char letter);
std::string ToString(const Op& op);
// Parses `{stage}{F|B|W|O|R}{microbatch}`; surrounding whitespace is ignored.
StatusOr<Op> ParseOp(std::string_view text);

// Dense numbering of every op slot of a problem with S stages and M micro-batches:
// index = (type * S + stage) * M + microbatch. Slots that a problem does not use
// (W when the backward is fused, O/R of activations kept on the device) stay empty.
class OpSpace {
 public:
  OpSpace() = default;
  OpSpace(int stages, int microbatches) : stages_(stages), microbatches_(microbatches) {}

  int stages() const { return stages_; }
  int microbatches() const { return microbatches_; }
  int size() const { return kNumOpTypes * stages_ * microbatches_; }
  int Index(const Op& op) const {
    return (static_cast<int>(op.type) * stages_ + op.stage) * microbatches_ + op.microbatch;
  }
  int Index(OpType t, int stage, int mb) const { return Index(Op{t, stage, mb}); }
  Op At(int index) const {
    return Op{static_cast<OpType>(index / (stages_ * microbatches_)),
              (index / microbatches_) % stages_, index % microbatches_};
  }
  bool Contains(const Op& op) const {
    return op.stage >= 0 && op.stage < stages_ && op.microbatch >= 0 &&
           op.microbatch < microbatches_;
  }

 private:
  int stages_ = 0;
  int microbatches_ = 0;
};

}  // namespace optpipe
