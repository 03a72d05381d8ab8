// The doctor: does a training step wait on the input pipeline, where, and what would help.
//
// A native pipeline is given as a PipelinePlan (the files and the Dataset calls as data, so
// that the doctor can rebuild it with one change). Diagnose() runs it in three phases:
//
//   1. alone: as fast as it goes; the ceiling, the time to the first element, and each
//      stage's utilization from Iterator::stats();
//   2. with the step (a simulated step: a sleep, which uses no CPU, as a step on an
//      accelerator does): per step, the time GetNext waited and the time the step took;
//   3. variants: for the cause found, the plan rebuilt with one change and timed, so that
//      every recommendation carries a measured gain (or an estimate, labelled as one).
//
// The measurements are plain structs. The rules (JudgeMeasurements, SortRecommendations)
// are pure functions of them, tested on recorded measurements; RenderText / RenderJson /
// RenderHtml turn a DiagnoseReport into the report of docs/doctor.md. `recordflow doctor`
// is this, with the preset plans of docs/doctor.md.
//
// Thread safety: Diagnose() is thread-compatible (it runs iterators of its own); the pure
// functions are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/example/parse.h"
#include "recordflow/pipeline/dataset.h"

namespace recordflow::pipeline {

// The thresholds of the rules (docs/doctor.md, "How to read the verdict").
inline constexpr double kInputBoundWaitFraction = 0.10;  // the step waits >= 10%: input-bound
inline constexpr double kHelpsGain = 1.10;  // a measured gain under this is run-to-run noise
inline constexpr double kKeepsUpMargin =
    1.25;                                     // ceiling / step rate at which the pipeline keeps up
inline constexpr double kReadHeadroom = 1.5;  // the stream alone this much faster: not the limit
inline constexpr double kGainCap = 10.0;      // estimated upper bounds stop here
inline constexpr uint64_t kReshardTargetBytes = uint64_t{128} << 20;
// The step's own CPU time over its wall time at or above this: the step is CPU-heavy, and the
// pipeline's threads compete with it for cores (recommend IteratorOptions::max_cpu_fraction).
inline constexpr double kCpuHeavyStepShare = 0.5;

// One Dataset call after the source.
struct PlanStep {
  enum class Kind {
    kShard,
    kInterleave,
    kShuffle,
    kGlobalShuffle,
    kRepeat,
    kTake,
    kSkip,
    kCache,
    kParse,
    kMap,
    kBatch,
    kPrefetch
  };
  Kind kind = Kind::kRepeat;
  int64_t count = -1;  // shard: num_shards; repeat/take/skip: count; batch: size;
                       // prefetch: buffer size (kAutotune)
  int64_t index = 0;   // shard: index
  bool drop_remainder = false;
  InterleaveOptions interleave;
  ShuffleOptions shuffle;  // shuffle; global_shuffle: its seed and reshuffle_each_iteration
  std::string cache_path;
  std::vector<example::FeatureSpec> specs;  // parse
  bool bytes_as_views = false;              // parse: Dataset::Parse's (rf.Dataset's parse sets it)
  MapFn map;
  std::string map_name;  // e.g. "imagenet_eval(224, 256)": the rules read presets from it
  MapOptions map_options;
};

// A native pipeline as data: Dataset::FromFiles(files, files_options), or
// Dataset::FromRecords(*records) when `records` is set, then `steps`.
struct PipelinePlan {
  std::vector<std::string> files;  // paths (globs expanded)
  FilesOptions files_options;
  // In-memory records in place of the files (shared: the variants copy the plan).
  std::shared_ptr<const std::vector<std::string>> records;
  std::vector<PlanStep> steps;

