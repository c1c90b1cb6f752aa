#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/format.h"
#include "core/lower_bound.h"
#include "tools/cli.h"

namespace optpipe::cli {

Command AddBound(CLI::App& app) {
  struct Args {
    std::string problem;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("bound", "Print a provable lower bound on the problem's objective");
  sub->add_option("problem", args->problem, "optpipe-problem/1 JSON file")->required();
  sub->add_flag("--json", args->json,
                "Print {bound, device_bound, critical_path, memory_bound, binding_device}");
  sub->footer(
      "The largest of: the busiest device's work plus the unavoidable fill before its first op\n"
      "and drain after its last; one micro-batch's critical path; under memory.limit, the\n"
      "memory-time bound (activations must live from F to B within limit - static, or be\n"
      "offloaded at the price of host-link time). See core/lower_bound.h for the proof.");
  return {sub, [args] {
            StatusOr<Problem> p = LoadProblem(args->problem);
            if (!p.ok()) return Fail(p.status());
            const LowerBound lb = ComputeLowerBound(*p);
            if (args->json) {
              std::cout << nlohmann::json{{"bound", lb.value},
                                          {"device_bound", lb.device_bound},
                                          {"critical_path", lb.critical_path},
                                          {"memory_bound", lb.memory_bound},
                                          {"binding_device", lb.binding_device}}
                               .dump(1)
                        << "\n";
            } else {
              std::cout << "lower bound " << lb.value << " (device bound " << lb.device_bound
                        << " on device " << lb.binding_device << ", critical path "
                        << lb.critical_path;
              if (p->memory_limit) std::cout << ", memory bound " << lb.memory_bound;
              std::cout << ")\n";
            }
            return int{kOk};
          }};
}

}  // namespace optpipe::cli
