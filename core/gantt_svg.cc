#include "core/gantt_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/memory_curve.h"
#include "core/text_format.h"

namespace optpipe {
namespace {

// Layout, in pixels.
constexpr double kMarginLeft = 92;
constexpr double kMarginRight = 100;
constexpr double kLegendTop = 50;
constexpr double kLegendLineH = 18;
constexpr double kComputeH = 22;
constexpr double kCopyH = 15;
constexpr double kMemH = 36;
constexpr double kLaneGap = 3;
constexpr double kRowGap = 14;
constexpr double kBottom = 40;
constexpr double kLabelFont = 10;
constexpr double kCopyFont = 9;
constexpr double kLabelPad = 1.5;  // each side of a label inside its op
constexpr double kMinPlotW = 700;
constexpr double kMaxPlotW = 6000;

struct TypeStyle {
  const char* fill;
  const char* text;  // label colour with enough contrast on `fill`
};
// Tableau-10 hues: distinct in hue and lightness, and for most colour-blind readers.
const TypeStyle kStyles[kNumOpTypes] = {
    {"#4e79a7", "#ffffff"},  // F blue
    {"#f28e2b", "#1a1a1a"},  // B orange
    {"#59a14f", "#ffffff"},  // W green
    {"#b07aa1", "#ffffff"},  // O purple
    {"#edc948", "#1a1a1a"},  // R yellow
};
const char* kIdle = "#e6e6e6";
const char* kLimit = "#d62728";

// SVG coordinates and labels: at most two decimals.
std::string Num(double x, int decimals = 2) { return FormatFixed(x, decimals); }

int Digits(int n) { return n < 10 ? 1 : 1 + Digits(n / 10); }

const char* TypeName(OpType t, bool split) {
  switch (t) {
    case OpType::kF:
      return "forward";
    case OpType::kB:
      return split ? "backward (input grad)" : "backward";
    case OpType::kW:
      return "weight grad";
    case OpType::kO:
      return "offload";
    case OpType::kR:
      return "reload";
  }
  return "";
}

}  // namespace

double LabelWidthPx(int chars, double font_px) { return 0.62 * font_px * chars; }

std::string GanttSvg(const Problem& p, const TimedSchedule& t, const GanttOptions& opt) {
  const OpSpace space = p.op_space();
  const int D = p.devices;
  std::vector<const TimedOp*> ops;
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  double busy = 0;
  bool any_copy = false;
  for (const TimedOp& o : t.ops) {
    if (!space.Contains(o.op)) continue;
    ops.push_back(&o);
    t0 = std::min(t0, o.start);
    t1 = std::max(t1, o.end);
    if (IsCompute(o.op.type)) {
      busy += o.end - o.start;
    } else {
      any_copy = true;
    }
  }
  if (ops.empty()) t0 = 0, t1 = 1;
  const double span = std::max(t1 - t0, 1e-9);
  const bool show_copy = any_copy || p.offload_allowed();
  const bool show_mem = opt.memory;

  // Labels, best first: "stage:micro-batch" when v > 1, then the micro-batch alone.
  const auto Labels = [&](const Op& op) {
    std::vector<std::string> labels;
    if (p.stages_per_device > 1) {
      labels.push_back(std::to_string(op.stage) + ":" + std::to_string(op.microbatch));
    }
    labels.push_back(std::to_string(op.microbatch));
    return labels;
  };
  const auto Fits = [&](const std::string& label, double font, double w, double h) {
    return LabelWidthPx(static_cast<int>(label.size()), font) + 2 * kLabelPad <= w && font + 2 <= h;
  };

  // Scale: wide enough that nearly every op (49 in 50) has room for its first label.
  double plot_w;
  if (opt.width_px > 0) {
    plot_w = std::max(100.0, opt.width_px - kMarginLeft - kMarginRight);
  } else {
    std::vector<double> px_per_unit;  // what each op needs
    for (const TimedOp* o : ops) {
      const double dur = o->end - o->start;
      if (!(dur > 0) || (IsCopy(o->op.type) && !show_copy)) continue;
      const double font = IsCopy(o->op.type) ? kCopyFont : kLabelFont;
      const int chars = static_cast<int>(Labels(o->op).front().size());
      px_per_unit.push_back((LabelWidthPx(chars, font) + 2 * kLabelPad + 1) / dur);
    }
    double want = kMinPlotW / span;
    if (!px_per_unit.empty()) {
      const std::size_t k = px_per_unit.size() * 49 / 50;
      std::nth_element(px_per_unit.begin(), px_per_unit.begin() + k, px_per_unit.end());
      want = px_per_unit[k];
    }
    plot_w = std::clamp(std::round(want * span), kMinPlotW, kMaxPlotW);
  }
  const double scale = plot_w / span;
  const auto X = [&](double time) { return kMarginLeft + (time - t0) * scale; };

  // Legend entries, laid out in lines that fit the picture's width.
  struct LegendItem {
    int kind;  // 0..4: op type swatch, 5: idle, 6: memory, 7: limit, 8: text only
    std::string label;
  };
  std::vector<LegendItem> legend;
  for (int k = 0; k < kNumOpTypes; ++k) {
    const OpType type = static_cast<OpType>(k);
    if (type == OpType::kW && !p.split_backward) continue;
    if (IsCopy(type) && !show_copy) continue;
    legend.push_back(
        {k, std::string(1, TypeLetter(type)) + " " + TypeName(type, p.split_backward)});
  }
  legend.push_back({5, "idle"});
  if (show_mem) legend.push_back({6, "memory"});
  if (show_mem && p.memory_limit) legend.push_back({7, "limit"});
  legend.push_back(
      {8, p.stages_per_device > 1 ? "labels: stage:micro-batch" : "labels: micro-batch"});
  const double width = kMarginLeft + plot_w + kMarginRight;
  std::vector<std::pair<double, double>> legend_xy;
  {
    double x = 12, y = kLegendTop;
    for (const LegendItem& it : legend) {
      const double w = 17 + LabelWidthPx(static_cast<int>(it.label.size()), 11);
      if (x > 12 && x + w > width - 12) x = 12, y += kLegendLineH;
      legend_xy.push_back({x, y});
      x += w + 14;
    }
  }
  const double plot_top = legend_xy.back().second + kLegendLineH + 16;

  // Rows.
  const double row_h =
      kComputeH + (show_copy ? kLaneGap + kCopyH : 0) + (show_mem ? kLaneGap + kMemH : 0);
  const auto RowY = [&](int d) { return plot_top + d * (row_h + kRowGap); };
  const auto CopyY = [&](int d) { return RowY(d) + kComputeH + kLaneGap; };
  const auto MemY = [&](int d) {
    return RowY(d) + kComputeH + kLaneGap + (show_copy ? kCopyH + kLaneGap : 0);
  };
  const double plot_bottom = RowY(D) - kRowGap;
  const double height = plot_bottom + kBottom;

  // Memory.
  const std::vector<MemoryCurve> curves = MemoryCurves(p, t);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  int peak_dev = 0;
  for (int d = 0; d < D; ++d) {
    lo = std::min(lo, p.static_memory[d]);
    hi = std::max(hi, curves[d].peak);
    if (curves[d].peak > curves[peak_dev].peak) peak_dev = d;
    if (p.memory_limit) hi = std::max(hi, (*p.memory_limit)[d]);
  }
  if (!(hi - lo > 1e-12)) hi = lo + 1;
  const auto MemToY = [&](int d, double v) {
    return MemY(d) + kMemH - (v - lo) / (hi - lo) * (kMemH - 3);
  };

  std::string s;
  s.reserve(256 * ops.size() + 8192);
  const auto add = [&](const std::string& x) { s += x; };

  add("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(width) + "\" height=\"" +
      Num(height) + "\" viewBox=\"0 0 " + Num(width) + " " + Num(height) + "\" data-t0=\"" +
      Num(t0, 6) + "\" data-plot-x=\"" + Num(kMarginLeft) + "\" data-px-per-unit=\"" +
      Num(scale, 6) + "\">\n");
  add("<style>\n"
      "text{font-family:'DejaVu Sans',Verdana,Arial,sans-serif;font-size:11px;fill:#222}\n"
      ".title{font-size:15px;font-weight:bold}\n"
      ".sub{font-size:12px}\n"
      ".mono,.op text{font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace}\n"
      ".op text{font-size:" +
      Num(kLabelFont) +
      "px;text-anchor:middle}\n"
      ".op text.c{font-size:" +
      Num(kCopyFont) +
      "px}\n"
      ".op rect{stroke:#ffffff;stroke-width:0.6}\n"
      ".tick{font-size:10px;text-anchor:middle;fill:#555}\n"
      ".small{font-size:9px;fill:#555}\n"
      ".right{text-anchor:end}\n"
      ".grid{stroke:#ffffff;stroke-width:1}\n"
      ".axis{stroke:#555;stroke-width:1}\n"
      "</style>\n");
  add("<rect x=\"0\" y=\"0\" width=\"" + Num(width) + "\" height=\"" + Num(height) +
      "\" fill=\"#ffffff\"/>\n");

  // Title and summary.
  const std::string method = t.method.empty() ? "schedule" : t.method;
  const std::string heading =
      opt.title.empty() ? (p.name.empty() ? t.problem : p.name) + " \xC2\xB7 " + method : opt.title;
  add("<text class=\"title\" x=\"12\" y=\"22\">" + XmlEscape(heading) + "</text>\n");
  std::string sub = "makespan " + Num(t1 - t0) + " \xC2\xB7 bubble " +
                    Num(100 * (1 - busy / (D * span)), 1) + "% \xC2\xB7 peak memory " +
                    Num(curves.empty() ? 0 : curves[peak_dev].peak) + " (device " +
                    std::to_string(peak_dev) + ")";
  if (p.memory_limit) {
    const auto& lim = *p.memory_limit;
    const bool same = std::all_of(lim.begin(), lim.end(), [&](double x) { return x == lim[0]; });
    sub += same ? " \xC2\xB7 limit " + Num(lim[0]) : " \xC2\xB7 limits per device";
  }
  sub += " \xC2\xB7 " + std::to_string(D) + " devices \xC3\x97 " + std::to_string(p.microbatches) +
         " micro-batches, " + std::to_string(p.stages()) + " stages";
  add("<text class=\"sub\" x=\"12\" y=\"40\">" + XmlEscape(sub) + "</text>\n");

  // Legend.
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const auto [x, y] = legend_xy[i];
    const int kind = legend[i].kind;
    if (kind < kNumOpTypes || kind == 5) {
      add("<rect x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" width=\"12\" height=\"12\" fill=\"" +
          (kind == 5 ? kIdle : kStyles[kind].fill) + "\"/>\n");
    } else if (kind == 6) {
      add("<path d=\"M" + Num(x) + " " + Num(y + 11) + " H" + Num(x + 4) + " V" + Num(y + 3) +
          " H" + Num(x + 12) + "\" fill=\"none\" stroke=\"#3b6ea5\" stroke-width=\"1.5\"/>\n");
    } else if (kind == 7) {
      add("<line x1=\"" + Num(x) + "\" y1=\"" + Num(y + 6) + "\" x2=\"" + Num(x + 12) + "\" y2=\"" +
          Num(y + 6) + "\" stroke=\"" + kLimit +
          "\" stroke-width=\"1.5\" stroke-dasharray=\"3 2\"/>\n");
    }
    add("<text x=\"" + Num(kind == 8 ? x : x + 17) + "\" y=\"" + Num(y + 10) + "\">" +
        XmlEscape(legend[i].label) + "</text>\n");
  }

