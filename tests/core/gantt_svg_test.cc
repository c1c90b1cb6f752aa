#include "core/gantt_svg.h"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "core/simulator.h"
#include "heuristics/method.h"
#include "tests/testing.h"

namespace optpipe {
namespace {

// --- A minimal XML reader, enough to prove the SVG well-formed and walk it. ---

struct Node {
  std::string tag;
  std::map<std::string, std::string> attr;
  std::vector<std::unique_ptr<Node>> kids;
  std::string text;  // character data directly inside, entities decoded
  const Node* parent = nullptr;
};

class XmlReader {
 public:
  explicit XmlReader(const std::string& s) : s_(s) {}

  // The root element, or nullopt with error() set.
  std::unique_ptr<Node> Parse() {
    Skip();
    if (s_.compare(i_, 5, "<?xml") == 0) {
      i_ = s_.find("?>", i_);
      if (i_ == std::string::npos) return Fail("unterminated prolog");
      i_ += 2;
    }
    Skip();
    auto root = Element(nullptr);
    if (!root) return nullptr;
    Skip();
    if (i_ != s_.size()) return Fail("content after the root element");
    return root;
  }
  const std::string& error() const { return error_; }

 private:
  std::unique_ptr<Node> Fail(const std::string& why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(i_);
    return nullptr;
  }
  void Skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  std::string Name() {
    const std::size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-' ||
                              s_[i_] == ':' || s_[i_] == '_')) {
      ++i_;
    }
    return s_.substr(b, i_ - b);
  }
  std::optional<std::string> Decode(const std::string& raw) {
    std::string out;
    for (std::size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] == '<') return std::nullopt;
      if (raw[k] != '&') {
        out += raw[k];
        continue;
      }
      const std::size_t semi = raw.find(';', k);
      if (semi == std::string::npos) return std::nullopt;
      const std::string ent = raw.substr(k + 1, semi - k - 1);
      static const std::map<std::string, char> kEntities = {
          {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
      if (!kEntities.count(ent)) return std::nullopt;
      out += kEntities.at(ent);
      k = semi;
    }
    return out;
  }
  std::unique_ptr<Node> Element(const Node* parent) {
    if (i_ >= s_.size() || s_[i_] != '<') return Fail("expected '<'");
    ++i_;
    auto n = std::make_unique<Node>();
    n->parent = parent;
    n->tag = Name();
    if (n->tag.empty()) return Fail("empty tag name");
    for (;;) {
      Skip();
      if (i_ >= s_.size()) return Fail("unterminated tag");
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return n;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      const std::string key = Name();
      if (key.empty() || i_ >= s_.size() || s_[i_] != '=') return Fail("bad attribute");
      ++i_;
      if (i_ >= s_.size() || s_[i_] != '"') return Fail("attribute value not quoted");
      const std::size_t end = s_.find('"', i_ + 1);
      if (end == std::string::npos) return Fail("unterminated attribute");
      std::optional<std::string> v = Decode(s_.substr(i_ + 1, end - i_ - 1));
      if (!v) return Fail("bad character or entity in attribute " + key);
      if (n->attr.count(key)) return Fail("duplicate attribute " + key);
      n->attr[key] = *v;
      i_ = end + 1;
    }
    for (;;) {
      const std::size_t lt = s_.find('<', i_);
      if (lt == std::string::npos) return Fail("unterminated element " + n->tag);
      std::optional<std::string> text = Decode(s_.substr(i_, lt - i_));
      if (!text) return Fail("bad entity in text of " + n->tag);
      n->text += *text;
      i_ = lt;
      if (s_.compare(i_, 2, "</") == 0) {
        i_ += 2;
        if (Name() != n->tag) return Fail("mismatched close tag for " + n->tag);
        Skip();
        if (i_ >= s_.size() || s_[i_] != '>') return Fail("bad close tag");
        ++i_;
        return n;
      }
      auto kid = Element(n.get());
      if (!kid) return nullptr;
      n->kids.push_back(std::move(kid));
    }
  }

  const std::string& s_;
  std::size_t i_ = 0;
  std::string error_;
};

