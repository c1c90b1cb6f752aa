#include "core/timeline_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/text_format.h"

namespace optpipe {
namespace {

// Column [0, cols) of x columns from the left, clamped before the cast: a
// time far outside the shown span (or NaN) lands on an edge.
int ColumnOf(double x, int cols) {
  if (!(x >= 0)) return 0;
  return x >= cols - 1 ? cols - 1 : static_cast<int>(std::floor(x));
}

}  // namespace

std::string TextTimeline(const Problem& p, const TimedSchedule& t, int width) {
  const OpSpace space = p.op_space();
  const int D = p.devices;
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  bool any_copy = false;
  for (const TimedOp& o : t.ops) {
    if (!space.Contains(o.op)) continue;
    t0 = std::min(t0, o.start);
    t1 = std::max(t1, o.end);
    any_copy = any_copy || IsCopy(o.op.type);
  }
  if (t0 > t1) t0 = 0, t1 = 1;
  const double span = std::max(t1 - t0, 1e-9);

  const int label_w = 1 + static_cast<int>(std::to_string(D - 1).size());
  const int prefix = label_w + 2;  // "d0 |"
  const int cols = std::max(8, width - prefix - 1);
  const double slice = span / cols;

  // lanes[2d] compute, lanes[2d + 1] copy.
  std::vector<std::string> lanes(2 * D, std::string(cols, '.'));
  for (const TimedOp& o : t.ops) {
    if (!space.Contains(o.op)) continue;
    const int lane = 2 * DeviceOf(p, o.op) + (IsCopy(o.op.type) ? 1 : 0);
    char c = TypeLetter(o.op.type);
    if (o.op.microbatch % 2 == 1)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const int first = std::max(0, ColumnOf(std::floor((o.start - t0) / slice), cols) - 1);
    const int last = ColumnOf(std::ceil((o.end - t0) / slice), cols);
    bool shown = false;
    for (int k = first; k <= last; ++k) {
      const double mid = t0 + (k + 0.5) * slice;
      if (mid >= o.start && mid < o.end) {
        lanes[lane][k] = c;
        shown = true;
      }
    }
    if (!shown) {
      const double mid = (o.start + o.end) / 2;
      const int k = ColumnOf((mid - t0) / slice, cols);
      if (lanes[lane][k] == '.') lanes[lane][k] = c;
    }
  }

  std::string out;
  const std::string heading = (p.name.empty() ? t.problem : p.name) + " / " +
                              (t.method.empty() ? std::string("schedule") : t.method);
  out += heading + ": makespan " + FormatFixed(t1 - t0, 4) +
         ", one column = " + FormatFixed(slice, 4) + "\n";
  const auto label = [&](char kind, int d) {
    std::string s = kind + std::to_string(d);
    s.resize(label_w, ' ');
    return s + " |";
  };
  for (int d = 0; d < D; ++d) {
    out += label('d', d) + lanes[2 * d] + "|\n";
    if (any_copy) out += label('c', d) + lanes[2 * d + 1] + "|\n";
  }

  // Ruler: '+' under the column holding each tick time, labels starting there.
  const double step = NiceStep(10 * slice);
  const int dec = DecimalsFor(step);
  std::string ruler(cols, '-'), marks(cols + 8, ' ');
  int free_from = 0;  // first column a label may start at
  for (const double tick : Ticks(t0, t1, step, cols + 1)) {
    const int col = ColumnOf((tick - t0) / slice + 1e-9, cols);
    ruler[col] = '+';
    const std::string text = FormatFixed(tick, dec);
    if (col < free_from || col + static_cast<int>(text.size()) > cols + 1) continue;
    marks.replace(col, text.size(), text);
    free_from = col + static_cast<int>(text.size()) + 1;
  }
  while (!marks.empty() && marks.back() == ' ') marks.pop_back();
  out += std::string(prefix, ' ') + ruler + "\n";
  out += std::string(prefix, ' ') + marks + "\n";

  out += p.split_backward ? "F forward, B backward (input), W backward (weights)"
                          : "F forward, B backward";
  if (any_copy) out += ", O offload, R reload";
  out += "; lower case: odd micro-batch; . idle\n";
  return out;
}

}  // namespace optpipe