  // Lane backgrounds (idle time shows through) and row labels.
  add("<g class=\"lanes\">\n");
  std::vector<int> link = LinkOfDevice(p);
  for (int d = 0; d < D; ++d) {
    const std::string ds = std::to_string(d);
    add("<text x=\"" + Num(kMarginLeft - 8) + "\" y=\"" + Num(RowY(d) + kComputeH / 2 + 4) +
        "\" class=\"right\">device " + ds + "</text>\n");
    add("<rect class=\"lane compute\" data-device=\"" + ds + "\" x=\"" + Num(kMarginLeft) +
        "\" y=\"" + Num(RowY(d)) + "\" width=\"" + Num(plot_w) + "\" height=\"" + Num(kComputeH) +
        "\" fill=\"" + kIdle + "\"/>\n");
    if (show_copy) {
      const bool shared = std::count(link.begin(), link.end(), link[d]) > 1;
      add("<text x=\"" + Num(kMarginLeft - 8) + "\" y=\"" + Num(CopyY(d) + kCopyH / 2 + 3) +
          "\" class=\"small right\">" +
          (shared ? "copy, link " + std::to_string(link[d]) : "copy") + "</text>\n");
      add("<rect class=\"lane copy\" data-device=\"" + ds + "\" x=\"" + Num(kMarginLeft) +
          "\" y=\"" + Num(CopyY(d)) + "\" width=\"" + Num(plot_w) + "\" height=\"" + Num(kCopyH) +
          "\" fill=\"" + kIdle + "\"/>\n");
    }
  }
  add("</g>\n");

