// The doctor's report: the terminal text, the JSON (docs/doctor.md lists its fields) and the
// HTML page with the per-step timeline.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "diagnose_internal.h"
#include "recordflow/core/json.h"
#include "recordflow/pipeline/diagnose.h"

namespace recordflow::pipeline {
namespace {

using internal::Format;
constexpr size_t kHtmlMaxSteps = 5000;  // a page of two rects per step must stay viewable

// ---- a small JSON value, written as Python's json.dumps writes it ----
struct Json {
  struct Raw {
    std::string text;
  };
  using Object = std::vector<std::pair<std::string, Json>>;
  using Array = std::vector<Json>;
  std::variant<std::nullptr_t, bool, double, int64_t, std::string, Raw, Array, Object> v;

  Json() : v(nullptr) {}
  Json(std::nullptr_t) : v(nullptr) {}              // NOLINT(google-explicit-constructor)
  Json(bool b) : v(b) {}                            // NOLINT(google-explicit-constructor)
  Json(double d) : v(d) {}                          // NOLINT(google-explicit-constructor)
  Json(int64_t i) : v(i) {}                         // NOLINT(google-explicit-constructor)
  Json(int i) : v(int64_t{i}) {}                    // NOLINT(google-explicit-constructor)
  Json(uint64_t i) : v(static_cast<int64_t>(i)) {}  // NOLINT(google-explicit-constructor)
  Json(std::string s) : v(std::move(s)) {}          // NOLINT(google-explicit-constructor)
  Json(const char* s) : v(std::string(s)) {}        // NOLINT(google-explicit-constructor)
  Json(Raw r) : v(std::move(r)) {}                  // NOLINT(google-explicit-constructor)
  Json(Array a) : v(std::move(a)) {}                // NOLINT(google-explicit-constructor)
  Json(Object o) : v(std::move(o)) {}               // NOLINT(google-explicit-constructor)
  template <typename T>
  static Json Opt(const std::optional<T>& o) {
    return o ? Json(*o) : Json();
  }
};

void AppendString(std::string& out, std::string_view s) { out += JsonQuote(s); }

void AppendDouble(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), d);
  std::string text(buf, result.ptr);
  // Python writes floats with a point or an exponent: 2.0, not 2.
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  out += text;
}

// An array's or object's `n` items between `open` and `close` (`item(k)` writes item k), each
// after `pad`; empty: just the brackets.
template <typename Item>
void DumpItems(std::string& out, char open, char close, size_t n, const char* sep,
               const std::string& pad, const std::string& end_pad, const Item& item) {
  out += open;
  if (n > 0) {
    for (size_t k = 0; k < n; ++k) {
      out += (k ? sep : "") + pad;
      item(k);
    }
    out += end_pad;
  }
  out += close;
}

void Dump(const Json& j, std::string& out, int indent, int depth) {
  const std::string pad =
      indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ') : "";
  const std::string end_pad =
      indent > 0 ? "\n" + std::string(static_cast<size_t>(indent * depth), ' ') : "";
  const char* sep = indent > 0 ? "," : ", ";
  if (std::holds_alternative<std::nullptr_t>(j.v)) {
    out += "null";
  } else if (const bool* b = std::get_if<bool>(&j.v)) {
    out += *b ? "true" : "false";
  } else if (const double* d = std::get_if<double>(&j.v)) {
    AppendDouble(out, *d);
  } else if (const int64_t* i = std::get_if<int64_t>(&j.v)) {
    out += std::to_string(*i);
  } else if (const std::string* s = std::get_if<std::string>(&j.v)) {
    AppendString(out, *s);
  } else if (const Json::Raw* r = std::get_if<Json::Raw>(&j.v)) {
    out += r->text;
  } else if (const Json::Array* a = std::get_if<Json::Array>(&j.v)) {
    DumpItems(out, '[', ']', a->size(), sep, pad, end_pad,
              [&](size_t k) { Dump((*a)[k], out, indent, depth + 1); });
  } else if (const Json::Object* o = std::get_if<Json::Object>(&j.v)) {
    DumpItems(out, '{', '}', o->size(), sep, pad, end_pad, [&](size_t k) {
      AppendString(out, (*o)[k].first);
      out += ": ";
      Dump((*o)[k].second, out, indent, depth + 1);
    });
  }
}

