#include "core/pytorch_csv.h"

#include <cctype>
#include <charconv>
#include <vector>

namespace optpipe {
namespace {

struct Cell {
  std::string text;
  int column = 0;  // 1-based
};

// One line split like Python's csv.reader (excel dialect): commas separate
// cells, a cell may be double-quoted with "" for a quote inside.
StatusOr<std::vector<Cell>> SplitLine(const std::string& line, int row) {
  std::vector<Cell> cells;
  std::string cur;
  bool quoted = false, was_quoted = false;
  for (std::size_t i = 0; i <= line.size(); ++i) {
    const char c = i < line.size() ? line[i] : ',';
    if (quoted) {
      if (i == line.size()) {
        return InvalidArgument("row " + std::to_string(row) + ", column " +
                               std::to_string(cells.size() + 1) + ": unterminated quote");
      }
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == ',') {
      cells.push_back({cur, static_cast<int>(cells.size()) + 1});
      cur.clear();
      was_quoted = false;
    } else if (c == '"' && !was_quoted && cur.find_first_not_of(" \t") == std::string::npos) {
      quoted = was_quoted = true;
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (line.empty()) cells.clear();  // csv.reader: a blank line is a row without cells
  return cells;
}

std::string Trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

StatusOr<std::string> ToPytorchCsv(const Problem& p, const Schedule& s) {
  std::size_t offloads = 0;
  for (const std::vector<Op>& lane : s.copy) {
    for (const Op& op : lane) offloads += op.type == OpType::kO ? 1 : 0;
  }
  if (offloads > 0) {
    return NotApplicable(
        "the schedule offloads " + std::to_string(offloads) +
        " activations, and PyTorch's pipelining CSV has no offload or reload action: the " +
        std::to_string(2 * offloads) +
        " O/R ops would be lost and the schedule would not fit its memory; for a CSV, schedule "
        "the problem without offload (no \"offload_time\") or with a method that keeps every "
        "activation (1f1b, zb-h1, ...)");
  }
  std::string out;
  for (int d = 0; d < p.devices; ++d) {
    bool first = true;
    if (d < static_cast<int>(s.compute.size())) {
      for (const Op& op : s.compute[d]) {
        char letter;
        switch (op.type) {
          case OpType::kF:
            letter = 'F';
            break;
          case OpType::kB:
            letter = p.split_backward ? 'I' : 'B';
            break;
          case OpType::kW:
            letter = 'W';
            break;
          default:
            continue;  // O/R: no PyTorch action
        }
        if (!first) out += ',';
        first = false;
        out += std::to_string(op.stage) + letter + std::to_string(op.microbatch);
      }
    }
    out += '\n';
  }
  return out;
}

StatusOr<Schedule> FromPytorchCsv(const Problem& p, const std::string& text) {
  // Rows: every line, the terminator of the last one excepted ("\r\n" too).
  std::vector<std::string> lines;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    pos = nl + 1;
  }
  if (static_cast<int>(lines.size()) != p.devices) {
    return InvalidArgument("expected " + std::to_string(p.devices) +
                           " rows, one per rank (device), got " + std::to_string(lines.size()));
  }

  const int S = p.stages(), M = p.microbatches;
  const OpSpace space = p.op_space();
  // (row, column) where each op was seen; row 0: not yet.
  std::vector<std::pair<int, int>> seen(space.size(), {0, 0});
  Schedule sched = Schedule::Empty(p, "pytorch-csv");
  for (int r = 0; r < p.devices; ++r) {
    const int row = r + 1;
    StatusOr<std::vector<Cell>> cells = SplitLine(lines[r], row);
    if (!cells.ok()) return cells.status();
    for (const Cell& cell : *cells) {
      const std::string a = Trim(cell.text);
      if (a.empty()) continue;  // an idle step
      const std::string where = "row " + std::to_string(row) + " (rank " + std::to_string(r) +
                                "), column " + std::to_string(cell.column) + ": '" + a + "'";
      // {stage}{action}{microbatch}
      std::size_t i = 0;
      while (i < a.size() && std::isdigit(static_cast<unsigned char>(a[i]))) ++i;
      std::size_t j = i;
      while (j < a.size() && (std::isupper(static_cast<unsigned char>(a[j])) || a[j] == '_')) ++j;
      std::size_t k = j;
      while (k < a.size() && std::isdigit(static_cast<unsigned char>(a[k]))) ++k;
      const std::string action = a.substr(i, j - i);
      if (i == 0 || j == i || k != a.size()) {
        return InvalidArgument(where + ": expected {stage}{F|I|B|W}{microbatch}, e.g. 2F0");
      }
      if (action.size() != 1 || std::string("FIBW").find(action) == std::string::npos) {
        return InvalidArgument(where + ": unknown action '" + action +
                               "'; a compute_only CSV holds F, I, B and W only");
      }
      if (k == j) return InvalidArgument(where + ": the action has no micro-batch");
      int stage = 0, mb = 0;
      const auto [e1, ec1] = std::from_chars(a.data(), a.data() + i, stage);
      const auto [e2, ec2] = std::from_chars(a.data() + j, a.data() + k, mb);
      if (ec1 != std::errc() || stage >= S) {
        return InvalidArgument(where + ": stage out of range (the problem has " +
                               std::to_string(S) + " stages)");
      }
      if (ec2 != std::errc() || mb >= M) {
        return InvalidArgument(where + ": micro-batch out of range (the problem has " +
                               std::to_string(M) + ")");
      }
      if (DeviceOf(p, Op{OpType::kF, stage, 0}) != r) {
        return InvalidArgument(where + ": stage " + std::to_string(stage) + " runs on device " +
                               std::to_string(DeviceOf(p, Op{OpType::kF, stage, 0})) +
                               " in this problem, not on rank " + std::to_string(r));
      }
      const char c = action[0];
      if (c == 'I' && !p.split_backward) {
        return InvalidArgument(where +
                               ": I (input-gradient backward) needs a split backward, but the "
                               "problem fuses it (split_backward: false); use B");
      }
      if (c == 'W' && !p.split_backward) {
        return InvalidArgument(where +
                               ": W (weight-gradient backward) needs a split backward, but the "
                               "problem fuses it (split_backward: false); use B");
      }
      std::vector<Op> ops;
      if (c == 'F') ops = {{OpType::kF, stage, mb}};
      if (c == 'I') ops = {{OpType::kB, stage, mb}};
      if (c == 'W') ops = {{OpType::kW, stage, mb}};
      if (c == 'B') {
        ops = {{OpType::kB, stage, mb}};
        if (p.split_backward) ops.push_back({OpType::kW, stage, mb});
      }
      // PyTorch's order rules, per stage and micro-batch.
      if (c != 'F' && seen[space.Index(OpType::kF, stage, mb)].first == 0) {
        return InvalidArgument(where + ": backward before the forward " + std::to_string(stage) +
                               "F" + std::to_string(mb));
      }
      if (c == 'W' && seen[space.Index(OpType::kB, stage, mb)].first == 0) {
        return InvalidArgument(where + ": W before the input-gradient backward " +
                               std::to_string(stage) + "I" + std::to_string(mb));
      }
      for (const Op& op : ops) {
        std::pair<int, int>& at = seen[space.Index(op)];
        if (at.first != 0) {
          return InvalidArgument(where + ": repeats " + ToString(op) + " of row " +
                                 std::to_string(at.first) + ", column " +
                                 std::to_string(at.second));
        }
        at = {row, cell.column};
        sched.compute[r].push_back(op);
      }
    }
  }

  // Every op once: M forwards and M backwards (and M W when split) per stage.
  for (int st = 0; st < S; ++st) {
    for (OpType type : {OpType::kF, OpType::kB, OpType::kW}) {
      if (type == OpType::kW && !p.split_backward) continue;
      for (int mb = 0; mb < M; ++mb) {
        if (seen[space.Index(type, st, mb)].first != 0) continue;
        const char letter = type == OpType::kF   ? 'F'
                            : type == OpType::kW ? 'W'
                            : p.split_backward   ? 'I'
                                                 : 'B';
        const int dev = DeviceOf(p, Op{type, st, mb});
        return InvalidArgument("row " + std::to_string(dev + 1) + " (rank " + std::to_string(dev) +
                               "): " + std::to_string(st) + letter + std::to_string(mb) +
                               " is missing (every stage needs " + std::to_string(M) +
                               " of each of " + (p.split_backward ? "F, I, W" : "F, B") + ")");
      }
    }
  }
  return sched;
}

}  // namespace optpipe