  // The Dataset. Errors: those of the Dataset calls.
  Result<Dataset> Build() const;
  // The last batch's size; nullopt without a batch.
  std::optional<size_t> BatchSize() const;
  // Whether the files are GZIP/ZLIB (the option, else the file names).
  bool Compressed() const;
};

// ---- measurements ---------------------------------------------------------------------------

// One row of the stages table (docs/doctor.md lists the ids).
struct StageMeasurement {
  std::string id;    // "read", "process", "prefetch"
  std::string kind;  // "native"
  std::string name;
  uint64_t elements = 0;
  std::optional<double> busy_seconds;
  std::optional<double> wait_output_seconds;
  int parallelism = 0;
  std::optional<int> buffer_size;
  std::optional<double> buffer_fill;
  std::optional<double> utilization;
  std::optional<double> seconds_per_element;
  std::optional<double> alone_records_per_s;  // read: the stream timed alone
  std::string utilization_note;
};

// The pipeline iterated alone.
struct AloneRun {
  double time_to_first_element_s = 0;
  uint64_t elements = 0;      // including the first
  double seconds = 0;         // from the iterator's creation to the end
  double elements_per_s = 0;  // counted from the first element on
  bool exhausted = false;
  uint64_t element_bytes = 0;  // of the first element
  PipelineStats stats;
};

// The pipeline iterated with the step; the first element (start-up) is left out.
struct StepRun {
  uint64_t steps = 0;
  double wait_s = 0;
  double compute_s = 0;
  double wait_fraction = 0;
  double steps_per_s = 0;
  double mean_wait_ms = 0;
  double mean_compute_ms = 0;
  double max_compute_ms = 0;
  std::vector<double> waits;     // seconds, per step
  std::vector<double> computes;  // seconds, per step
  // CPU seconds the step itself used over all steps (its thread's CPU time; threads it starts
  // are not seen); nullopt when not measured. A simulated step (a sleep) uses none.
  std::optional<double> step_cpu_s;
};

// Everything the rules look at.
struct Measurements {
  std::string pipeline;  // Dataset::DebugString()
  int cores = 1;
  std::optional<size_t> batch_size;
  AloneRun alone;
  std::vector<StageMeasurement> stages;
  std::optional<double> read_alone_records_per_s;
  std::optional<StepRun> step;
  std::string step_mode;  // e.g. "simulated 120 ms step"
  // Who measured: "engine" (Diagnose), "engine+python" (rf.diagnose of a pipeline with a
  // Python tail or a Python step: the native stages by Diagnose, the tail, the loop and the
  // step in Python) or "python".
  std::string measured_by = "engine";
  // With "engine+python": the native stages Diagnose ran on their own (their DebugString) and
  // their elements/s alone; empty / nullopt otherwise.
  std::string native_pipeline;
  std::optional<double> native_elements_per_s;
};

struct Cause {
  std::string id;                    // step, prefetch, read, process
  std::optional<std::string> stage;  // the stage id it points at (none for "step")
  std::string explanation;
  std::optional<double> ceiling_over_demand;
  bool borderline = false;
};

struct Verdict {
  std::string verdict;  // "input-bound", "not input-bound", "no step given"
  std::string detail;
  std::optional<bool> input_bound;
  Cause cause;
  std::string slowest_stage;
  // Set when the stream timed alone shows that `read` is not the limit (for the stages table).
  std::string read_note;
  // The cause the recommendations are for (the slowest stage's for a borderline step); empty
  // id: none are made.
  Cause rule_cause;
};

struct Recommendation {
  std::string id;
  std::optional<std::string> stage;
  std::string title;
  std::string detail;
  std::optional<double> gain;
  bool measured = false;
  std::optional<bool> helps;
  std::optional<std::string> metric;  // "elements_per_s" or "steps_per_s"
  std::optional<double> baseline;
  std::optional<double> variant;
  std::optional<std::string> error;  // "StatusName: message" of a variant that failed to run
  std::optional<std::string> command;
  std::optional<double> wait_fraction_before;
  std::optional<double> wait_fraction_after;
  std::optional<std::string> native_op;  // python_map_native: the op that replaces the map
};

// The stage utilizations of an alone run: `read` is busy / wall (one producer thread),
// `process` busy / (wall x threads), `prefetch` has none (not a work stage).
std::vector<StageMeasurement> StagesFromStats(const PipelineStats& stats);

// The rules: verdict, cause and slowest stage from measurements. Pure (no clock, no I/O).
// `m.stages` must hold at least one stage with a utilization.
Verdict JudgeMeasurements(const Measurements& m);

// Estimated speed-up if stage `stage_id` cost nothing: the next limit then sets the pace (a
// stage timed alone: its rate over `records_per_s`; the others: 1 / utilization, counted when
// above 10%). An upper bound in [1, kGainCap].
double FreeGain(const std::vector<StageMeasurement>& stages, const std::string& stage_id,
                std::optional<double> records_per_s);

// The CPU cap rule: when the step is CPU-heavy (step_cpu_s / compute_s >=
// kCpuHeavyStepShare) on a machine of more than one core, a "cap_cpu" recommendation of
// IteratorOptions::max_cpu_fraction that leaves the step the cores it uses (at most 40% of the
// cores for loading when the step keeps one busy or more); nullopt otherwise. Pure.
std::optional<Recommendation> CpuCapRecommendation(const Measurements& m);

// Measured gains that help first, then estimates, then what was measured not to help; each
// group by decreasing gain.
void SortRecommendations(std::vector<Recommendation>& recs);

// A recommendation entry; `helps` follows from gain and measured.
Recommendation MakeRecommendation(std::string id, std::optional<std::string> stage,
                                  std::string title, std::string detail,
                                  std::optional<double> gain = std::nullopt, bool measured = false);

// The `recordflow reshard` command line that rewrites `paths` (`total_bytes` of output) into
// shards of about kReshardTargetBytes, and its shard count. The files are one glob when
// `dir/*suffix` matches exactly them.
std::pair<std::string, uint64_t> ReshardCommand(const std::vector<std::string>& paths,
                                                double total_bytes,
                                                std::string_view compression = {});

// ---- running --------------------------------------------------------------------------------

// Called with each element during the step phase; returns the step's error, which stops it.
using StepFn = std::function<Status(const Element& element)>;

struct DiagnoseOptions {
  double seconds = 3.0;                   // each main phase
  std::optional<double> variant_seconds;  // each variant; nullopt: min(seconds, 2)
  std::optional<double> step_seconds;     // a simulated step (sleep)
  StepFn step;                            // or a real one (not both)
  std::string step_name = "step";
  bool try_variants = true;  // false: the rules' advice without numbers
  // Every iterator Diagnose runs (the phases, the stream alone, the variants) is made with
  // these: a pipeline capped with max_threads / max_cpu_fraction is measured as it runs.
  IteratorOptions iterator;
  std::function<void(std::string_view)> log;  // progress lines; may be empty
};

struct DiagnoseReport {
  Measurements measurements;
  Verdict verdict;
  std::vector<Recommendation> recommendations;
};

// Errors: kInvalidArgument for bad options or a pipeline that yields no elements; those of
// building and iterating the pipeline (a failed variant is a recommendation's `error`).
Result<DiagnoseReport> Diagnose(const PipelinePlan& plan, const DiagnoseOptions& options = {});

// Runs `dataset` alone for `seconds` after its first element.
Result<AloneRun> RunAlone(const Dataset& dataset, double seconds,
                          const IteratorOptions& iterator = {});
// Runs `dataset` with `step` on each element for `seconds` after the first.
Result<StepRun> RunWithStep(const Dataset& dataset, const StepFn& step, double seconds,
                            const IteratorOptions& iterator = {});

// ---- the report -----------------------------------------------------------------------------

// The terminal report.
std::string RenderText(const DiagnoseReport& report);
// The report as a JSON object (docs/doctor.md lists the fields); `extra` members (already
// encoded "\"key\": value" pairs) are appended.
std::string RenderJson(const DiagnoseReport& report,
                       const std::vector<std::pair<std::string, std::string>>& extra = {});
// One self-contained page: verdict, what would help, the per-step timeline, stages, text, JSON.
// `json`: the JSON section's text; empty: RenderJson(report).
std::string RenderHtml(const DiagnoseReport& report, const std::string& json = {});

}  // namespace recordflow::pipeline