  // Time axis: grid lines through the lanes, tick labels above and below.
  {
    const double step = NiceStep(70 / scale);
    const int dec = DecimalsFor(step);
    add("<g class=\"timeaxis\">\n");
    add("<line class=\"axis\" x1=\"" + Num(kMarginLeft) + "\" y1=\"" + Num(plot_bottom + 4) +
        "\" x2=\"" + Num(kMarginLeft + plot_w) + "\" y2=\"" + Num(plot_bottom + 4) + "\"/>\n");
    // A tick every 70 px or more: at most plot_w / 70 + 2 of them.
    for (const double tick :
         Ticks(t0, t1, step, static_cast<int>(std::min(plot_w / 70, 1e5)) + 2)) {
      const double x = X(tick);
      std::string lanes;
      for (int d = 0; d < D; ++d) {
        const double y_end = show_copy ? CopyY(d) + kCopyH : RowY(d) + kComputeH;
        lanes += " M" + Num(x) + " " + Num(RowY(d)) + " V" + Num(y_end);
      }
      add("<path class=\"grid\" d=\"" + lanes.substr(1) + "\"/>\n");
      add("<line class=\"axis\" x1=\"" + Num(x) + "\" y1=\"" + Num(plot_bottom + 4) + "\" x2=\"" +
          Num(x) + "\" y2=\"" + Num(plot_bottom + 8) + "\"/>\n");
      add("<text class=\"tick\" x=\"" + Num(x) + "\" y=\"" + Num(plot_bottom + 20) + "\">" +
          Num(tick, dec) + "</text>\n");
      add("<text class=\"tick\" x=\"" + Num(x) + "\" y=\"" + Num(plot_top - 5) + "\">" +
          Num(tick, dec) + "</text>\n");
    }
    add("<text class=\"small right\" x=\"" + Num(kMarginLeft - 8) + "\" y=\"" +
        Num(plot_bottom + 20) + "\">time</text>\n");
    add("</g>\n");
  }

