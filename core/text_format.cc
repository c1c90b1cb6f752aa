#include "core/text_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace optpipe {

std::string FormatNumber(double x, int precision) {
  std::ostringstream os;
  os.precision(precision);
  os << x;
  return os.str();
}

std::string FormatFixed(double x, int decimals, bool keep_zeros) {
  // From 1e15 on a double holds no decimals, and the digits would not fit.
  if (std::abs(x) >= 1e15) return FormatNumber(x);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  std::string s = buf;
  if (!keep_zeros && s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

double NiceStep(double raw) {
  const double p10 = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * p10 >= raw * (1 - 1e-9)) return m * p10;
  }
  return 10 * p10;
}

std::vector<double> Ticks(double t0, double t1, double step, int max_count) {
  std::vector<double> ticks;
  const double first = std::ceil(t0 / step - 1e-9);
  if (!(step > 0) || !std::isfinite(first) || std::abs(first) > 0x1p52) return ticks;
  const double span = t1 - t0;
  for (double k = first; static_cast<int>(ticks.size()) < max_count; ++k) {
    const double tick = k * step;
    if (tick > t1 + 1e-9 * span) break;
    ticks.push_back(tick);
  }
  return ticks;
}

int DecimalsFor(double step) {
  return std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6);
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace optpipe
