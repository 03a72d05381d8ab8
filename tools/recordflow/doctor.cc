// `recordflow doctor GLOB... [options]`: diagnoses an input pipeline over the given files.
//
// The preset pipelines of docs/doctor.md as a pipeline::PipelinePlan, run by
// pipeline::Diagnose (include/recordflow/pipeline/diagnose.h), the engine rf.diagnose's rules
// and report also come from. This file maps flags to the plan and options and prints the
// report; no Python is involved.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/io/filesystem.h"
#include "recordflow/io/glob.h"
#include "recordflow/pipeline/diagnose.h"
#include "recordflow/vision/vision.h"

namespace recordflow::cli {
namespace {

using pipeline::PlanStep;
using K = PlanStep::Kind;

struct DoctorCliOptions {
  std::vector<std::string> files;
  std::string preset = "records";
  int64_t batch = 256;
  std::optional<double> step_ms;
  double seconds = 3.0;
  std::optional<int> interleave;
  std::optional<format::Compression> compression;
  bool no_variants = false;
  bool json = false;
  std::string html;
  bool quiet = false;
};

// A VarLen spec of every feature of the file's first record (dtype from its values).
Result<std::vector<example::FeatureSpec>> InferSpec(
    const std::string& path, std::optional<format::Compression> compression) {
  format::RecordReaderOptions options;
  options.compression = compression;
  RF_ASSIGN_OR_RETURN(auto reader, format::RecordReader::Open(path, options));
  std::span<const std::byte> record;
  RF_ASSIGN_OR_RETURN(bool got, reader->ReadRecord(&record));
  if (!got) {
    return InvalidArgumentError("'" + path +
                                "' has no records: cannot infer the features to parse");
  }
  Result<example::Features> features = example::ParseExample(record);
  if (!features.ok()) {
    return Status(features.status().code(), "'" + path +
                                                "': record 0 (byte offset 0), read to "
                                                "infer the features to parse: " +
                                                features.status().message());
  }
  std::vector<example::FeatureSpec> specs;
  for (const auto& [key, feature] : *features) {
    example::DType dtype = example::DType::kInt64;
    if (feature.kind == example::ListKind::kBytes) dtype = example::DType::kBytes;
    if (feature.kind == example::ListKind::kFloat) dtype = example::DType::kFloat32;
    specs.push_back(example::FeatureSpec::VarLen(key, dtype));
  }
  return specs;
}

PlanStep Step(K kind, int64_t count = -1) {
  PlanStep s;
  s.kind = kind;
  s.count = count;
  return s;
}

PlanStep MapStep(vision::VisionOp op) {
  PlanStep s = Step(K::kMap);
  s.map = std::move(op.fn);
  s.map_name = std::move(op.name);
  s.map_options = {pipeline::kAutotune, op.splits_batches, op.elementwise};
  return s;
}

// The pipeline of --preset: the files read with interleave, repeated, the preset's work,
// batched, then an autotuned prefetch (docs/doctor.md).
Result<pipeline::PipelinePlan> BuildPreset(const DoctorCliOptions& cli) {
  pipeline::PipelinePlan plan;
  RF_ASSIGN_OR_RETURN(plan.files, io::ExpandGlobs(cli.files));
  plan.files_options.compression = cli.compression;
  plan.files_options.shuffle_files = cli.preset == "imagenet_train";
  plan.files_options.seed = 0;
  const int cores = static_cast<int>(std::max(std::thread::hardware_concurrency(), 1u));
  const int cycle = cli.interleave.value_or(std::min(static_cast<int>(plan.files.size()), cores));
  if (cycle > 1) {
    PlanStep interleave = Step(K::kInterleave);
    interleave.interleave.cycle_length = cycle;
    plan.steps.push_back(interleave);
  }
  plan.steps.push_back(Step(K::kRepeat));
  PlanStep batch = Step(K::kBatch, cli.batch);
  if (cli.preset == "imagenet_train") {
    PlanStep shuffle = Step(K::kShuffle);
    shuffle.shuffle.buffer_size = 1024;
    shuffle.shuffle.seed = 0;
    plan.steps.push_back(shuffle);
    batch.drop_remainder = true;
    plan.steps.push_back(batch);
    vision::ImagenetTrainOptions options;
    options.size = 224;
    options.seed = 0;
    RF_ASSIGN_OR_RETURN(vision::VisionOp op, vision::ImagenetTrain(options));
    plan.steps.push_back(MapStep(std::move(op)));
  } else if (cli.preset == "imagenet_eval") {
    plan.steps.push_back(batch);
    vision::ImagenetEvalOptions options;
    options.size = 224;
    options.resize = 256;
    RF_ASSIGN_OR_RETURN(vision::VisionOp op, vision::ImagenetEval(options));
    plan.steps.push_back(MapStep(std::move(op)));
  } else if (cli.preset == "parse") {
    plan.steps.push_back(batch);
    PlanStep parse = Step(K::kParse);
    RF_ASSIGN_OR_RETURN(parse.specs, InferSpec(plan.files.front(), cli.compression));
    plan.steps.push_back(std::move(parse));
  } else {
    plan.steps.push_back(batch);
  }
  plan.steps.push_back(Step(K::kPrefetch, pipeline::kAutotune));
  return plan;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return IOError("cannot write the HTML report to '" + path + "'");
  return Status();
}

int RunDoctor(const DoctorCliOptions& cli) {
  if (cli.batch <= 0) return UsageError("--batch must be > 0");
  if (!(cli.seconds > 0)) return UsageError("--seconds must be > 0");
  if (cli.step_ms && *cli.step_ms < 0) return UsageError("--step-ms must be >= 0");
  // A path that is not there is a mistake on the command line: said here, naming it, before
  // anything is read. (Patterns that match nothing are exit 1, as for the other commands.)
  for (const std::string& path : cli.files) {
    if (io::IsGlobPattern(path)) continue;
    if (io::IsRemotePath(path)) {
      // One HEAD: a missing object or bucket (NotFound), or no access (PermissionDenied),
      // is reported naming the URL before any timing starts.
      const Result<io::FileInfo> info = io::StatPath(path);
      if (!info.ok()) return FailWith(info.status());
      continue;
    }
    std::error_code error;
    if (!std::filesystem::exists(path, error)) return UsageError("no such file: '" + path + "'");
    if (std::filesystem::is_directory(path, error)) {
      return UsageError("'" + path + "' is a folder: give the TFRecord files in it (e.g. '" +
                        (std::filesystem::path(path) / "*.tfrecord").string() + "')");
    }
  }
  Result<pipeline::PipelinePlan> plan = BuildPreset(cli);
  if (!plan.ok()) return FailWith(plan.status());
  pipeline::DiagnoseOptions options;
  options.seconds = cli.seconds;
  if (cli.step_ms) options.step_seconds = *cli.step_ms / 1e3;
  options.try_variants = !cli.no_variants;
  if (!cli.quiet && !cli.json) {
    options.log = [](std::string_view line) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
      std::fflush(stderr);
    };
  }
  Result<pipeline::DiagnoseReport> report = pipeline::Diagnose(*plan, options);
  if (!report.ok()) return FailWith(report.status());
  if (!cli.html.empty()) {
    const Status written = WriteFile(cli.html, pipeline::RenderHtml(*report));
    if (!written.ok()) {
      PrintError(written);
      return kExitError;
    }
  }
  std::string out;
  if (cli.json) {
    out = pipeline::RenderJson(*report, {{"preset", JsonQuote(cli.preset)},
                                         {"files", std::to_string(plan->files.size())}}) +
          "\n";
  } else {
    out = pipeline::RenderText(*report);
    if (!cli.html.empty()) out += "timeline: " + cli.html + "\n";
  }
  return WriteOutOrFail(out);
}

}  // namespace