  // Ops.
  add("<g class=\"ops\">\n");
  for (const TimedOp* o : ops) {
    const Op& op = o->op;
    const bool copy = IsCopy(op.type);
    if (copy && !show_copy) continue;
    const int d = DeviceOf(p, op);
    const double x = X(o->start), w = std::max(0.0, (o->end - o->start) * scale);
    const double y = copy ? CopyY(d) : RowY(d), h = copy ? kCopyH : kComputeH;
    const double font = copy ? kCopyFont : kLabelFont;
    const TypeStyle& st = kStyles[static_cast<int>(op.type)];
    const std::string name = ToString(op);
    add("<g class=\"op\" data-op=\"" + name + "\" data-device=\"" + std::to_string(d) +
        "\"><title>" + name + ": " + TypeName(op.type, p.split_backward) + ", stage " +
        std::to_string(op.stage) + ", micro-batch " + std::to_string(op.microbatch) + ", " +
        Num(o->start, 4) + " to " + Num(o->end, 4) + "</title><rect x=\"" + Num(x) + "\" y=\"" +
        Num(y) + "\" width=\"" + Num(w) + "\" height=\"" + Num(h) + "\" fill=\"" + st.fill +
        "\"/>");
    for (const std::string& label : Labels(op)) {
      if (!Fits(label, font, w, h)) continue;
      add("<text" + std::string(copy ? " class=\"c\"" : "") + " x=\"" + Num(x + w / 2) + "\" y=\"" +
          Num(y + h / 2 + 0.36 * font) + "\" style=\"fill:" + st.text + "\">" + label + "</text>");
      break;
    }
    add("</g>\n");
  }
  add("</g>\n");

