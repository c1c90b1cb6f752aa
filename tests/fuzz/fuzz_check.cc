// Simulate and CheckSchedule on a fuzzed problem with a fuzzed schedule:
// the input is a problem, a line "%%", and a timed schedule. Whatever the
// simulator times must pass the checker, its independent oracle.
#include <string_view>

#include "core/checker.h"
#include "core/simulator.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optpipe;
  const std::string text = fuzz::Text(data, size);
  const std::size_t cut = text.find("\n%%\n");
  if (cut == std::string::npos) return 0;
  StatusOr<Problem> p = ParseProblem(text.substr(0, cut), fuzz::Limit());
  if (!p.ok()) return 0;
  StatusOr<TimedSchedule> t = ParseTimedSchedule(text.substr(cut + 4));
  if (!t.ok()) return 0;
  CheckSchedule(*p, *t);
  StatusOr<Schedule> s = OrdersOf(*p, *t);
  if (!s.ok()) return 0;
  StatusOr<SimResult> r = Simulate(*p, *s);
  if (!r.ok()) return 0;
  if (!CheckSchedule(*p, ToTimed(*p, *s, *r)).valid())
    fuzz::Broken("a schedule the simulator timed fails the checker");
  return 0;
}
