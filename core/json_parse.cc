#include "core/json_parse.h"

#include <vector>

namespace optpipe {
namespace {

using json = nlohmann::json;

// The path of the value being parsed, kept from the parser's events:
// "memory.limit[2]". Only run again after a failure, so reading stays fast.
class PathTracker {
 public:
  bool Event(int depth, json::parse_event_t event, const json& parsed) {
    using E = json::parse_event_t;
    frames_.resize(static_cast<std::size_t>(depth) + 1);
    switch (event) {
      case E::key:
        frames_[depth].key = parsed.get<std::string>();
        break;
      case E::object_start:
      case E::array_start:
        Advance(depth);
        frames_.resize(static_cast<std::size_t>(depth) + 2);
        frames_[depth + 1] = Frame{event == E::array_start, -1, {}};
        break;
      case E::value:
        Advance(depth);
        break;
      default:
        break;
    }
    return true;
  }

  // The value that comes next: the key just read, or the next index.
  std::string Next() const {
    std::string path;
    for (std::size_t d = 1; d < frames_.size(); ++d) {
      const Frame& f = frames_[d];
      if (f.array) {
        path += '[';
        path += std::to_string(f.index + (d + 1 == frames_.size() ? 1 : 0));
        path += ']';
      } else if (!f.key.empty()) {
        if (!path.empty()) path += '.';
        path += f.key;
      }
    }
    return path;
  }

 private:
  struct Frame {
    bool array = false;
    long index = -1;
    std::string key;
  };
  // A value (or a container's start) at `depth` counts as the next element
  // of the array holding it.
  void Advance(int depth) {
    if (depth >= 0 && static_cast<std::size_t>(depth) < frames_.size() && frames_[depth].array)
      ++frames_[depth].index;
  }
  std::vector<Frame> frames_{Frame{}};
};

std::string FieldOfFailure(const std::string& text) {
  PathTracker tracker;
  try {
    const json discarded =
        json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
          return tracker.Event(depth, event, parsed);
        });
  } catch (const json::exception&) {
  }
  return tracker.Next();
}

}  // namespace

StatusOr<json> ParseJsonText(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    return InvalidArgument(std::string("not valid JSON: ") + e.what());
  } catch (const json::out_of_range& e) {
    // nlohmann: "[json.exception.out_of_range.406] number overflow parsing '1e400'".
    const std::string what = e.what();
    const std::size_t quote = what.find('\'');
    const std::string number = quote == std::string::npos ? "a number" : what.substr(quote);
    const std::string field = FieldOfFailure(text);
    return InvalidArgument((field.empty() ? "" : field + ": ") + number +
                           " is beyond the range of a double (about 1.8e308)");
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("not valid JSON: ") + e.what());
  }
}

}  // namespace optpipe
