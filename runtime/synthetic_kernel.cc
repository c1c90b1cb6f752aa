#include "runtime/synthetic_kernel.h"

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
  return ctx.occupy(seconds);
}

}  // namespace optpipe::runtime
