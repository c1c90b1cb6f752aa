#include "core/op.h"

#include <cctype>
#include <charconv>

namespace optpipe {

char TypeLetter(OpType t) {
  static constexpr char kLetters[] = {'F', 'B', 'W', 'O', 'R'};
  return kLetters[static_cast<int>(t)];
}

std::optional<OpType> TypeOfLetter(char letter) {
  for (const OpType t : {OpType::kF, OpType::kB, OpType::kW, OpType::kO, OpType::kR}) {
    if (TypeLetter(t) == letter) return t;
  }
  return std::nullopt;
}

std::string ToString(const Op& op) {
  return std::to_string(op.stage) + TypeLetter(op.type) + std::to_string(op.microbatch);
}

StatusOr<Op> ParseOp(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  const auto bad = [&] {
    return InvalidArgument("op '" + std::string(text) +
                           "': expected {stage}{F|B|W|O|R}{microbatch}, e.g. 2F0");
  };
  Op op;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [p, ec] = std::from_chars(first, last, op.stage);
  if (ec != std::errc() || p == last) return bad();
  const std::optional<OpType> type = TypeOfLetter(*p);
  if (!type) return bad();
  op.type = *type;
  ++p;
  auto [q, ec2] = std::from_chars(p, last, op.microbatch);
  if (ec2 != std::errc() || q != last || op.stage < 0 || op.microbatch < 0) return bad();
  return op;
}

}  // namespace optpipe
