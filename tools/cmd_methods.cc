#include <iostream>
#include <memory>

#include "core/format.h"
#include "tools/cli.h"

namespace optpipe::cli {

Command AddMethods(CLI::App& app) {
  auto problem = std::make_shared<std::string>();
  CLI::App* sub =
      app.add_subcommand("methods", "List the scheduling methods (and whether they apply)");
  sub->add_option("problem", *problem, "Optional problem: say which methods apply to it");
  return {sub, [problem] {
            std::optional<Problem> p;
            if (!problem->empty()) {
              StatusOr<Problem> loaded = LoadProblemFor(*problem);
              if (!loaded.ok()) return Fail(loaded.status());
              p = *loaded;
            }
            for (const MethodLine& m : ListMethods(p ? &*p : nullptr)) {
              std::cout << m.name << std::string(m.name.size() < 11 ? 11 - m.name.size() : 1, ' ')
                        << m.summary;
              if (p) {
                std::cout << (m.applies.ok() ? "  [applies]"
                                             : "  [not applicable: " + m.applies.message() + "]");
              }
              std::cout << "\n";
            }
            return int{kOk};
          }};
}

}  // namespace optpipe::cli
