// The doctor's measurements: a PipelinePlan built into a Dataset, run alone and with a step,
// and Diagnose(), which ties measurements, rules (diagnose_rules.cc) and variants
// (diagnose_variants.cc) together.
#include "recordflow/pipeline/diagnose.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <string>
#include <thread>
#include <utility>

#include "diagnose_internal.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

uint64_t ElementBytes(const Element& e) {
  uint64_t n = 0;
  if (e.parsed) {
    for (const example::Column& c : e.columns) {
      n +=
          c.int64s.size() * sizeof(int64_t) + c.floats.size() * sizeof(float) + c.bytes_data.size();
      for (const auto& v : c.bytes_views) n += v.size();
    }
  } else {
    for (const std::string& r : e.records) n += r.size();
  }
  for (const Tensor& t : e.tensors) n += t.size_bytes;
  return n;
}

Status NoElements() {
  return InvalidArgumentError("the dataset yields no elements: nothing to diagnose");
}

}  // namespace

namespace internal {

int Cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return static_cast<int>(std::max(std::thread::hardware_concurrency(), 1u));
}

}  // namespace internal

namespace {

// `ds` with the Dataset call of `s`.
Result<Dataset> Apply(const Dataset& ds, const PlanStep& s) {
  using K = PlanStep::Kind;
  switch (s.kind) {
    case K::kShard:
      return ds.Shard(static_cast<int>(s.count), static_cast<int>(s.index));
    case K::kInterleave:
      return ds.Interleave(s.interleave);
    case K::kShuffle:
      return ds.Shuffle(s.shuffle);
    case K::kGlobalShuffle:
      return ds.GlobalShuffle(s.shuffle.seed, s.shuffle.reshuffle_each_iteration);
    case K::kRepeat:
      return ds.Repeat(s.count);
    case K::kTake:
      return ds.Take(s.count);
    case K::kSkip:
      return ds.Skip(s.count);
    case K::kCache:
      return ds.Cache(s.cache_path);
    case K::kParse:
      return ds.Parse(s.specs, s.bytes_as_views);
    case K::kMap:
      return ds.Map(s.map, s.map_name, s.map_options);
    case K::kBatch:
      if (s.count <= 0) return InvalidArgumentError("batch size must be > 0");
      return ds.Batch(static_cast<size_t>(s.count), s.drop_remainder);
    case K::kPrefetch:
      return ds.Prefetch(static_cast<int>(s.count));
  }
  return InvalidArgumentError("unknown plan step");
}

}  // namespace

Result<Dataset> PipelinePlan::Build() const {
  RF_ASSIGN_OR_RETURN(Dataset ds, records ? Result<Dataset>(Dataset::FromRecords(*records))
                                          : Dataset::FromFiles(files, files_options));
  for (const PlanStep& s : steps) {
    RF_ASSIGN_OR_RETURN(ds, Apply(ds, s));
  }
  return ds;
}

std::optional<size_t> PipelinePlan::BatchSize() const {
  std::optional<size_t> size;
  for (const PlanStep& s : steps) {
    if (s.kind == PlanStep::Kind::kBatch) size = static_cast<size_t>(s.count);
  }
  return size;
}

bool PipelinePlan::Compressed() const {
  if (records) return false;
  if (files_options.compression) return *files_options.compression != format::Compression::kNone;
  for (const std::string& p : files) {
    for (const char* suffix : {".gz", ".gzip", ".zz", ".zlib"}) {
      const std::string_view s(suffix);
      if (p.size() >= s.size() && p.compare(p.size() - s.size(), s.size(), s) == 0) return true;
    }
  }
  return false;
}

Result<AloneRun> RunAlone(const Dataset& dataset, double seconds, const IteratorOptions& iterator) {
  AloneRun run;
  const Clock::time_point start = Clock::now();
  RF_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it, dataset.MakeIterator(iterator));
  Element element;
  RF_ASSIGN_OR_RETURN(bool got, it->GetNext(&element));
  if (!got) return NoElements();
  const Clock::time_point first = Clock::now();
  run.time_to_first_element_s = std::chrono::duration<double>(first - start).count();
  run.element_bytes = ElementBytes(element);
  uint64_t n = 0;
  while (Since(first) < seconds) {
    RF_ASSIGN_OR_RETURN(got, it->GetNext(&element));
    if (!got) {
      run.exhausted = true;
      break;
    }
    ++n;
  }
  const double steady = Since(first);
  run.seconds = Since(start);
  run.stats = it->stats();
  run.elements = n + 1;
  run.elements_per_s = n > 0 && steady > 0 ? static_cast<double>(n) / steady
                                           : 1.0 / std::max(run.time_to_first_element_s, 1e-9);
  return run;
}

namespace {
// CPU time of the calling thread (what the step itself uses, not the pipeline's threads).
double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
}  // namespace