std::string DumpJson(const Json& j, int indent) {
  std::string out;
  Dump(j, out, indent, 0);
  return out;
}

Json StageJson(const StageMeasurement& s) {
  Json::Object o = {{"id", s.id},
                    {"kind", s.kind},
                    {"name", s.name},
                    {"elements", s.elements},
                    {"busy_seconds", Json::Opt(s.busy_seconds)},
                    {"wait_output_seconds", Json::Opt(s.wait_output_seconds)},
                    {"parallelism", s.parallelism},
                    {"buffer_size", Json::Opt(s.buffer_size)},
                    {"buffer_fill", Json::Opt(s.buffer_fill)},
                    {"utilization", Json::Opt(s.utilization)},
                    {"seconds_per_element", Json::Opt(s.seconds_per_element)}};
  if (s.id == "read") o.emplace_back("alone_records_per_s", Json::Opt(s.alone_records_per_s));
  if (!s.utilization_note.empty()) o.emplace_back("utilization_note", s.utilization_note);
  return o;
}

Json CauseJson(const Cause& c) {
  Json::Object o = {{"id", c.id}, {"stage", Json::Opt(c.stage)}};
  if (c.ceiling_over_demand) o.emplace_back("ceiling_over_demand", *c.ceiling_over_demand);
  o.emplace_back("explanation", c.explanation);
  if (c.borderline) o.emplace_back("borderline", true);
  return o;
}

Json RecommendationJson(const Recommendation& r) {
  Json::Object o = {{"id", r.id},
                    {"stage", Json::Opt(r.stage)},
                    {"title", r.title},
                    {"detail", r.detail},
                    {"gain", Json::Opt(r.gain)},
                    {"measured", r.measured},
                    {"helps", Json::Opt(r.helps)},
                    {"metric", Json::Opt(r.metric)},
                    {"baseline", Json::Opt(r.baseline)},
                    {"variant", Json::Opt(r.variant)},
                    {"error", Json::Opt(r.error)},
                    {"command", Json::Opt(r.command)}};
  if (r.wait_fraction_before) o.emplace_back("wait_fraction_before", *r.wait_fraction_before);
  if (r.wait_fraction_after) o.emplace_back("wait_fraction_after", *r.wait_fraction_after);
  if (r.native_op) o.emplace_back("native_op", *r.native_op);
  return o;
}

