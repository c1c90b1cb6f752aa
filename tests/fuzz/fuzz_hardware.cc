// The planner's hardware reader.
#include "core/planner/config.h"
#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  optpipe::planner::ParseHardware(optpipe::fuzz::Text(data, size));
  return 0;
}