  // Memory under each device's lanes.
  if (show_mem) {
    add("<g class=\"memory\">\n");
    for (int d = 0; d < D; ++d) {
      const double y0 = MemY(d), yb = y0 + kMemH;
      add("<g data-device=\"" + std::to_string(d) + "\">\n");
      add("<rect x=\"" + Num(kMarginLeft) + "\" y=\"" + Num(y0) + "\" width=\"" + Num(plot_w) +
          "\" height=\"" + Num(kMemH) +
          "\" fill=\"#f7f7f7\" stroke=\"#d0d0d0\" stroke-width=\"0.5\"/>\n");
      add("<text class=\"small mono right\" x=\"" + Num(kMarginLeft - 8) + "\" y=\"" + Num(y0 + 9) +
          "\">" + Num(hi) + "</text>\n");
      add("<text class=\"small right\" x=\"" + Num(kMarginLeft - 8) + "\" y=\"" +
          Num(y0 + kMemH / 2 + 3) + "\">memory</text>\n");
      add("<text class=\"small mono right\" x=\"" + Num(kMarginLeft - 8) + "\" y=\"" + Num(yb) +
          "\">" + Num(lo) + "</text>\n");
      const std::vector<MemoryStep>& st = curves[d].steps;
      std::string line = "M" + Num(X(st[0].t)) + " " + Num(MemToY(d, st[0].value));
      for (std::size_t i = 1; i < st.size(); ++i) {
        line += " H" + Num(X(st[i].t)) + " V" + Num(MemToY(d, st[i].value));
      }
      line += " H" + Num(X(t1));
      add("<path class=\"mem-area\" d=\"" + line + " V" + Num(yb) + " H" + Num(X(st[0].t)) +
          " Z\" fill=\"#c6d9ec\"/>\n");
      add("<path class=\"mem-line\" d=\"" + line +
          "\" fill=\"none\" stroke=\"#3b6ea5\" stroke-width=\"1.2\"/>\n");
      double label_y = y0 + 9;
      if (p.memory_limit) {
        const double limit = (*p.memory_limit)[d], ly = MemToY(d, limit);
        add("<line class=\"limit\" x1=\"" + Num(kMarginLeft) + "\" y1=\"" + Num(ly) + "\" x2=\"" +
            Num(kMarginLeft + plot_w) + "\" y2=\"" + Num(ly) + "\" stroke=\"" + kLimit +
            "\" stroke-width=\"1.2\" stroke-dasharray=\"5 3\"/>\n");
        add("<text class=\"small mono\" x=\"" + Num(kMarginLeft + plot_w + 6) + "\" y=\"" +
            Num(label_y) + "\" style=\"fill:" + kLimit + "\">limit " + Num(limit) + "</text>\n");
        label_y += 11;
      }
      add("<text class=\"small mono\" x=\"" + Num(kMarginLeft + plot_w + 6) + "\" y=\"" +
          Num(label_y) + "\">peak " + Num(curves[d].peak) + "</text>\n");
      add("</g>\n");
    }
    add("</g>\n");
  }
  add("</svg>\n");
  return s;
}

}  // namespace optpipe