Json ReportJson(const DiagnoseReport& report,
                const std::vector<std::pair<std::string, std::string>>& extra) {
  const Measurements& m = report.measurements;
  const Verdict& v = report.verdict;
  const double rate = m.alone.elements_per_s;
  Json::Array stages, recs;
  for (const StageMeasurement& s : m.stages) stages.push_back(StageJson(s));
  for (const Recommendation& r : report.recommendations) recs.push_back(RecommendationJson(r));
  Json step;
  if (m.step) {
    const StepRun& s = *m.step;
    step = Json::Object{{"steps", s.steps},
                        {"steps_per_s", s.steps_per_s},
                        {"wait_fraction", s.wait_fraction},
                        {"mean_wait_ms", s.mean_wait_ms},
                        {"mean_compute_ms", s.mean_compute_ms},
                        {"max_compute_ms", s.max_compute_ms},
                        {"wait_s", s.wait_s},
                        {"compute_s", s.compute_s},
                        {"mode", m.step_mode}};
  }
  const std::optional<int64_t> batch =
      m.batch_size ? std::optional<int64_t>(static_cast<int64_t>(*m.batch_size)) : std::nullopt;
  Json::Object o = {
      {"pipeline", m.pipeline},
      {"measured_by", m.measured_by},
      {"cores", m.cores},
      {"ceiling",
       Json::Object{{"elements_per_s", rate * static_cast<double>(m.batch_size.value_or(1))},
                    {"batches_per_s", m.batch_size ? Json(rate) : Json()},
                    {"batch_size", Json::Opt(batch)},
                    {"iterator_elements_per_s", rate},
                    {"seconds", m.alone.seconds},
                    {"exhausted", m.alone.exhausted}}},
      {"time_to_first_element_s", m.alone.time_to_first_element_s},
      {"stages", stages},
      {"slowest_stage", v.slowest_stage},
      {"step", step},
      {"input_bound", Json::Opt(v.input_bound)},
      {"verdict", v.verdict},
      {"verdict_detail", v.detail},
      {"cause", CauseJson(v.cause)},
      {"recommendations", recs},
      {"thresholds", Json::Object{{"input_bound_wait_fraction", kInputBoundWaitFraction},
                                  {"helps_gain", kHelpsGain},
                                  {"keeps_up_margin", kKeepsUpMargin},
                                  {"read_headroom", kReadHeadroom}}}};
  for (const auto& [key, value] : extra) o.emplace_back(key, Json::Raw{value});
  return o;
}

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string Pad(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string GainText(const Recommendation& r) {
  if (r.error) return "could not be tried (" + *r.error + ")";
  if (!r.gain) return "gain not estimated";
  if (r.measured) {
    std::string g = Format("measured %.2fx", *r.gain);
    if (r.metric == "steps_per_s") {
      g += Format(" steps/s, waiting %.0f%% -> %.0f%%", 100 * r.wait_fraction_before.value_or(0),
                  100 * r.wait_fraction_after.value_or(0));
    }
    if (r.helps == false) g += " (no real gain here)";
    return g;
  }
  if (*r.gain >= kGainCap) return Format("estimated up to %.0fx or more (capped)", kGainCap);
  return Format("estimated up to %.2fx", *r.gain);
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
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
        out += "&#x27;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Round tick values from 0 to at least `top` (1, 2 or 5 times a power of ten apart).
std::vector<double> Ticks(double top, int count) {
  if (top <= 0) return {0.0};
  const double raw = top / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  }
  std::vector<double> out;
  const int n = static_cast<int>(std::ceil(top / step - 1e-9));
  for (int i = 0; i <= n; ++i) out.push_back(i * step);
  return out;
}

std::string TimelineSvg(const std::vector<double>& waits, const std::vector<double>& computes) {
  const int left = 64, right = 16, top = 12, bottom = 44, plot_w = 880, plot_h = 220;
  const int width = left + plot_w + right, height = top + plot_h + bottom;
  double total = 0, tallest = 0;
  for (size_t i = 0; i < waits.size(); ++i) {
    total += waits[i] + computes[i];
    tallest = std::max(tallest, 1e3 * (waits[i] + computes[i]));
  }
  const std::vector<double> x_ticks = Ticks(total, 5), y_ticks = Ticks(tallest, 4);
  const double x_max = x_ticks.back() > 0 ? x_ticks.back() : 1e-9;
  const double y_max = y_ticks.back() > 0 ? y_ticks.back() : 1e-9;
  const double sx = plot_w / x_max, sy = plot_h / y_max;
  const int base = top + plot_h;
  std::string svg = Format(
      "<svg role=\"img\" aria-label=\"per-step wait and compute timeline\" "
      "width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "style=\"max-width:100%%;height:auto\">",
      width, height, width, height);
  double t = 0;
  for (size_t i = 0; i < waits.size(); ++i) {
    const double w = waits[i], c = computes[i];
    const double x = left + t * sx, bw = std::max((w + c) * sx, 0.5);
    const double h_c = 1e3 * c * sy, h_w = 1e3 * w * sy;
    svg += Format(
        "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#4c78a8\">"
        "<title>step %zu: compute %.1f ms</title></rect>",
        x, base - h_c, bw, h_c, i, 1e3 * c);
    svg += Format(
        "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#e45756\">"
        "<title>step %zu: wait %.1f ms</title></rect>",
        x, base - h_c - h_w, bw, h_w, i, 1e3 * w);
    t += w + c;
  }
  svg += Format("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>", left, base,
                left + plot_w, base);
  svg += Format("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>", left, top, left,
                base);
  for (double v : x_ticks) {
    const double x = left + v * sx;
    svg += Format("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>", x, base, x,
                  base + 5);
    svg += Format("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">%g</text>", x,
                  base + 18, v);
  }
  for (double v : y_ticks) {
    const double y = base - v * sy;
    svg += Format("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>", left - 5,
                  y, left, y);
    svg += Format("<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">%g</text>",
                  left - 8, y + 4, v);
  }
  svg += Format(
      "<text class=\"axis-title\" x=\"%.0f\" y=\"%d\" text-anchor=\"middle\" "
      "font-size=\"13\">time since the first step (s)</text>",
      left + plot_w / 2.0, height - 6);
  svg += Format(
      "<text class=\"axis-title\" x=\"14\" y=\"%.0f\" text-anchor=\"middle\" "
      "font-size=\"13\" transform=\"rotate(-90 14 %.0f)\">step time (ms)</text>",
      top + plot_h / 2.0, top + plot_h / 2.0);
  return svg + "</svg>";
}

}  // namespace

