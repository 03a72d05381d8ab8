// Binding of the doctor's rules and report (include/recordflow/pipeline/diagnose.h), so that
// rf.diagnose and `recordflow doctor` share one implementation: Python measures its own
// stages, then hands the measurements over as plain dicts (the fields of docs/doctor.md).
//   _core.doctor_judge(measurements) -> verdict dict
//   _core.doctor_order(recommendations) -> indices in report order
//   _core.doctor_render_text(report) / _core.doctor_render_html(report, waits, computes, json)
//   _core.doctor_reshard_command(paths, total_bytes, compression) -> (command, shards)
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "errors.h"
#include "recordflow/pipeline/diagnose.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {
namespace {

using pipeline::Cause;
using pipeline::DiagnoseReport;
using pipeline::Measurements;
using pipeline::Recommendation;
using pipeline::StageMeasurement;
using pipeline::StepRun;
using pipeline::Verdict;

// d[key] when present and not None.
template <typename T>
std::optional<T> Get(const nb::dict& d, const char* key) {
  if (!d.contains(key)) return std::nullopt;
  nb::object v = d[key];
  if (v.is_none()) return std::nullopt;
  return nb::cast<T>(v);
}

template <typename T>
T GetOr(const nb::dict& d, const char* key, T fallback) {
  return Get<T>(d, key).value_or(fallback);
}

nb::object Opt(const std::optional<std::string>& v) { return v ? nb::cast(*v) : nb::none(); }
nb::object Opt(const std::optional<double>& v) { return v ? nb::cast(*v) : nb::none(); }
nb::object Opt(const std::optional<bool>& v) { return v ? nb::cast(*v) : nb::none(); }

StageMeasurement StageFrom(const nb::dict& d) {
  StageMeasurement s;
  s.id = GetOr<std::string>(d, "id", "");
  s.kind = GetOr<std::string>(d, "kind", "native");
  s.name = GetOr<std::string>(d, "name", s.id);
  s.elements = GetOr<uint64_t>(d, "elements", 0);
  s.busy_seconds = Get<double>(d, "busy_seconds");
  s.wait_output_seconds = Get<double>(d, "wait_output_seconds");
  s.parallelism = GetOr<int>(d, "parallelism", 0);
  s.buffer_size = Get<int>(d, "buffer_size");
  s.buffer_fill = Get<double>(d, "buffer_fill");
  s.utilization = Get<double>(d, "utilization");
  s.seconds_per_element = Get<double>(d, "seconds_per_element");
  s.alone_records_per_s = Get<double>(d, "alone_records_per_s");
  s.utilization_note = GetOr<std::string>(d, "utilization_note", "");
  return s;
}

StepRun StepFrom(const nb::dict& d, const std::vector<double>& waits,
                 const std::vector<double>& computes) {
  StepRun s;
  s.steps = GetOr<uint64_t>(d, "steps", 0);
  s.steps_per_s = GetOr<double>(d, "steps_per_s", 0);
  s.wait_fraction = GetOr<double>(d, "wait_fraction", 0);
  s.mean_wait_ms = GetOr<double>(d, "mean_wait_ms", 0);
  s.mean_compute_ms = GetOr<double>(d, "mean_compute_ms", 0);
  s.max_compute_ms = GetOr<double>(d, "max_compute_ms", 0);
  s.wait_s = GetOr<double>(d, "wait_s", 0);
  s.compute_s = GetOr<double>(d, "compute_s", 0);
  s.step_cpu_s = Get<double>(d, "step_cpu_s");
  s.waits = waits;
  s.computes = computes;
  return s;
}

Cause CauseFrom(const nb::dict& d) {
  Cause c;
  c.id = GetOr<std::string>(d, "id", "");
  c.stage = Get<std::string>(d, "stage");
  c.explanation = GetOr<std::string>(d, "explanation", "");
  c.ceiling_over_demand = Get<double>(d, "ceiling_over_demand");
  c.borderline = GetOr<bool>(d, "borderline", false);
  return c;
}

nb::dict CauseDict(const Cause& c) {
  nb::dict d;
  d["id"] = c.id;
  d["stage"] = Opt(c.stage);
  if (c.ceiling_over_demand) d["ceiling_over_demand"] = *c.ceiling_over_demand;
  d["explanation"] = c.explanation;
  if (c.borderline) d["borderline"] = true;
  return d;
}

Recommendation RecommendationFrom(const nb::dict& d) {
  Recommendation r;
  r.id = GetOr<std::string>(d, "id", "");
  r.stage = Get<std::string>(d, "stage");
  r.title = GetOr<std::string>(d, "title", "");
  r.detail = GetOr<std::string>(d, "detail", "");
  r.gain = Get<double>(d, "gain");
  r.measured = GetOr<bool>(d, "measured", false);
  r.helps = Get<bool>(d, "helps");
  r.metric = Get<std::string>(d, "metric");
  r.baseline = Get<double>(d, "baseline");
  r.variant = Get<double>(d, "variant");
  r.error = Get<std::string>(d, "error");
  r.command = Get<std::string>(d, "command");
  r.wait_fraction_before = Get<double>(d, "wait_fraction_before");
  r.wait_fraction_after = Get<double>(d, "wait_fraction_after");
  r.native_op = Get<std::string>(d, "native_op");
  return r;
}

// {"stages", "batch_size", "elements_per_s" (iterator elements), "elements",
//  "read_alone_records_per_s", "step"} -> the verdict.
nb::dict Judge(const nb::dict& m) {
  Measurements measurements;
  for (nb::handle s : nb::cast<nb::list>(m["stages"])) {
    measurements.stages.push_back(StageFrom(nb::cast<nb::dict>(s)));
  }
  if (auto b = Get<int64_t>(m, "batch_size")) measurements.batch_size = static_cast<size_t>(*b);
  measurements.alone.elements_per_s = GetOr<double>(m, "elements_per_s", 0);
  measurements.alone.elements = GetOr<uint64_t>(m, "elements", 0);
  measurements.read_alone_records_per_s = Get<double>(m, "read_alone_records_per_s");
  if (m.contains("step") && !m["step"].is_none()) {
    measurements.step = StepFrom(nb::cast<nb::dict>(m["step"]), {}, {});
  }
  measurements.cores = GetOr<int>(m, "cores", 1);
  const Verdict v = pipeline::JudgeMeasurements(measurements);
  nb::dict out;
  if (std::optional<Recommendation> cap = pipeline::CpuCapRecommendation(measurements)) {
    nb::dict r;
    r["id"] = cap->id;
    r["stage"] = nb::none();
    r["title"] = cap->title;
    r["detail"] = cap->detail;
    r["command"] = cap->command.value_or("");
    out["cpu_cap"] = r;
  } else {
    out["cpu_cap"] = nb::none();
  }
  out["verdict"] = v.verdict;
  out["verdict_detail"] = v.detail;
  out["input_bound"] = Opt(v.input_bound);
  out["cause"] = CauseDict(v.cause);
  out["slowest_stage"] = v.slowest_stage;
  out["read_note"] = v.read_note;
  out["rule_cause"] =
      v.rule_cause.id.empty() ? nb::object(nb::none()) : nb::object(CauseDict(v.rule_cause));
  return out;
}

std::vector<size_t> Order(const nb::list& recs) {
  std::vector<Recommendation> items;
  for (nb::handle r : recs) {
    items.push_back(RecommendationFrom(nb::cast<nb::dict>(r)));
    items.back().id = std::to_string(items.size() - 1);  // carries the index through the sort
  }
  pipeline::SortRecommendations(items);
  std::vector<size_t> order;
  for (const Recommendation& r : items) order.push_back(std::stoul(r.id));
  return order;
}

// The report dict of rf.doctor.Report (docs/doctor.md) -> DiagnoseReport.
DiagnoseReport ReportFrom(const nb::dict& d, const std::vector<double>& waits,
                          const std::vector<double>& computes) {
  DiagnoseReport report;
  Measurements& m = report.measurements;
  m.pipeline = GetOr<std::string>(d, "pipeline", "");
  m.cores = GetOr<int>(d, "cores", 1);
  const nb::dict ceiling = nb::cast<nb::dict>(d["ceiling"]);
  if (auto b = Get<int64_t>(ceiling, "batch_size")) m.batch_size = static_cast<size_t>(*b);
  m.alone.elements_per_s = GetOr<double>(ceiling, "iterator_elements_per_s", 0);
  m.alone.seconds = GetOr<double>(ceiling, "seconds", 0);
  m.alone.exhausted = GetOr<bool>(ceiling, "exhausted", false);
  m.alone.time_to_first_element_s = GetOr<double>(d, "time_to_first_element_s", 0);
  for (nb::handle s : nb::cast<nb::list>(d["stages"]))
    m.stages.push_back(StageFrom(nb::cast<nb::dict>(s)));
  if (!d["step"].is_none()) {
    const nb::dict step = nb::cast<nb::dict>(d["step"]);
    m.step = StepFrom(step, waits, computes);
    m.step_mode = GetOr<std::string>(step, "mode", "");
  }
  Verdict& v = report.verdict;
  v.verdict = GetOr<std::string>(d, "verdict", "");
  v.detail = GetOr<std::string>(d, "verdict_detail", "");
  v.input_bound = Get<bool>(d, "input_bound");
  v.cause = CauseFrom(nb::cast<nb::dict>(d["cause"]));
  v.slowest_stage = GetOr<std::string>(d, "slowest_stage", "");
  for (nb::handle r : nb::cast<nb::list>(d["recommendations"])) {
    report.recommendations.push_back(RecommendationFrom(nb::cast<nb::dict>(r)));
  }
  return report;
}

}  // namespace

