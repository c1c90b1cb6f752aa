// JSON text to nlohmann::json for optpipe's readers, with every failure as a
// Status: a syntax error with its place, and a number that no double holds
// ("ops[3].start: '1e400' is beyond the range of a double") with the field's path.
// Internal to the readers (it includes nlohmann, which core keeps private).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace optpipe {

StatusOr<nlohmann::json> ParseJsonText(const std::string& text);

}  // namespace optpipe
