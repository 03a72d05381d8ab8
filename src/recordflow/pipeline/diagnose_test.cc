// The doctor's rules on recorded measurements (no clock), its report, and short real runs.
#include "recordflow/pipeline/diagnose.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "diagnose_internal.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_test_util.h"
#include "recordflow/format/record_writer.h"

namespace recordflow::pipeline {
namespace {

using format::testing::Bytes;
using format::testing::MakeTempDir;

StageMeasurement Stage(std::string id, double utilization, std::string name = "") {
  StageMeasurement s;
  s.id = std::move(id);
  s.kind = "native";
  s.name = name.empty() ? s.id : std::move(name);
  s.utilization = utilization;
  s.busy_seconds = utilization;
  return s;
}

// A recorded measurement: a pipeline of 100 batches/s of 32 whose decode stage is busiest.
Measurements Recorded() {
  Measurements m;
  m.pipeline = "files(4) -> repeat -> batch(32) -> imagenet_eval(224, 256) -> prefetch(autotune)";
  m.cores = 4;
  m.batch_size = 32;
  m.alone.elements_per_s = 100;
  m.alone.elements = 300;
  m.alone.seconds = 3;
  m.stages = {Stage("read", 0.30, "files(4) -> repeat"), Stage("process", 0.95, "imagenet_eval"),
              Stage("prefetch", 0)};
  m.stages[2].utilization.reset();
  return m;
}

StepRun Step(double wait_ms, double compute_ms, int steps = 100) {
  StepRun s;
  s.steps = static_cast<uint64_t>(steps);
  s.waits.assign(static_cast<size_t>(steps), wait_ms / 1e3);
  s.computes.assign(static_cast<size_t>(steps), compute_ms / 1e3);
  s.wait_s = steps * wait_ms / 1e3;
  s.compute_s = steps * compute_ms / 1e3;
  s.wait_fraction = wait_ms / (wait_ms + compute_ms);
  s.steps_per_s = 1e3 / (wait_ms + compute_ms);
  s.mean_wait_ms = wait_ms;
  s.mean_compute_ms = compute_ms;
  s.max_compute_ms = compute_ms;
  return s;
}

TEST(DiagnoseRulesTest, WithoutAStepTheSlowestStageSetsTheCeiling) {
  const Verdict v = JudgeMeasurements(Recorded());
  EXPECT_EQ(v.verdict, "no step given");
  EXPECT_FALSE(v.input_bound.has_value());
  EXPECT_EQ(v.slowest_stage, "process");
  EXPECT_EQ(v.cause.id, "process");
  EXPECT_EQ(v.rule_cause.id, "process");
  EXPECT_NE(v.cause.explanation.find("[process] imagenet_eval (95% busy)"), std::string::npos);
}

TEST(DiagnoseRulesTest, AStepFasterThanThePipelineIsInputBoundOnTheSlowestStage) {
  Measurements m = Recorded();
  m.step = Step(/*wait_ms=*/8, /*compute_ms=*/2);  // the step wants 500/s, the pipeline gives 100
  const Verdict v = JudgeMeasurements(m);
  EXPECT_EQ(v.verdict, "input-bound");
  EXPECT_EQ(v.input_bound, true);
  EXPECT_EQ(v.cause.id, "process");
  ASSERT_TRUE(v.cause.ceiling_over_demand.has_value());
  EXPECT_NEAR(*v.cause.ceiling_over_demand, 0.2, 1e-9);
  EXPECT_NE(v.cause.explanation.find("cannot keep up (0.20x"), std::string::npos);
  EXPECT_EQ(v.rule_cause.id, "process");
}

TEST(DiagnoseRulesTest, WaitingWhileKeepingUpOnAverageIsThePrefetchBuffer) {
  Measurements m = Recorded();
  m.step = Step(/*wait_ms=*/3, /*compute_ms=*/20);  // 50/s wanted, 100/s possible: 2x
  const Verdict v = JudgeMeasurements(m);
  EXPECT_EQ(v.verdict, "input-bound");
  EXPECT_EQ(v.cause.id, "prefetch");
  EXPECT_EQ(v.cause.stage, "prefetch");
  EXPECT_NEAR(*v.cause.ceiling_over_demand, 2.0, 1e-9);
}

TEST(DiagnoseRulesTest, TheInputBoundThresholdIsTenPercent) {
  Measurements m = Recorded();
  m.step = Step(1, 9);  // exactly 10%
  EXPECT_EQ(JudgeMeasurements(m).verdict, "input-bound");
  m.step = Step(0.99, 9.01);
  EXPECT_EQ(JudgeMeasurements(m).verdict, "not input-bound");
}

TEST(DiagnoseRulesTest, NotInputBoundWithHeadroomMakesNoRecommendations) {
  Measurements m = Recorded();
  m.step = Step(0.1, 100);  // 10/s wanted, 100/s possible
  const Verdict v = JudgeMeasurements(m);
  EXPECT_EQ(v.verdict, "not input-bound");
  EXPECT_EQ(v.cause.id, "step");
  EXPECT_FALSE(v.cause.stage.has_value());
  EXPECT_FALSE(v.cause.borderline);
  EXPECT_TRUE(v.rule_cause.id.empty());
}

TEST(DiagnoseRulesTest, NotInputBoundWithoutMarginIsBorderlineAndAdvisedOnTheSlowestStage) {
  Measurements m = Recorded();
  m.step = Step(0.5, 11);  // 90.9/s wanted, 100/s possible: 1.1x < 1.25x
  const Verdict v = JudgeMeasurements(m);
  EXPECT_EQ(v.verdict, "not input-bound");
  EXPECT_TRUE(v.cause.borderline);
  EXPECT_NE(v.detail.find("no margin (1.10x"), std::string::npos) << v.detail;
  EXPECT_EQ(v.rule_cause.id, "process");
}

TEST(DiagnoseRulesTest, AStreamFarFasterAloneIsNotTheSlowestStage) {
  Measurements m = Recorded();
  m.stages[0].utilization = 0.99;               // read looks busiest ...
  m.read_alone_records_per_s = 100 * 32 * 1.5;  // ... but alone gives 1.5x the records
  Verdict v = JudgeMeasurements(m);
  EXPECT_EQ(v.slowest_stage, "process");
  EXPECT_NE(v.read_note.find("4,800 records/s, 1.5x"), std::string::npos) << v.read_note;
  m.read_alone_records_per_s = 100 * 32 * 1.49;
  v = JudgeMeasurements(m);
  EXPECT_EQ(v.slowest_stage, "read");
  EXPECT_TRUE(v.read_note.empty());
}

TEST(DiagnoseRulesTest, APythonStageInSeriesWithTheStepIsTheCause) {
  Measurements m = Recorded();
  StageMeasurement py = Stage("python_map_0", 0.5, "python map(augment)");
  py.kind = "python_map";
  py.busy_seconds = 300 * 0.004;  // 4 ms per element
  py.parallelism = 1;
  m.stages.push_back(py);
  m.step = Step(/*wait_ms=*/6, /*compute_ms=*/20);
  const Verdict v = JudgeMeasurements(m);
  EXPECT_EQ(v.cause.id, "python_map");
  EXPECT_EQ(v.cause.stage, "python_map_0");
  EXPECT_NE(v.cause.explanation.find("4.00 ms of the 6.00 ms"), std::string::npos);
}

TEST(DiagnoseRulesTest, RecommendationsHelpingFirstThenEstimatesThenNoGain) {
  std::vector<Recommendation> recs = {MakeRecommendation("no_gain", "read", "t", "d", 1.05, true),
                                      MakeRecommendation("estimate", "read", "t", "d", 3.0, false),
                                      MakeRecommendation("small_help", "read", "t", "d", 1.2, true),
                                      MakeRecommendation("big_help", "read", "t", "d", 2.5, true),
                                      MakeRecommendation("no_number", "read", "t", "d")};
  EXPECT_EQ(recs[0].helps, false);
  EXPECT_EQ(recs[3].helps, true);
  EXPECT_FALSE(recs[1].helps.has_value());
  SortRecommendations(recs);
  std::vector<std::string> ids;
  for (const Recommendation& r : recs) ids.push_back(r.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"big_help", "small_help", "estimate", "no_number",
                                           "no_gain"}));
}