std::string RenderJson(const DiagnoseReport& report,
                       const std::vector<std::pair<std::string, std::string>>& extra) {
  return DumpJson(ReportJson(report, extra), 2);
}

std::string RenderText(const DiagnoseReport& report) {
  const Measurements& m = report.measurements;
  const Verdict& v = report.verdict;
  std::string out;
  auto add = [&](const std::string& line) { out += line + "\n"; };
  const double rate = m.alone.elements_per_s;
  add("recordflow doctor");
  add("  pipeline: " + m.pipeline);
  std::string ceiling =
      internal::FormatRate(rate * static_cast<double>(m.batch_size.value_or(1))) + " elements/s";
  if (m.batch_size) {
    ceiling +=
        " (" + internal::FormatRate(rate) + " batches/s of " + std::to_string(*m.batch_size) + ")";
  }
  add("  input ceiling: " + ceiling + Format(", measured alone for %.1f s", m.alone.seconds) +
      (m.alone.exhausted ? "  (dataset ended early)" : ""));
  add(Format("  time to first element: %.0f ms", 1e3 * m.alone.time_to_first_element_s));
  if (!m.native_pipeline.empty()) {
    // Two runs feed the stages table: say which figures come from which.
    add("  native stages measured by the engine, alone: " + m.native_pipeline +
        (m.native_elements_per_s
             ? " at " + internal::FormatRate(*m.native_elements_per_s) + " elements/s"
             : std::string()) +
        "; Python stages timed in Python");
  }
  if (m.step) {
    const StepRun& s = *m.step;
    add("  with the step (" + m.step_mode + ")" +
        Format(": %llu steps, %.1f steps/s, wait %.1f ms + compute %.1f ms per step",
               static_cast<unsigned long long>(s.steps), s.steps_per_s, s.mean_wait_ms,
               s.mean_compute_ms));
    add(Format("  time waiting for data: %.1f%% of step time", 100 * s.wait_fraction));
  }
  add("");
  add("VERDICT: " + Upper(v.verdict) + (v.detail.empty() ? "" : " - " + v.detail));
  add("CAUSE: " + v.cause.explanation);
  add("");
  add("stages (utilization = busy share of the stage's capacity; the highest sets the ceiling):");
  add("  " + Pad("util", 6) + " " + Pad("elements", 9) + " " + Pad("busy s", 8) + " " +
      Pad("threads", 7) + " " + Pad("buffer", 9) + "  stage");
  for (const StageMeasurement& s : m.stages) {
    const std::string util = s.utilization ? Format("%.0f%%", 100 * *s.utilization) : "-";
    const std::string busy = s.busy_seconds ? Format("%.2f", *s.busy_seconds) : "-";
    std::string buf = "-";
    if (s.buffer_size && *s.buffer_size != 0) {
      buf = std::to_string(*s.buffer_size) +
            (s.buffer_fill ? Format(" %.0f%%", 100 * *s.buffer_fill) : "");
    }
    std::string per;
    if (s.seconds_per_element && s.kind.rfind("python_m", 0) == 0) {
      per = Format(" [%.2f ms/element]", 1e3 * *s.seconds_per_element);
    }
    const std::string threads = s.parallelism != 0 ? std::to_string(s.parallelism) : "-";
    add("  " + Pad(util, 6) + " " + Pad(std::to_string(s.elements), 9) + " " + Pad(busy, 8) + " " +
        Pad(threads, 7) + " " + Pad(buf, 9) + "  [" + s.id + "] " + s.name + per +
        (s.id == v.slowest_stage ? "  <- slowest" : ""));
    if (!s.utilization_note.empty()) {
      add("  " + std::string(6 + 1 + 9 + 1 + 8 + 1 + 7 + 1 + 9, ' ') + "  (" + s.utilization_note +
          ")");
    }
  }
  add("");
  if (!report.recommendations.empty()) {
    add("what would help (gain: measured by running the variant, or estimated):");
    int i = 0;
    for (const Recommendation& r : report.recommendations) {
      add(Format("  %d. ", ++i) + r.title);
      add("     " + GainText(r) + ". " + r.detail);
    }
  } else {
    add("what would help: " + (v.detail.empty() ? std::string("nothing found") : v.detail));
  }
  return out;
}