Command AddDoctorCommand(CLI::App& app) {
  auto cli = std::make_shared<DoctorCliOptions>();
  CLI::App* command = app.add_subcommand(
      "doctor",
      "Diagnose an input pipeline over the files: runs it alone and with a (simulated) training "
      "step; reports its ceiling, whether the step waits on data, the slowest stage, and what "
      "would help, with gains measured by trying variants. See docs/doctor.md. Exit codes: 0 "
      "report written; 1 error (no files, unreadable data, ...); 2 usage error; 3 corrupt data "
      "found");
  AddRequiredArgument(*command, "files", &cli->files, "TFRecord files or glob patterns", "GLOB...");
  command
      ->add_option("--preset", cli->preset,
                   "The pipeline's work: imagenet_train (shuffle, random-resized-crop 224, "
                   "flip, normalize), imagenet_eval (resize 256, center crop 224), records "
                   "(batches of raw records), parse (batches parsed with every feature of the "
                   "first record). Default: records")
      ->check(CLI::IsMember({"imagenet_train", "imagenet_eval", "records", "parse"}))
      ->type_name("{imagenet_train,imagenet_eval,records,parse}");
  command->add_option("--batch", cli->batch, "Batch size (default 256)")->type_name("N");
  command
      ->add_option("--step-ms", cli->step_ms,
                   "Simulate a training step of MS milliseconds (a sleep: no CPU, like a step "
                   "on a GPU); without it only the ceiling is measured")
      ->type_name("MS");
  command
      ->add_option("--seconds", cli->seconds,
                   "Seconds for each main phase (default 3; variants run min(S, 2))")
      ->type_name("S");
  command
      ->add_option("--interleave", cli->interleave,
                   "Files read at once (0 or 1: one at a time; default min(files, cores))")
      ->type_name("N");
  AddCompressionOption(*command, &cli->compression);
  command->add_flag("--no-variants", cli->no_variants,
                    "Do not try variants: estimates only (faster)");
  command->add_flag("--json", cli->json, "Print the report as JSON");
  command
      ->add_option("--html", cli->html,
                   "Also write an HTML report with a per-step wait/compute timeline")
      ->type_name("PATH");
  command->add_flag("--quiet", cli->quiet, "No progress on stderr");
  return {command, [cli] { return RunDoctor(*cli); }};
}

}  // namespace recordflow::cli
