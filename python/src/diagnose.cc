// Binding of the doctor's rules and report (include/recordflow/pipeline/diagnose.h), so that
// rf.diagnose and `recordflow doctor` share one implementation: Python measures its own
// stages, then hands the measurements over as plain dicts (the fields of docs/doctor.md).
//   _core.doctor_judge(measurements) -> verdict dict
//   _core.doctor_order(recommendations) -> indices in report order
//   _core.doctor_render_text(report) / _core.doctor_render_html(report, waits, computes, json)
//   _core.doctor_reshard_command(paths, total_bytes, compression) -> (command, shards)
//   _core.doctor_diagnose(files..., steps, ..., records) -> (report JSON, waits, computes): a
//     native pipeline (or the native stages before a Python one) run by pipeline::Diagnose
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "columns.h"
#include "errors.h"
#include "native_op.h"
#include "recordflow/format/compression.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/io/glob.h"
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
  m.measured_by = GetOr<std::string>(d, "measured_by", "python");
  if (auto native = Get<nb::dict>(d, "native_stages")) {
    m.native_pipeline = GetOr<std::string>(*native, "pipeline", "");
    m.native_elements_per_s = Get<double>(*native, "elements_per_s");
  }
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

// One Dataset call of rf.Dataset's native stages, as run.py's _native_plan spells it:
// (name, args...), with the arguments _lowering.lower() gives the same call.
pipeline::PlanStep PlanStepFrom(const nb::tuple& t) {
  using K = pipeline::PlanStep::Kind;
  const std::string kind = nb::cast<std::string>(t[0]);
  pipeline::PlanStep s;
  if (kind == "shard") {
    s.kind = K::kShard;
    s.count = nb::cast<int64_t>(t[1]);
    s.index = nb::cast<int64_t>(t[2]);
  } else if (kind == "interleave") {
    s.kind = K::kInterleave;
    s.interleave = {nb::cast<int>(t[1]), nb::cast<int>(t[2]), nb::cast<int>(t[3]),
                    nb::cast<bool>(t[4])};
  } else if (kind == "shuffle") {
    s.kind = K::kShuffle;
    s.shuffle = {nb::cast<size_t>(t[1]), nb::cast<std::optional<uint64_t>>(t[2]),
                 nb::cast<bool>(t[3])};
  } else if (kind == "global_shuffle") {
    s.kind = K::kGlobalShuffle;
    s.shuffle.seed = nb::cast<std::optional<uint64_t>>(t[1]);
    s.shuffle.reshuffle_each_iteration = nb::cast<bool>(t[2]);
  } else if (kind == "repeat" || kind == "take" || kind == "skip" || kind == "prefetch") {
    s.kind = kind == "repeat" ? K::kRepeat
             : kind == "take" ? K::kTake
             : kind == "skip" ? K::kSkip
                              : K::kPrefetch;
    s.count = nb::cast<int64_t>(t[1]);
  } else if (kind == "cache") {
    s.kind = K::kCache;
    s.cache_path = nb::cast<std::string>(t[1]);
  } else if (kind == "parse") {
    s.kind = K::kParse;
    s.specs = ToSpecs(nb::cast<nb::list>(t[1]));
    s.bytes_as_views = true;  // as rf.Dataset's pipeline parses (PipelineDataset.parse)
  } else if (kind == "map") {
    s.kind = K::kMap;
    const NativeMapOp& op = nb::cast<const NativeMapOp&>(t[1]);
    s.map = op.fn;
    s.map_name = op.name;
    s.map_options = {nb::cast<int>(t[2]), op.splits_batches, op.elementwise};
  } else if (kind == "batch") {
    s.kind = K::kBatch;
    s.count = nb::cast<int64_t>(t[1]);
    s.drop_remainder = nb::cast<bool>(t[2]);
  } else {
    ThrowStatus(InvalidArgumentError("the doctor has no native step '" + kind + "'"));
  }
  return s;
}

std::tuple<std::string, std::vector<double>, std::vector<double>> DiagnoseNative(
    const std::vector<std::string>& paths, std::optional<std::string> compression,
    bool shuffle_files, std::optional<uint64_t> seed, const std::string& on_corruption,
    bool verify_checksums, const nb::list& steps, double seconds,
    std::optional<double> variant_seconds, std::optional<double> step_seconds, bool try_variants,
    nb::object log, std::optional<nb::list> records, int max_threads, double max_cpu_fraction) {
  pipeline::PipelinePlan plan;
  if (records) {  // Dataset.from_records: the records in place of the files
    auto held = std::make_shared<std::vector<std::string>>();
    for (nb::handle r : *records) {
      char* data;
      Py_ssize_t size;
      if (PyBytes_AsStringAndSize(r.ptr(), &data, &size) != 0) throw nb::python_error();
      held->emplace_back(data, static_cast<size_t>(size));
    }
    plan.records = std::move(held);
  }
  plan.files_options.compression =
      compression && !compression->empty()
          ? std::optional(ValueOrThrow(format::ParseCompression(*compression)))
          : std::nullopt;
  plan.files_options.shuffle_files = shuffle_files;
  plan.files_options.seed = seed;
  plan.files_options.on_corruption = ValueOrThrow(format::ParseCorruptionPolicy(on_corruption));
  plan.files_options.verify_checksums = verify_checksums;
  for (nb::handle step : steps) plan.steps.push_back(PlanStepFrom(nb::cast<nb::tuple>(step)));
  pipeline::DiagnoseOptions options;
  options.seconds = seconds;
  options.variant_seconds = variant_seconds;
  options.step_seconds = step_seconds;
  options.try_variants = try_variants;
  options.iterator.max_threads = max_threads;  // the Dataset's with_options caps
  options.iterator.max_cpu_fraction = max_cpu_fraction;
  if (!log.is_none()) {
    // Held through a shared_ptr: copies of options.log made without the GIL touch no Python
    // reference count; the last reference goes with `options`, with the GIL held.
    auto callback = std::make_shared<nb::object>(std::move(log));
    options.log = [callback](std::string_view line) {
      nb::gil_scoped_acquire acquire;
      try {
        (*callback)(std::string(line));
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("rf.diagnose log");
      }
    };
  }
  DiagnoseReport r = ValueOrThrow(WithoutGil([&]() -> Result<DiagnoseReport> {
    if (!plan.records) {
      RF_ASSIGN_OR_RETURN(plan.files, io::ExpandGlobs(paths));
    }
    return pipeline::Diagnose(plan, options);
  }));
  std::vector<double> waits, computes;
  if (r.measurements.step) {
    waits = r.measurements.step->waits;
    computes = r.measurements.step->computes;
  }
  return {pipeline::RenderJson(r), std::move(waits), std::move(computes)};
}

}  // namespace

void RegisterDiagnose(nb::module_& m) {
  m.def("doctor_diagnose", &DiagnoseNative, "paths"_a, "compression"_a.none(), "shuffle_files"_a,
        "seed"_a.none(), "on_corruption"_a, "verify_checksums"_a, "steps"_a, "seconds"_a,
        "variant_seconds"_a.none(), "step_seconds"_a.none(), "try_variants"_a, "log"_a.none(),
        "records"_a.none() = nb::none(), "max_threads"_a = 0, "max_cpu_fraction"_a = 0.0,
        "pipeline::Diagnose on a native pipeline (on `records` in place of the files when given): "
        "(report JSON, step waits, step computes).");
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
