// The PyTorch CSV importer and the text form of orders: what they accept
// simulates, and a valid one exports back.
#include "core/pytorch_csv.h"
#include "core/simulator.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optpipe;
  const Problem& p = fuzz::FixedProblem();
  const std::string text = fuzz::Text(data, size);
  for (StatusOr<Schedule> s : {FromPytorchCsv(p, text), ParseScheduleText(p, text)}) {
    if (!s.ok()) continue;
    StatusOr<SimResult> r = Simulate(p, *s);
    ToText(p, *s);
    if (r.ok()) ToPytorchCsv(p, *s);  // a Status where it offloads
  }
  return 0;
}