void Walk(const Node& n, const std::function<void(const Node&)>& fn) {
  fn(n);
  for (const auto& k : n.kids) Walk(*k, fn);
}

bool HasClass(const Node& n, const std::string& c) {
  auto it = n.attr.find("class");
  if (it == n.attr.end()) return false;
  const std::string s = " " + it->second + " ";
  return s.find(" " + c + " ") != std::string::npos;
}

double Attr(const Node& n, const std::string& key) {
  auto it = n.attr.find(key);
  EXPECT_NE(it, n.attr.end()) << "<" << n.tag << "> lacks " << key;
  return it == n.attr.end() ? 0 : std::stod(it->second);
}

struct Drawn {
  Problem p;
  TimedSchedule t;
  std::string svg;
  std::unique_ptr<Node> root;
};

Drawn Draw(const Problem& p, const std::string& method, GanttOptions opt = {}) {
  Drawn d{p, {}, {}, nullptr};
  StatusOr<Solution> s = RunMethod(p, method);
  EXPECT_TRUE(s.ok()) << method << ": " << s.status().message();
  if (!s.ok()) return d;
  d.t = ToTimed(p, s->schedule, s->sim);
  d.svg = GanttSvg(p, d.t, opt);
  XmlReader reader(d.svg);
  d.root = reader.Parse();
  EXPECT_TRUE(d.root) << "not well-formed: " << reader.error();
  return d;
}