Result<StepRun> RunWithStep(const Dataset& dataset, const StepFn& step, double seconds,
                            const IteratorOptions& iterator) {
  RF_ASSIGN_OR_RETURN(std::unique_ptr<Iterator> it, dataset.MakeIterator(iterator));
  Element element;
  RF_ASSIGN_OR_RETURN(bool got, it->GetNext(&element));
  if (!got) return NoElements();
  RF_RETURN_IF_ERROR(step(element));
  StepRun run;
  double step_cpu = 0;
  const Clock::time_point first = Clock::now();
  while (Since(first) < seconds) {
    const Clock::time_point a = Clock::now();
    RF_ASSIGN_OR_RETURN(got, it->GetNext(&element));
    if (!got) break;
    const Clock::time_point b = Clock::now();
    const double cpu_before = ThreadCpuSeconds();
    RF_RETURN_IF_ERROR(step(element));
    step_cpu += ThreadCpuSeconds() - cpu_before;
    run.waits.push_back(std::chrono::duration<double>(b - a).count());
    run.computes.push_back(Since(b));
  }
  for (double w : run.waits) run.wait_s += w;
  for (double c : run.computes) {
    run.compute_s += c;
    run.max_compute_ms = std::max(run.max_compute_ms, 1e3 * c);
  }
  run.steps = run.waits.size();
  run.step_cpu_s = step_cpu;
  const double total = run.wait_s + run.compute_s;
  run.wait_fraction = total > 0 ? run.wait_s / total : 0.0;
  run.steps_per_s = total > 0 ? static_cast<double>(run.steps) / total : 0.0;
  const double steps = static_cast<double>(std::max<uint64_t>(run.steps, 1));
  run.mean_wait_ms = 1e3 * run.wait_s / steps;
  run.mean_compute_ms = 1e3 * run.compute_s / steps;
  return run;
}

namespace {

// Records/s of the plan's record stream alone (its steps before the first parse, map, batch
// or prefetch), batched natively so that the consumer is not the limit. nullopt when it
// cannot run: the check is advisory.
std::optional<double> ReadAloneRate(const PipelinePlan& plan, double seconds,
                                    const IteratorOptions& iterator) {
  PipelinePlan stream = plan;
  stream.steps.clear();
  for (const PlanStep& s : plan.steps) {
    using K = PlanStep::Kind;
    if (s.kind == K::kParse || s.kind == K::kMap || s.kind == K::kBatch || s.kind == K::kPrefetch) {
      break;
    }
    stream.steps.push_back(s);
  }
  PlanStep batch;
  batch.kind = PlanStep::Kind::kBatch;
  batch.count = 256;
  stream.steps.push_back(batch);
  Result<Dataset> ds = stream.Build();
  if (!ds.ok()) return std::nullopt;
  Result<AloneRun> run = RunAlone(*ds, seconds, iterator);
  if (!run.ok()) return std::nullopt;
  return run->elements_per_s * 256;
}

}  // namespace

Result<DiagnoseReport> Diagnose(const PipelinePlan& plan, const DiagnoseOptions& options) {
  if (options.step && options.step_seconds) {
    return InvalidArgumentError("give a step or step_seconds, not both");
  }
  if (options.step_seconds && *options.step_seconds < 0) {
    return InvalidArgumentError("step_seconds must be >= 0");
  }
  if (!(options.seconds > 0)) return InvalidArgumentError("seconds must be > 0");
  const double variant_seconds = options.variant_seconds.value_or(std::min(options.seconds, 2.0));
  auto log = [&](const std::string& line) {
    if (options.log) options.log("doctor: " + line);
  };
  StepFn step = options.step;
  DiagnoseReport report;
  Measurements& m = report.measurements;
  if (options.step) {
    m.step_mode = "step_fn " + options.step_name;
  } else if (options.step_seconds) {
    const auto sleep = std::chrono::duration<double>(*options.step_seconds);
    step = [sleep](const Element&) {
      std::this_thread::sleep_for(sleep);
      return Status();
    };
    m.step_mode = "simulated " + internal::Format("%g", 1e3 * *options.step_seconds) + " ms step";
  }

  RF_ASSIGN_OR_RETURN(Dataset dataset, plan.Build());
  m.pipeline = dataset.DebugString();
  m.cores = internal::Cores();
  m.batch_size = plan.BatchSize();
  log(internal::Format("running the pipeline alone for %g s ...", options.seconds));
  RF_ASSIGN_OR_RETURN(m.alone, RunAlone(dataset, options.seconds, options.iterator));
  m.stages = StagesFromStats(m.alone.stats);
  // Reading from a bucket is network time, not disk time: the report says which it measured.
  std::string remote_origin;
  for (const std::string& file : plan.files) {
    if (!io::IsRemotePath(file)) continue;
    const io::Url url = io::ParseUrl(file);
    remote_origin = url.scheme + "://" + url.authority;
    break;
  }
  if (!remote_origin.empty()) {
    for (StageMeasurement& s : m.stages) {
      if (s.id == "read") s.name = "remote read from " + remote_origin + ": " + s.name;
    }
  }
  // A measurement, not a variant: done with try_variants off too.
  log(remote_origin.empty() ? std::string("timing the record stream alone ...")
                            : "timing the remote record stream (" + remote_origin + ") alone ...");
  m.read_alone_records_per_s =
      ReadAloneRate(plan, std::min({variant_seconds, options.seconds, 1.0}), options.iterator);
  for (StageMeasurement& s : m.stages) {
    if (s.id == "read") s.alone_records_per_s = m.read_alone_records_per_s;
  }
  if (step) {
    log(internal::Format("running the pipeline with the step for %g s ...", options.seconds));
    RF_ASSIGN_OR_RETURN(m.step, RunWithStep(dataset, step, options.seconds, options.iterator));
  }

  report.verdict = JudgeMeasurements(m);
  for (StageMeasurement& s : m.stages) {
    if (s.id == "read") s.utilization_note = report.verdict.read_note;
  }
  if (!report.verdict.rule_cause.id.empty()) {
    internal::VariantContext context{plan,
                                     m,
                                     report.verdict.rule_cause,
                                     step,
                                     options.try_variants ? variant_seconds : 0.0,
                                     log,
                                     options.iterator};
    report.recommendations = internal::Recommend(context);
  }
  if (std::optional<Recommendation> cap = CpuCapRecommendation(m)) {
    report.recommendations.push_back(std::move(*cap));
  }
  SortRecommendations(report.recommendations);
  return report;
}

}  // namespace recordflow::pipeline