TEST(DiagnoseRulesTest, FreeGainIsTheNextLimitCapped) {
  std::vector<StageMeasurement> stages = {Stage("read", 0.25), Stage("process", 0.9)};
  EXPECT_NEAR(FreeGain(stages, "process", 100.0), 4.0, 1e-9);
  stages[0].alone_records_per_s = 250;
  EXPECT_NEAR(FreeGain(stages, "process", 100.0), 2.5, 1e-9);
  stages[0].alone_records_per_s.reset();
  stages[0].utilization = 0.01;  // below 10%: says nothing
  EXPECT_NEAR(FreeGain(stages, "process", 100.0), kGainCap, 1e-9);
}

TEST(DiagnoseRulesTest, StagesFromStatsUtilizations) {
  PipelineStats stats;
  stats.wall_seconds = 2;
  stats.stages.resize(3);
  stats.stages[0].busy_seconds = 1;
  stats.stages[1].busy_seconds = 4;
  stats.stages[1].parallelism = 4;
  stats.stages[2].buffer_fill = 0.5;
  stats.stages[2].buffer_size = 8;
  const std::vector<StageMeasurement> s = StagesFromStats(stats);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].id, "read");
  EXPECT_DOUBLE_EQ(*s[0].utilization, 0.5);
  EXPECT_DOUBLE_EQ(*s[1].utilization, 0.5);
  EXPECT_FALSE(s[2].utilization.has_value());
  EXPECT_DOUBLE_EQ(*s[2].buffer_fill, 0.5);
  EXPECT_FALSE(s[0].buffer_fill.has_value());
}

