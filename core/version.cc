#include "core/version.h"

namespace optpipe {

const char* Version() { return OPTPIPE_VERSION; }
const char* Generator() { return "optpipe " OPTPIPE_VERSION; }

}  // namespace optpipe