std::string RenderHtml(const DiagnoseReport& report, const std::string& json) {
  const Verdict& v = report.verdict;
  const Measurements& m = report.measurements;
  std::string page;
  std::string verdict = "<p class=\"verdict\"><strong>Verdict: " + HtmlEscape(Upper(v.verdict)) +
                        "</strong>" + (v.detail.empty() ? "" : " &mdash; " + HtmlEscape(v.detail)) +
                        "</p><p class=\"cause\"><strong>Cause:</strong> " +
                        HtmlEscape(v.cause.explanation) + "</p>";
  std::string helps = "<h2>What would help</h2>";
  if (!report.recommendations.empty()) {
    helps += "<ol>";
    for (const Recommendation& r : report.recommendations) {
      const std::string cmd =
          r.command ? "<br><code class=\"command\">" + HtmlEscape(*r.command) + "</code>" : "";
      helps += "<li><strong>" + HtmlEscape(r.title) + "</strong>" + cmd + "<br><em>" +
               HtmlEscape(GainText(r)) + ".</em> " + HtmlEscape(r.detail) + "</li>";
    }
    helps += "</ol>";
  } else {
    helps += "<p>" + HtmlEscape(v.detail.empty() ? "nothing found" : v.detail) + "</p>";
  }
  std::string timeline = "<h2>Per-step timeline</h2>";
  if (m.step && !m.step->waits.empty()) {
    const size_t shown = m.step->waits.size(), drawn = std::min(shown, kHtmlMaxSteps);
    const std::vector<double> waits(m.step->waits.begin(),
                                    m.step->waits.begin() + static_cast<std::ptrdiff_t>(drawn));
    const std::vector<double> computes(
        m.step->computes.begin(), m.step->computes.begin() + static_cast<std::ptrdiff_t>(drawn));
    timeline +=
        "<p>Each bar is one training step: its width the step's wall time (x: seconds since the "
        "first step), its height the step's time in milliseconds (y), split into <span "
        "style=\"color:#e45756\">&#9632; waiting for data</span> and <span "
        "style=\"color:#4c78a8\">&#9632; compute</span>." +
        (shown > drawn ? Format(" The first %zu of %zu steps.", drawn, shown) : std::string()) +
        "</p>" + TimelineSvg(waits, computes);
  } else {
    timeline += "<p>No step was given: no timeline (pass step_fn, step_seconds or --step-ms).</p>";
  }
  std::string stages =
      "<h2>Stages</h2><table><tr><th>stage</th><th>utilization</th><th>elements</th><th>what it "
      "runs</th></tr>";
  for (const StageMeasurement& s : m.stages) {
    stages += "<tr><td>" + HtmlEscape(s.id) + (s.id == v.slowest_stage ? " (slowest)" : "") +
              "</td><td>" + (s.utilization ? Format("%.0f%%", 100 * *s.utilization) : "-") +
              "</td><td>" + std::to_string(s.elements) + "</td><td>" + HtmlEscape(s.name) +
              "</td></tr>";
  }
  stages += "</table>";
  page +=
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>recordflow doctor</title>\n"
      "<style>\n"
      "body{font-family:sans-serif;margin:2em;max-width:72em;line-height:1.4}\n"
      "pre{background:#f6f6f6;padding:1em;white-space:pre-wrap;overflow-wrap:anywhere}\n"
      "code{white-space:pre-wrap;overflow-wrap:anywhere;background:#f0f0f0;padding:0 .2em}\n"
      ".verdict{font-size:1.3em} td,th{text-align:left;padding:.2em .6em;vertical-align:top;\n"
      "overflow-wrap:anywhere} li{margin-bottom:.6em}\n"
      "</style>\n</head><body>\n<h1>recordflow doctor</h1>\n";
  page += verdict + "\n" + helps + "\n" + timeline + "\n" + stages + "\n";
  page += "<h2>Report</h2>\n<pre>" + HtmlEscape(RenderText(report)) + "</pre>\n";
  page += "<details><summary>JSON</summary>\n<pre>" +
          HtmlEscape(json.empty() ? RenderJson(report) : json) +
          "</pre>\n</details>\n</body></html>\n";
  return page;
}

}  // namespace recordflow::pipeline