TEST(DiagnoseReportTest, TextJsonAndHtmlOfARecordedReport) {
  DiagnoseReport report;
  report.measurements = Recorded();
  report.measurements.step = Step(8, 2, 7);
  report.measurements.step_mode = "simulated 2 ms step";
  report.verdict = JudgeMeasurements(report.measurements);
  Recommendation r = MakeRecommendation("decode_on_gpu", "process", "decode <on> GPU", "d", 12.0);
  report.recommendations.push_back(r);
  const std::string text = RenderText(report);
  EXPECT_NE(text.find("VERDICT: INPUT-BOUND - the step waits for data 80.0% of the time"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("3,200 elements/s (100 batches/s of 32)"), std::string::npos) << text;
  EXPECT_NE(text.find("estimated up to 10x or more (capped)"), std::string::npos);
  EXPECT_NE(text.find("<- slowest"), std::string::npos);

  const std::string json = RenderJson(report, {{"preset", "\"parse\""}});
  EXPECT_NE(json.find("\"verdict\": \"input-bound\""), std::string::npos);
  EXPECT_NE(json.find("\"input_bound\": true"), std::string::npos);
  EXPECT_NE(json.find("\"batch_size\": 32"), std::string::npos);
  EXPECT_NE(json.find("\"steps\": 7"), std::string::npos);
  EXPECT_NE(json.find("\"helps\": null"), std::string::npos);
  EXPECT_NE(json.find("\"preset\": \"parse\"\n}"), std::string::npos) << json;

  const std::string page = RenderHtml(report);
  size_t rects = 0;
  for (size_t at = page.find("<rect"); at != std::string::npos; at = page.find("<rect", at + 1)) {
    ++rects;
  }
  EXPECT_EQ(rects, 2u * 7u);
  const size_t verdict = page.find("Verdict: INPUT-BOUND");
  const size_t svg = page.find("<svg");
  ASSERT_NE(verdict, std::string::npos);
  EXPECT_LT(verdict, page.find("Cause:"));
  EXPECT_LT(page.find("Cause:"), svg);
  EXPECT_NE(page.find("time since the first step (s)", svg), std::string::npos);
  EXPECT_NE(page.find("step time (ms)", svg), std::string::npos);
  EXPECT_NE(page.find("decode &lt;on&gt; GPU"), std::string::npos);  // escaped
  EXPECT_EQ(page.find("decode <on> GPU"), std::string::npos);
}

TEST(DiagnoseReportTest, APythonTailsReportSaysWhichRunMeasuredWhat) {
  DiagnoseReport report;
  report.measurements = Recorded();
  report.verdict = JudgeMeasurements(report.measurements);
  std::string text = RenderText(report);
  EXPECT_EQ(text.find("native stages measured by the engine"), std::string::npos) << text;
  EXPECT_NE(RenderJson(report).find("\"measured_by\": \"engine\""), std::string::npos);

  report.measurements.measured_by = "engine+python";
  report.measurements.native_pipeline = "files(4) -> repeat -> parse(x)";
  report.measurements.native_elements_per_s = 12500;
  text = RenderText(report);
  EXPECT_NE(text.find("native stages measured by the engine, alone: files(4) -> repeat -> "
                      "parse(x) at 12,500 elements/s; Python stages timed in Python"),
            std::string::npos)
      << text;
  EXPECT_NE(RenderJson(report).find("\"measured_by\": \"engine+python\""), std::string::npos);
}

TEST(DiagnoseReportTest, ReshardCommandIsOneGlobAndShardsFollowTheBytes) {
  const std::string dir = MakeTempDir();
  std::vector<std::string> paths;
  for (int f = 0; f < 3; ++f) {
    paths.push_back(dir + "/part-" + std::to_string(f) + ".tfrecord.gz");
    auto w = format::RecordWriter::Open(paths.back());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto [cmd, n] = ReshardCommand(paths, 300.0 * (1 << 20), "GZIP");
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(cmd, "recordflow reshard " + dir + "/*.tfrecord.gz " + dir +
                     "/resharded --shards 3 --compression GZIP");
  auto [one, n1] = ReshardCommand({paths[0], paths[1]}, 10);  // the glob would match 3: listed
  EXPECT_EQ(n1, 1u);
  EXPECT_EQ(
      one, "recordflow reshard " + paths[0] + " " + paths[1] + " " + dir + "/resharded --shards 1");
}

std::vector<std::string> WriteFiles(const std::string& dir, int files, int records) {
  std::vector<std::string> paths;
  for (int f = 0; f < files; ++f) {
    paths.push_back(dir + "/part-" + std::to_string(f) + ".tfrecord");
    auto w = format::RecordWriter::Open(paths.back());
    for (int j = 0; j < records; ++j) {
      example::Features features;
      features["x"] = example::Feature::Int64s({f * 1000 + j});
      EXPECT_TRUE((*w)->WriteRecord(Bytes(example::SerializeExample(features))).ok());
    }
    EXPECT_TRUE((*w)->Close().ok());
  }
  return paths;
}

PlanStep Step(PlanStep::Kind kind, int64_t count = -1) {
  PlanStep s;
  s.kind = kind;
  s.count = count;
  return s;
}

// Two files of 64 records, repeated, batched by 8, parsed ("x": int64) and prefetched.
PipelinePlan RepeatBatchParsePrefetch() {
  PipelinePlan plan;
  plan.files = WriteFiles(MakeTempDir(), 2, 64);
  plan.steps = {Step(PlanStep::Kind::kRepeat), Step(PlanStep::Kind::kBatch, 8)};
  PlanStep parse = Step(PlanStep::Kind::kParse);
  parse.specs = {example::FeatureSpec::FixedLen("x", example::DType::kInt64)};
  plan.steps.push_back(parse);
  plan.steps.push_back(Step(PlanStep::Kind::kPrefetch, kAutotune));
  return plan;
}

TEST(DiagnoseTest, ARealRunMeasuresStagesAndTheStep) {
  PipelinePlan plan = RepeatBatchParsePrefetch();
  DiagnoseOptions options;
  options.seconds = 0.2;
  options.step_seconds = 0.002;
  options.try_variants = false;
  Result<DiagnoseReport> report = Diagnose(plan, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Measurements& m = report->measurements;
  ASSERT_GE(m.stages.size(), 3u);
  EXPECT_EQ(m.stages[0].id, "read");
  EXPECT_NE(m.stages[0].name.find("files(2"), std::string::npos);
  EXPECT_EQ(m.stages[1].id, "process");
  EXPECT_EQ(m.batch_size, 8u);
  EXPECT_GT(m.alone.elements_per_s, 0);
  ASSERT_TRUE(m.step.has_value());
  EXPECT_GT(m.step->steps, 0u);
  EXPECT_EQ(m.step->waits.size(), m.step->steps);
  EXPECT_GE(m.step->mean_compute_ms, 2.0);  // the simulated step sleeps 2 ms
  EXPECT_TRUE(m.read_alone_records_per_s.has_value());
  EXPECT_TRUE(report->verdict.input_bound.has_value());
}

TEST(DiagnoseTest, BadOptionsAndEmptyPipelinesAreInvalidArgument) {
  PipelinePlan plan;
  plan.files = WriteFiles(MakeTempDir(), 1, 0);
  DiagnoseOptions options;
  options.seconds = 0.1;
  Result<DiagnoseReport> empty = Diagnose(plan, options);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("no elements"), std::string::npos);
  options.step_seconds = 0.1;
  options.step = [](const Element&) { return Status(); };
  EXPECT_EQ(Diagnose(plan, options).status().code(), StatusCode::kInvalidArgument);
  options = {};
  options.seconds = 0;
  EXPECT_EQ(Diagnose(plan, options).status().code(), StatusCode::kInvalidArgument);
  plan.files = {"/no/such/file.tfrecord"};
  options.seconds = 0.1;
  EXPECT_EQ(Diagnose(plan, options).status().code(), StatusCode::kNotFound);
}

TEST(DiagnoseTest, ReadCauseOnManyFilesAdvisesParallelReadsAndMeasuresThem) {
  const std::string dir = MakeTempDir();
  Measurements m;
  m.cores = 2;
  m.alone.elements_per_s = 10;
  PipelinePlan plan;
  plan.files = WriteFiles(dir, 4, 32);
  plan.steps = {Step(PlanStep::Kind::kRepeat), Step(PlanStep::Kind::kBatch, 8)};
  Cause cause{"read", "read", "", std::nullopt, false};
  StepFn no_step;
  internal::VariantContext advice{plan, m, cause, no_step, 0.0, [](const std::string&) {}};
  std::vector<Recommendation> recs = internal::Recommend(advice);
  auto find = [&](const std::string& id) {
    return std::find_if(recs.begin(), recs.end(),
                        [&](const Recommendation& r) { return r.id == id; });
  };
  ASSERT_NE(find("parallel_reads"), recs.end());
  EXPECT_EQ(find("parallel_reads")->title,
            "read files in parallel: .interleave(cycle_length=4) after from_files");
  EXPECT_FALSE(find("parallel_reads")->measured);
  ASSERT_NE(find("fewer_larger_files"), recs.end());  // 4 small files
  EXPECT_EQ(*find("fewer_larger_files")->command,
            "recordflow reshard " + dir + "/*.tfrecord " + dir + "/resharded --shards 1");
  ASSERT_NE(find("cache"), recs.end());  // repeat without cache

  internal::VariantContext measured{plan, m, cause, no_step, 0.15, [](const std::string&) {}};
  recs = internal::Recommend(measured);
  ASSERT_NE(find("parallel_reads"), recs.end());
  EXPECT_TRUE(find("parallel_reads")->measured);
  EXPECT_GT(*find("parallel_reads")->variant, 0);
  EXPECT_EQ(find("parallel_reads")->metric, "elements_per_s");
  EXPECT_TRUE(find("cache")->measured) << find("cache")->error.value_or("");
  EXPECT_TRUE(find("fewer_larger_files")->measured)
      << find("fewer_larger_files")->error.value_or("");
  EXPECT_FALSE(std::filesystem::exists(dir + "/resharded"));  // advice only, nothing written there
}

std::vector<Recommendation>::const_iterator Find(const std::vector<Recommendation>& recs,
                                                 const std::string& id) {
  return std::find_if(recs.begin(), recs.end(),
                      [&](const Recommendation& r) { return r.id == id; });
}

PlanStep GlobalShuffle(bool reshuffle_each_iteration) {
  PlanStep s = Step(PlanStep::Kind::kGlobalShuffle);
  s.shuffle.seed = 7;
  s.shuffle.reshuffle_each_iteration = reshuffle_each_iteration;
  return s;
}

TEST(DiagnoseTest, AGlobalShuffleIsAPlanStepAndItsVariantsKeepItOnTheFiles) {
  const std::string dir = MakeTempDir();
  PipelinePlan plan;
  plan.files = WriteFiles(dir, 4, 32);
  plan.steps = {GlobalShuffle(true), Step(PlanStep::Kind::kBatch, 8)};
  Result<Dataset> ds = plan.Build();
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_NE(ds->DebugString().find("global_shuffle(seed=7)"), std::string::npos);
  DiagnoseOptions options;
  options.seconds = 0.2;
  options.try_variants = false;
  Result<DiagnoseReport> report = Diagnose(plan, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_NE(report->measurements.pipeline.find("global_shuffle"), std::string::npos);

  Measurements m;
  m.cores = 2;
  m.alone.elements_per_s = 10;
  Cause cause{"read", "read", "", std::nullopt, false};
  StepFn no_step;
  internal::VariantContext tried{plan, m, cause, no_step, 0.15, [](const std::string&) {}};
  std::vector<Recommendation> recs = internal::Recommend(tried);
  // Dataset allows no interleave before a global shuffle: no such variant.
  EXPECT_EQ(Find(recs, "parallel_reads"), recs.end());
  // The sample's plan gets its repeat after the global shuffle, which stays on the files.
  ASSERT_NE(Find(recs, "fewer_larger_files"), recs.end());
  EXPECT_TRUE(Find(recs, "fewer_larger_files")->measured)
      << Find(recs, "fewer_larger_files")->error.value_or("");
  // A cache would replay the first epoch's order in place of a new permutation each epoch.
  plan.steps.insert(plan.steps.begin() + 1, Step(PlanStep::Kind::kRepeat));
  internal::VariantContext advice{plan, m, cause, no_step, 0.0, [](const std::string&) {}};
  recs = internal::Recommend(advice);
  EXPECT_EQ(Find(recs, "cache"), recs.end());
  plan.steps[0] = GlobalShuffle(false);  // the same order every epoch: a cache keeps it
  recs = internal::Recommend(advice);
  EXPECT_NE(Find(recs, "cache"), recs.end());
}

TEST(DiagnoseTest, InMemoryRecordsAreAPlanSource) {
  auto records = std::make_shared<std::vector<std::string>>();
  for (int j = 0; j < 64; ++j) {
    example::Features features;
    features["x"] = example::Feature::Int64s({j});
    records->push_back(example::SerializeExample(features));
  }
  PipelinePlan plan;
  plan.records = records;
  plan.steps = {Step(PlanStep::Kind::kRepeat), Step(PlanStep::Kind::kBatch, 8)};
  PlanStep parse = Step(PlanStep::Kind::kParse);
  parse.specs = {example::FeatureSpec::FixedLen("x", example::DType::kInt64)};
  plan.steps.push_back(parse);
  EXPECT_FALSE(plan.Compressed());
  Result<std::vector<std::string>> first = internal::FirstRecords(plan, 3);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, std::vector<std::string>(records->begin(), records->begin() + 3));
  DiagnoseOptions options;
  options.seconds = 0.2;
  options.step_seconds = 0.001;
  Result<DiagnoseReport> report = Diagnose(plan, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Measurements& m = report->measurements;
  EXPECT_EQ(m.pipeline.rfind("records(64)", 0), 0u) << m.pipeline;
  ASSERT_FALSE(m.stages.empty());
  EXPECT_EQ(m.stages[0].id, "read");
  EXPECT_GT(m.alone.elements_per_s, 0);
  ASSERT_TRUE(m.step.has_value());
  EXPECT_GT(m.step->steps, 0u);
  // Nothing to rewrite or cache: the records are in memory already.
  for (const Recommendation& r : report->recommendations) {
    EXPECT_NE(r.id, "cache");
    EXPECT_NE(r.id, "fewer_larger_files");
    EXPECT_FALSE(r.error.has_value()) << r.id << ": " << *r.error;
  }
}

TEST(DiagnoseTest, TheIteratorOptionsCapEveryRun) {
  PipelinePlan plan = RepeatBatchParsePrefetch();
  DiagnoseOptions options;
  options.seconds = 0.2;
  options.try_variants = false;
  auto process_parallelism = [&]() {
    Result<DiagnoseReport> report = Diagnose(plan, options);
    EXPECT_TRUE(report.ok()) << report.status().ToString();
    for (const StageMeasurement& s : report->measurements.stages) {
      if (s.id == "process") return s.parallelism;
    }
    return -1;
  };
  const int uncapped = process_parallelism();
  options.iterator.max_threads = 1;
  const int capped = process_parallelism();
  EXPECT_EQ(capped, 1);
  EXPECT_GE(uncapped, capped);
}

TEST(DiagnoseTest, AParseStepKeepsBytesAsViewsWhenAsked) {
  std::vector<std::string> records;
  for (int j = 0; j < 8; ++j) {
    example::Features features;
    features["name"] = example::Feature::Bytes({"record " + std::to_string(j)});
    records.push_back(example::SerializeExample(features));
  }
  PipelinePlan plan;
  plan.records = std::make_shared<std::vector<std::string>>(records);
  PlanStep parse = Step(PlanStep::Kind::kParse);
  parse.specs = {example::FeatureSpec::FixedLen("name", example::DType::kBytes)};
  plan.steps = {Step(PlanStep::Kind::kBatch, 4), parse};
  for (bool views : {false, true}) {
    plan.steps[1].bytes_as_views = views;
    Result<Dataset> ds = plan.Build();
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    Result<std::unique_ptr<Iterator>> it = ds->MakeIterator();
    ASSERT_TRUE(it.ok());
    Element element;
    Result<bool> got = (*it)->GetNext(&element);
    ASSERT_TRUE(got.ok() && *got);
    ASSERT_EQ(element.columns.size(), 1u);
    EXPECT_EQ(element.columns[0].bytes_views.size(), views ? 4u : 0u) << views;
  }
}

}  // namespace
}  // namespace recordflow::pipeline

namespace recordflow::pipeline {
namespace {

// Recorded: a 4-core host, a 120 ms step on the consumer thread.
Measurements WithStepCpu(double step_cpu_ms_per_step, int cores = 4) {
  Measurements m;
  m.cores = cores;
  m.step = StepRun();
  m.step->steps = 100;
  m.step->compute_s = 100 * 0.120;
  m.step->step_cpu_s = 100 * step_cpu_ms_per_step / 1e3;
  return m;
}

TEST(DiagnoseCpuCapTest, CpuHeavyStepGetsACapThatLeavesItsCores) {
  // 110 ms of CPU in a 120 ms step: 0.92 cores, so the loader keeps 3 of 4 cores.
  std::optional<Recommendation> r = CpuCapRecommendation(WithStepCpu(110));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, "cap_cpu");
  EXPECT_EQ(r->command.value_or(""), "max_cpu_fraction=0.75");
  EXPECT_NE(r->detail.find("0.92 cores"), std::string::npos) << r->detail;
  // A step that keeps 2.5 cores busy (intra-op threads on the consumer's clock): loading
  // gets at most 40% of the host.
  r = CpuCapRecommendation(WithStepCpu(300, 8));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->command.value_or(""), "max_cpu_fraction=0.38");  // 3 of 8 cores
}

TEST(DiagnoseCpuCapTest, SleepingOrLightStepsAndOneCoreGetNone) {
  EXPECT_FALSE(CpuCapRecommendation(WithStepCpu(0.5)).has_value());  // a simulated step
  EXPECT_FALSE(CpuCapRecommendation(WithStepCpu(50)).has_value());   // 42%: below the share
  EXPECT_FALSE(CpuCapRecommendation(WithStepCpu(110, 1)).has_value());
  Measurements unmeasured = WithStepCpu(110);
  unmeasured.step->step_cpu_s.reset();
  EXPECT_FALSE(CpuCapRecommendation(unmeasured).has_value());
  Measurements no_step = WithStepCpu(110);
  no_step.step.reset();
  EXPECT_FALSE(CpuCapRecommendation(no_step).has_value());
}

}  // namespace
}  // namespace recordflow::pipeline
