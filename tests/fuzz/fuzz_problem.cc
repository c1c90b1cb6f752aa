// The problem reader: any text gives a problem or a Status, and a problem
// read back from what it writes is the same problem.
#include "core/problem.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace optpipe;
  StatusOr<Problem> p = ParseProblem(fuzz::Text(data, size), fuzz::Limit());
  if (!p.ok()) return 0;
  if (!Validate(*p).ok()) fuzz::Broken("a problem the reader accepted fails Validate");
  StatusOr<Problem> again = ParseProblem(ToJson(*p), fuzz::Limit());
  if (!again.ok()) fuzz::Broken("the reader refuses what the writer wrote");
  if (!(*again == *p)) fuzz::Broken("a written problem reads back different");
  TimeGrain(*p);
  ForwardToBackward(*p);
  return 0;
}