Problem Case(const std::string& name) {
  StatusOr<Problem> p = LoadProblem(testing::CasePath(name));
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

// Every op is one rect in its device's lane, at x and width given by the scale;
// every label fits inside its rect.
void ExpectOpsDrawnToScale(const Drawn& d, int* labelled = nullptr) {
  ASSERT_TRUE(d.root);
  EXPECT_EQ(d.root->tag, "svg");
  const double t0 = Attr(*d.root, "data-t0"), x0 = Attr(*d.root, "data-plot-x"),
               scale = Attr(*d.root, "data-px-per-unit");
  std::map<std::pair<int, bool>, double> lane_y;  // (device, copy) -> y
  std::map<std::string, const Node*> op_groups;
  Walk(*d.root, [&](const Node& n) {
    if (n.tag == "rect" && HasClass(n, "lane")) {
      lane_y[{static_cast<int>(Attr(n, "data-device")), HasClass(n, "copy")}] = Attr(n, "y");
    }
    if (n.tag == "g" && HasClass(n, "op")) {
      EXPECT_FALSE(op_groups.count(n.attr.at("data-op"))) << "op drawn twice";
      op_groups[n.attr.at("data-op")] = &n;
    }
  });
  EXPECT_EQ(op_groups.size(), d.t.ops.size());
  int with_label = 0;
  for (const TimedOp& o : d.t.ops) {
    const std::string name = ToString(o.op);
    ASSERT_TRUE(op_groups.count(name)) << name << " not drawn";
    const Node& g = *op_groups[name];
    const Node* rect = nullptr;
    const Node* text = nullptr;
    for (const auto& k : g.kids) {
      if (k->tag == "rect") {
        EXPECT_EQ(rect, nullptr) << name << ": one rect per op";
        rect = k.get();
      }
      if (k->tag == "text") text = k.get();
    }
    ASSERT_NE(rect, nullptr) << name;
    const double x = Attr(*rect, "x"), w = Attr(*rect, "width"), y = Attr(*rect, "y"),
                 h = Attr(*rect, "height");
    EXPECT_NEAR(x, x0 + (o.start - t0) * scale, 0.011) << name;
    EXPECT_NEAR(w, (o.end - o.start) * scale, 0.011) << name;
    const bool copy = IsCopy(o.op.type);
    ASSERT_TRUE(lane_y.count({o.device, copy})) << name;
    EXPECT_DOUBLE_EQ(y, lane_y[std::make_pair(o.device, copy)]) << name;
    if (text) {
      ++with_label;
      // A monospace digit is about 0.6 em wide; the label must fit with room to spare.
      const double font = HasClass(*text, "c") ? 9 : 10;
      const double text_w = 0.6 * font * static_cast<double>(text->text.size());
      EXPECT_LE(text_w, w) << name << " label '" << text->text << "'";
      EXPECT_LE(font, h) << name;
      EXPECT_NEAR(Attr(*text, "x"), x + w / 2, 0.011) << name;
      EXPECT_LT(Attr(*text, "y"), y + h) << name;
      EXPECT_GT(Attr(*text, "y") - font, y - 1) << name;
      const std::string mb = std::to_string(o.op.microbatch);
      EXPECT_EQ(text->text.substr(text->text.size() - mb.size()), mb) << name;
    }
  }
  if (labelled) *labelled = with_label;
}

int CountLimitLines(const Node& root) {
  int n = 0;
  Walk(root, [&](const Node& x) { n += x.tag == "line" && HasClass(x, "limit"); });
  return n;
}

TEST(GanttSvg, OneRectPerOpToScaleInItsDevicesRow) {
  const Drawn d = Draw(Case("unit-4x8"), "1f1b");
  int labelled = 0;
  ExpectOpsDrawnToScale(d, &labelled);
  EXPECT_EQ(labelled, static_cast<int>(d.t.ops.size())) << "unit ops are wide enough for a label";
  EXPECT_EQ(CountLimitLines(*d.root), 0) << "no limit, no limit line";
  EXPECT_NE(d.svg.find("makespan 30"), std::string::npos);
  EXPECT_NE(d.svg.find("bubble 20%"), std::string::npos);
}

TEST(GanttSvg, InterleavedLabelsCarryTheStage) {
  const Problem p = Case("unit-4x8-vshape");
  const Drawn d = Draw(p, "zb-v");
  ExpectOpsDrawnToScale(d);
  EXPECT_NE(d.svg.find(">7:3<"), std::string::npos) << "stage:micro-batch labels";
}

TEST(GanttSvg, LimitLineCopyLanesAndReadableAt8DevicesBy32MicroBatches) {
  const Problem p = Case("llama-8dev-offload");
  const Drawn d = Draw(p, "po-h");
  int labelled = 0;
  ExpectOpsDrawnToScale(d, &labelled);
  EXPECT_EQ(CountLimitLines(*d.root), p.devices);
  // Most ops carry their label at the automatic width.
  EXPECT_GE(labelled, static_cast<int>(0.9 * d.t.ops.size()));
  EXPECT_LE(Attr(*d.root, "width"), 6500);
}

TEST(GanttSvg, NarrowPictureDropsLabelsThatDoNotFit) {
  GanttOptions opt;
  opt.width_px = 300;
  const Drawn d = Draw(Case("llama-8dev-offload"), "po-h", opt);
  int labelled = 0;
  ExpectOpsDrawnToScale(d, &labelled);
  EXPECT_LT(labelled, static_cast<int>(d.t.ops.size()));
}

TEST(GanttSvg, DeterministicAndEscaped) {
  Problem p = Case("unit-4x8");
  p.name = "a<b & \"c\"";
  StatusOr<Solution> s = RunMethod(p, "gpipe");
  ASSERT_TRUE(s.ok());
  const TimedSchedule t = ToTimed(p, s->schedule, s->sim);
  const std::string svg = GanttSvg(p, t);
  EXPECT_EQ(svg, GanttSvg(p, t));
  XmlReader reader(svg);
  std::unique_ptr<Node> root = reader.Parse();
  ASSERT_TRUE(root) << reader.error();
  bool found = false;
  Walk(*root, [&](const Node& n) { found = found || n.text.find("a<b & \"c\"") == 0; });
  EXPECT_TRUE(found) << "the title reads back unescaped";
}

TEST(GanttSvg, WithoutMemoryTrack) {
  GanttOptions opt;
  opt.memory = false;
  const Drawn d = Draw(Case("gpt-4dev-fused"), "1f1b", opt);
  ExpectOpsDrawnToScale(d);
  EXPECT_EQ(CountLimitLines(*d.root), 0);
  EXPECT_EQ(d.svg.find("mem-line"), std::string::npos);
}

}  // namespace
}  // namespace optpipe
