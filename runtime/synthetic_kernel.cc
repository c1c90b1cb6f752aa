#include "runtime/synthetic_kernel.h"

#include <cstring>

namespace optpipe::runtime {

Status SyntheticKernel::F(int stage, int microbatch, KernelContext& ctx) {
  return Run(Op{OpType::kF, stage, microbatch}, ctx);
}
Status SyntheticKernel::B(int stage, int microbatch, KernelContext& ctx) {
  return Run(Op{OpType::kB, stage, microbatch}, ctx);
}
Status SyntheticKernel::W(int stage, int microbatch, KernelContext& ctx) {
  return Run(Op{OpType::kW, stage, microbatch}, ctx);
}

Status SyntheticKernel::Run(const Op& op, KernelContext& ctx) {
  const double seconds = Duration(p_, op) * time_scale_;
  if (faults_.hang && *faults_.hang == op) {
    ctx.control->SleepUntil(Clock::time_point::max());
    return Cancelled("kernel " + ToString(op) + " was stopped while hanging");
  }
  if (faults_.fail && *faults_.fail == op) {
    if (Status st = ctx.occupy(seconds / 2); !st.ok()) return st;
    return Internal("injected failure in the " + std::string(1, TypeLetter(op.type)) +
                    " kernel of stage " + std::to_string(op.stage));
  }
  if (Status st = ctx.occupy(seconds); !st.ok()) return st;
  return Checksum(op, ctx);
}

namespace {
std::int64_t ForwardAdds(int stage) { return stage + 1; }
std::int64_t BackwardAdds(int stage) { return 1000 * (stage + 1); }
std::int64_t Read(const Buffer& b) {
  std::int64_t v = 0;
  std::memcpy(&v, b.data, sizeof v);
  return v;
}
void Write(Buffer& b, std::int64_t v) { std::memcpy(b.data, &v, sizeof v); }
}  // namespace

// F sends on what it received (the first stage: the micro-batch) plus its
// stage's constant; the last stage's F checks the sum of every stage's, and
// its B starts the backward chain from that sum; B sends on what it received
// plus its constant, and the first stage's B checks the whole chain. A value
// that crossed to the wrong op, or never arrived, fails the op.
Status SyntheticKernel::Checksum(const Op& op, KernelContext& ctx) {
  const int S = p_.stages(), s = op.stage, m = op.microbatch;
  const bool has_in = ctx.input.data && ctx.input.bytes >= 8;
  const bool has_out = ctx.output.data && ctx.output.bytes >= 8;
  if (op.type == OpType::kW || (!has_in && !has_out)) return OkStatus();
  std::int64_t forward = m;
  for (int k = 0; k < S; ++k) forward += ForwardAdds(k);
  std::int64_t value = 0, expected = 0;
  if (op.type == OpType::kF) {
    value = (s == 0 ? m : Read(ctx.input)) + ForwardAdds(s);
    expected = forward;
    if (s + 1 < S) Write(ctx.output, value);
  } else {
    value = (s == S - 1 ? forward : Read(ctx.input)) + BackwardAdds(s);
    expected = forward;
    for (int k = 0; k < S; ++k) expected += BackwardAdds(k);
    if (s > 0) Write(ctx.output, value);
  }
  const bool checks = (op.type == OpType::kF && s == S - 1) || (op.type == OpType::kB && s == 0);
  if (!checks) return OkStatus();
  if (value != expected) {
    return Internal("payload checksum of " + ToString(op) + ": " + std::to_string(value) +
                    ", expected " + std::to_string(expected));
  }
  (op.type == OpType::kF ? forward_checked_ : backward_checked_).fetch_add(1);
  return OkStatus();
}

}  // namespace optpipe::runtime