void RegisterDiagnose(nb::module_& m) {
  m.def("doctor_judge", &Judge, "measurements"_a,
        "The doctor's rules: verdict, cause and slowest stage from measurements.");
  m.def("doctor_order", &Order, "recommendations"_a,
        "Indices of the recommendations in report order (helping first, then estimates, then "
        "measured without gain).");
  m.def(
      "doctor_render_text",
      [](const nb::dict& report) { return pipeline::RenderText(ReportFrom(report, {}, {})); },
      "report"_a);
  m.def(
      "doctor_render_html",
      [](const nb::dict& report, const std::vector<double>& waits,
         const std::vector<double>& computes, const std::string& json) {
        if (waits.size() != computes.size()) {
          ThrowStatus(InvalidArgumentError("waits and computes differ in length"));
        }
        return pipeline::RenderHtml(ReportFrom(report, waits, computes), json);
      },
      "report"_a, "waits"_a, "computes"_a, "json"_a);
  m.def(
      "doctor_reshard_command",
      [](const std::vector<std::string>& paths, double total_bytes,
         const std::string& compression) {
        auto [cmd, n] = pipeline::ReshardCommand(paths, total_bytes, compression);
        return std::make_pair(cmd, n);
      },
      "paths"_a, "total_bytes"_a, "compression"_a = "");
  m.def(
      "doctor_free_gain",
      [](const nb::list& stages, const std::string& stage_id, std::optional<double> records_per_s) {
        std::vector<StageMeasurement> items;
        for (nb::handle s : stages) items.push_back(StageFrom(nb::cast<nb::dict>(s)));
        return pipeline::FreeGain(items, stage_id, records_per_s);
      },
      "stages"_a, "stage_id"_a, "records_per_s"_a.none(),
      "Estimated upper bound of the speed-up if the stage cost nothing, in [1, 10].");
  m.attr("DOCTOR_RESHARD_TARGET_BYTES") = pipeline::kReshardTargetBytes;
  nb::dict thresholds;
  thresholds["input_bound_wait_fraction"] = pipeline::kInputBoundWaitFraction;
  thresholds["helps_gain"] = pipeline::kHelpsGain;
  thresholds["keeps_up_margin"] = pipeline::kKeepsUpMargin;
  thresholds["read_headroom"] = pipeline::kReadHeadroom;
  thresholds["gain_cap"] = pipeline::kGainCap;
  m.attr("DOCTOR_THRESHOLDS") = thresholds;
}

}  // namespace recordflow::python
