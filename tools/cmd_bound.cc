#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/format.h"
#include "core/schedule.h"
#include "core/simulator.h"
#include "core/text_format.h"
#include "core/version.h"
#include "tools/cli.h"

namespace optpipe::cli {

Command AddBound(CLI::App& app) {
  struct Args {
    std::string problem, schedule;
    bool json = false;
    double search_seconds = DeviceSearchOptions{}.time_limit_s;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("bound", "Print a provable lower bound on the problem's objective");
  sub->add_option("problem", args->problem, "optpipe-problem/1 JSON file")->required();
  sub->add_option("--schedule", args->schedule,
                  "A schedule of the problem (optpipe-schedule/1, its orders replayed by the "
                  "simulator): the searches aim at its objective instead of the list "
                  "scheduler's, and the bound reaching it proves it optimal")
      ->check(CLI::ExistingFile);
  sub->add_flag("--json", args->json,
                "Print {bound, device_bound, critical_path, memory_bound, device_search_bound, "
                "device_search_finished, order_search_bound, order_search_optimal, "
                "sat_search_bound, sat_search_optimal, binding_device, schedule_objective, "
                "schedule_gap} (order_search_*, sat_search_*: null where that search does not "
                "run; schedule_*: null without --schedule)");
  sub->add_option("--search-seconds", args->search_seconds,
                  "Wall-clock budget of the device search, and again of the order search or "
                  "the SAT probes (cut short, each still bounds, more weakly)")
      ->check(kNonNegative)
      ->capture_default_str();
  sub->footer(
      "The largest of: the busiest device's work plus the unavoidable fill before its first op\n"
      "and drain after its last (with a split backward, the drain its deferred W's cannot\n"
      "cover: under memory.limit only so many fit); one micro-batch's critical path; under\n"
      "memory.limit, the memory-time bound (activations must live from F to B within limit -\n"
      "static, or be offloaded at the price of host-link time); and under memory.limit, each\n"
      "device alone with its host link solved exactly by a branch-and-bound search (the rest of\n"
      "the pipeline as release times and tails), the devices that share a host link by the\n"
      "round trips each needs to end in time, and in the time left pairs of devices\n"
      "(consecutive stages, or a shared host link) searched together, aiming no higher than the\n"
      "list scheduler's objective (a pair may prove it at once). Without offload, also the\n"
      "order search: a branch and bound over every device's order below the list scheduler's\n"
      "objective, which may prove that schedule (or one it finds) optimal. Where every duration\n"
      "and comm time is a multiple of a grain (1, 0.5, 0.25, ..., 0.001), so is the least\n"
      "makespan: the bound is raised to the next multiple; with offload (or where the order\n"
      "search does not apply), also the SAT probes on that grid below the list scheduler's\n"
      "objective (makespan; memory amounts on a grain too). With --schedule S every search aims\n"
      "at S's objective instead, and a bound that reaches it proves S optimal (pairs of devices\n"
      "whose least makespan is S's prove it in one probe). See core/lower_bound.h,\n"
      "exact/device_search_bound.h, exact/order_search.h and exact/sat_search.h for the proofs.\n"
      "Example: optpipe bound tests/bench/problems/r48-6s.json --schedule s.json \\\n"
      "           --search-seconds 10");
  return {
      sub, [args] {
        StatusOr<Problem> p = LoadProblemFor(args->problem);
        if (!p.ok()) return Fail(p.status());
        // The schedule given, as orders: one that does not run is a checked thing invalid.
        std::optional<Schedule> given;
        if (!args->schedule.empty()) {
          StatusOr<TimedSchedule> t = LoadScheduleFor(args->schedule);
          if (!t.ok()) return Fail(t.status());
          StatusOr<Schedule> orders = OrdersOf(*p, *t);
          StatusOr<SimResult> sim = orders.ok() ? Simulate(*p, *orders) : orders.status();
          if (!sim.ok()) {
            std::cerr << "optpipe: --schedule: not a schedule of this problem: "
                      << sim.status().message() << "\n";
            return int{kInvalid};
          }
          given = std::move(*orders);
        }
        BoundOptions bo;
        bo.search_seconds = args->search_seconds;
        bo.schedule = given ? &*given : nullptr;
        bo.stop = InterruptFlag();
        bo.log = ProgressLog();
        StatusOr<BoundResult> proved = ProveBound(*p, bo);
        if (!proved.ok()) return Fail(proved.status());
        const BoundResult& r = *proved;
        const LowerBound& lb = r.core;
        const DeviceSearchBound& search = r.device_search;
        const std::optional<OrderSearchResult>& order = r.order;
        const std::optional<SatSearchResult>& sat = r.sat;
        const double bound = r.bound;
        const double gap = r.schedule_gap.value_or(0.0);
        const auto or_null = [](const auto& x, auto field) -> nlohmann::json {
          return x ? nlohmann::json((*x).*field) : nlohmann::json(nullptr);
        };
        if (args->json) {
          std::cout
              << nlohmann::json{{"format", "optpipe-bound/1"},
                                {"generator", Generator()},
                                {"bound", bound},
                                {"device_bound", lb.device_bound},
                                {"critical_path", lb.critical_path},
                                {"memory_bound", lb.memory_bound},
                                {"device_search_bound", search.value},
                                {"device_search_finished", search.finished},
                                {"order_search_bound", or_null(order, &OrderSearchResult::bound)},
                                {"order_search_optimal",
                                 or_null(order, &OrderSearchResult::optimal)},
                                {"sat_search_bound", or_null(sat, &SatSearchResult::bound)},
                                {"sat_search_optimal", or_null(sat, &SatSearchResult::optimal)},
                                {"binding_device", lb.binding_device},
                                {"schedule_objective", r.schedule_objective
                                                           ? nlohmann::json(*r.schedule_objective)
                                                           : nullptr},
                                {"schedule_gap", given ? nlohmann::json(gap) : nullptr}}
                     .dump(1)
              << "\n";
        } else {
          std::cout << "lower bound " << bound << " (device bound " << lb.device_bound
                    << " on device " << lb.binding_device << ", critical path " << lb.critical_path;
          if (p->memory_limit) {
            std::cout << ", memory bound " << lb.memory_bound << ", device search bound "
                      << search.value << (search.finished ? "" : " (search cut short)");
          }
          if (order) {
            std::cout << ", order search bound " << order->bound
                      << (order->optimal ? " (optimal: a schedule reaches it)" : "");
          }
          if (sat) {
            std::cout << ", SAT probes bound " << sat->bound
                      << (sat->optimal ? " (optimal: a schedule reaches it)" : "");
          }
          std::cout << ")\n";
          if (given) {
            std::cout << "schedule: objective " << *r.schedule_objective << ", "
                      << (gap <= 0 ? std::string("optimal")
                                   : "gap " + FormatNumber(100 * gap) + "% to the bound")
                      << "\n";
          }
        }
        return int{Interrupted() ? kInterrupted : kOk};
      }};
}

}  // namespace optpipe::cli
