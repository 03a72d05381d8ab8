// The doctor's variants: for the cause found, the plan rebuilt with one change and timed
// (docs/doctor.md, "The rules and their evidence"). File-layout, cache and pre-resize
// variants run on a sample of the files rewritten in a temporary directory, against the same
// sample as it is.
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <system_error>
#include <vector>

#include "diagnose_internal.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/image/image.h"
#include "recordflow/io/glob.h"
#include "recordflow/pipeline/diagnose.h"

namespace recordflow::pipeline {
namespace {

using internal::ErrorText;
using internal::FileSize;
using internal::FirstRecords;
using internal::Format;
using internal::ReadRecords;
using internal::TempDir;
using internal::WriteRecords;
using K = PlanStep::Kind;

constexpr uint64_t kMaxPrefetchBytes = uint64_t{1} << 30;

class Variants {
 public:
  explicit Variants(const internal::VariantContext& c)
      : c_(c),
        m_(c.measurements),
        sid_(c.cause.stage.value_or("")),
        base_(m_.alone.elements_per_s),
        records_rate_(base_ * static_cast<double>(m_.batch_size.value_or(1))) {}

  std::vector<Recommendation> Run() {
    if (c_.cause.id == "read") Read();
    if (c_.cause.id == "process") Process();
    if (c_.cause.id == "prefetch") Prefetch();
    return std::move(recs_);
  }

 private:
  Recommendation Make(std::string id, std::string title, std::string detail,
                      std::optional<double> gain = std::nullopt, bool measured = false) {
    return MakeRecommendation(std::move(id), sid_, std::move(title), std::move(detail), gain,
                              measured);
  }

  // Elements/s of `plan` run alone for the variants' seconds. Errors: those of building and
  // running it.
  Result<double> RateAlone(const PipelinePlan& plan) const {
    RF_ASSIGN_OR_RETURN(Dataset ds, plan.Build());
    RF_ASSIGN_OR_RETURN(AloneRun run, RunAlone(ds, c_.seconds, c_.iterator));
    return run.elements_per_s;
  }

  // Runs `variant` alone and compares its rate with `baseline`.
  Recommendation MeasureAlone(const PipelinePlan& variant, double baseline, std::string id,
                              std::string title, std::string detail, bool log = true,
                              std::optional<std::string> command = std::nullopt) {
    Recommendation rec = Make(std::move(id), title, std::move(detail));
    rec.command = std::move(command);
    if (c_.seconds <= 0) return rec;
    if (log) c_.log("trying: " + title + " ...");
    Result<double> rate = RateAlone(variant);
    if (!rate.ok()) {
      rec.error = ErrorText(rate.status());
      return rec;
    }
    const double gain = *rate / std::max(baseline, 1e-9);
    Recommendation measured = Make(rec.id, rec.title, rec.detail, gain, true);
    measured.metric = "elements_per_s";
    measured.baseline = baseline;
    measured.variant = *rate;
    measured.command = rec.command;
    return measured;
  }

  // `variant` against `base`, both run alone: `id` with `measured_detail` after `detail`, or
  // with the error of a base that did not run.
  Recommendation MeasureAgainst(const PipelinePlan& base, const PipelinePlan& variant,
                                const std::string& id, const std::string& title,
                                const std::string& detail, const std::string& measured_detail) {
    Result<double> rate = RateAlone(base);
    if (!rate.ok()) {
      Recommendation r = Make(id, title, detail);
      r.error = ErrorText(rate.status());
      return r;
    }
    return MeasureAlone(variant, *rate, id, title, detail + measured_detail, false);
  }

  // The plan over the sample files: a leading file-level shard dropped (it would empty a
  // one-file sample), a repeat added when there is none.
  PipelinePlan Sample(const std::vector<std::string>& files,
                      std::optional<format::Compression> compression) const {
    PipelinePlan p = c_.plan;
    p.files = files;
    p.files_options.compression = compression;
    while (!p.steps.empty() && p.steps.front().kind == K::kShard) p.steps.erase(p.steps.begin());
    if (std::none_of(p.steps.begin(), p.steps.end(),
                     [](const PlanStep& s) { return s.kind == K::kRepeat; })) {
      PlanStep repeat;
      repeat.kind = K::kRepeat;
      // After a global shuffle: it reads the files by index, so it must come first.
      const bool global = !p.steps.empty() && p.steps.front().kind == K::kGlobalShuffle;
      p.steps.insert(p.steps.begin() + (global ? 1 : 0), repeat);
    }
    return p;
  }

  void Read() {
    const std::vector<std::string>& paths = c_.plan.files;
    const int cores = m_.cores;
    std::vector<size_t> interleaves;
    for (size_t i = 0; i < c_.plan.steps.size(); ++i) {
      if (c_.plan.steps[i].kind == K::kInterleave) interleaves.push_back(i);
    }
    // A global shuffle reads records by index straight from the files: Dataset allows no
    // interleave before it, and one after it has no files to read.
    const bool global_shuffle =
        std::any_of(c_.plan.steps.begin(), c_.plan.steps.end(),
                    [](const PlanStep& s) { return s.kind == K::kGlobalShuffle; });
    if (global_shuffle) {
      // No parallel-reads variant.
    } else if (paths.size() > 1 && interleaves.empty()) {
      const int cycle = std::min(static_cast<int>(paths.size()), std::max(cores, 4));
      PipelinePlan v = c_.plan;
      size_t at = 0;
      while (at < v.steps.size() && v.steps[at].kind == K::kShard) ++at;
      PlanStep step;
      step.kind = K::kInterleave;
      step.interleave = {cycle, 1, kAutotune, true};
      v.steps.insert(v.steps.begin() + static_cast<std::ptrdiff_t>(at), step);
      recs_.push_back(MeasureAlone(
          v, base_, "parallel_reads",
          Format("read files in parallel: .interleave(cycle_length=%d) after from_files", cycle),
          "Without interleave one thread reads (and inflates, for GZIP/ZLIB) the files one at a "
          "time; interleave reads several on the thread pool."));
    } else if (!interleaves.empty()) {
      const size_t i = interleaves.back();
      const InterleaveOptions& op = c_.plan.steps[i].interleave;
      const int cycle =
          std::min(std::max(static_cast<int>(paths.size()), 1),
                   std::max(op.cycle_length > 0 ? 2 * op.cycle_length : cores, cores));
      if (op.cycle_length != kAutotune &&
          (op.cycle_length < cycle || (op.num_parallel != kAutotune && op.num_parallel < cores))) {
        PipelinePlan v = c_.plan;
        v.steps[i].interleave = {cycle, op.block_length, kAutotune, op.deterministic};
        recs_.push_back(MeasureAlone(
            v, base_, "parallel_reads",
            Format("more parallel reads: .interleave(cycle_length=%d, num_parallel=rf.AUTOTUNE)",
                   cycle),
            "The interleave reads fewer files at once than the machine can inflate/read."));
      }
    }
    FileLayout();
    const auto& steps = c_.plan.steps;
    auto has = [&](K kind) {
      return std::any_of(steps.begin(), steps.end(),
                         [&](const PlanStep& s) { return s.kind == kind; });
    };
    // Not for records already in memory, nor a global shuffle that reshuffles each epoch (a
    // cache would replay the first epoch's order).
    const bool reshuffles = std::any_of(steps.begin(), steps.end(), [](const PlanStep& s) {
      return s.kind == K::kGlobalShuffle && s.shuffle.reshuffle_each_iteration;
    });
    if (has(K::kRepeat) && !has(K::kCache) && !c_.plan.records && !reshuffles) {
      recs_.push_back(CacheVariant());
    }
  }

  void FileLayout();
  Recommendation CacheVariant();
  void Process();
  std::optional<Recommendation> PreResize(int target, const std::string& title,
                                          const std::string& detail);
  void Prefetch();

  const internal::VariantContext& c_;
  const Measurements& m_;
  std::string sid_;
  double base_;
  double records_rate_;
  std::vector<Recommendation> recs_;
};

void Variants::FileLayout() {
  const std::vector<std::string>& paths = c_.plan.files;
  const bool compressed = c_.plan.Compressed();
  const bool many = paths.size() > 1;
  if (!compressed && !many) return;
  double total_bytes = 0;
  for (const std::string& p : paths) total_bytes += static_cast<double>(FileSize(p));
  const double mean = total_bytes / static_cast<double>(std::max<size_t>(paths.size(), 1));
  const bool small = many && mean < static_cast<double>(32 << 20);
  if (!compressed && !small) return;
  const std::string keep = compressed ? "GZIP" : "";
  const double mib = 1 << 20;
  auto fewer_title = [&](uint64_t n, const std::string& cmd, const char* files_word) {
    return Format("fewer, larger files (now %zu%s of %.1f MiB%s; %llu of about %.0f MiB): ",
                  paths.size(), files_word, mean / mib, *files_word ? " on average" : "",
                  static_cast<unsigned long long>(n), total_bytes / static_cast<double>(n) / mib) +
           cmd;
  };
  if (c_.seconds <= 0) {  // the rules' advice, without numbers
    if (compressed) {
      // Without a sample the inflated size is unknown: at least the compressed size.
      auto [cmd, n] = ReshardCommand(paths, total_bytes);
      Recommendation r = Make("uncompressed_files", "store the records uncompressed: " + cmd,
                              "Compressed TFRecords cost an inflate of every byte.");
      r.command = cmd;
      recs_.push_back(std::move(r));
    }
    if (small) {
      auto [cmd, n] = ReshardCommand(paths, total_bytes, keep);
      Recommendation r = Make("fewer_larger_files", fewer_title(n, cmd, ""),
                              "Each file costs an open and a read-ahead restart.");
      r.command = cmd;
      recs_.push_back(std::move(r));
    }
    return;
  }
  const std::optional<format::Compression> compression = c_.plan.files_options.compression;
  const char* failed_id = compressed ? "uncompressed_files" : "fewer_larger_files";
  std::vector<std::string> sample;
  std::vector<std::vector<std::string>> records;
  uint64_t total = 0, framed = 0, sample_file_bytes = 0;
  for (size_t i = 0; i < paths.size() && i < 16; ++i) {
    Result<std::vector<std::string>> file_records = ReadRecords(paths[i], compression);
    if (!file_records.ok()) {  // an unreadable file fails the baseline too: report it
      Recommendation r = Make(failed_id, "rewrite the files", "");
      r.error = ErrorText(file_records.status());
      recs_.push_back(std::move(r));
      return;
    }
    sample.push_back(paths[i]);
    for (const std::string& r : *file_records) total += r.size(), framed += r.size() + 16;
    records.push_back(std::move(*file_records));
    sample_file_bytes += FileSize(paths[i]);
    if (total > (32u << 20)) break;
  }
  TempDir tmp;
  c_.log(Format("trying file layouts on a sample of %zu file(s), %.1f MiB ...", sample.size(),
                static_cast<double>(total) / mib));
  Result<double> base = RateAlone(Sample(sample, compression));
  if (!base.ok() || tmp.path().empty()) {
    Recommendation r = Make(failed_id, "rewrite the files", "");
    r.error = base.ok() ? "IOError: cannot create a temporary directory" : ErrorText(base.status());
    recs_.push_back(std::move(r));
    return;
  }
  const std::string detail_tail = Format(
      " Measured on a sample (%zu file(s), %.1f MiB of records) rewritten that way, against the "
      "same sample as it is.",
      sample.size(), static_cast<double>(total) / mib);
  // Uncompressed size of all the files, from the sample's ratio.
  const double plain_bytes = total_bytes * static_cast<double>(framed) /
                             static_cast<double>(std::max<uint64_t>(sample_file_bytes, 1));
  if (compressed) {
    std::vector<std::string> plain;
    Status written;
    for (size_t i = 0; i < records.size() && written.ok(); ++i) {
      plain.push_back(tmp.path() + Format("/plain-%05zu.tfrecord", i));
      written = WriteRecords(plain.back(), records[i], format::Compression::kNone);
    }
    auto [cmd, n] = ReshardCommand(paths, plain_bytes);
    if (!written.ok()) {
      Recommendation r = Make("uncompressed_files", "store the records uncompressed: " + cmd, "");
      r.error = ErrorText(written);
      recs_.push_back(std::move(r));
    } else {
      recs_.push_back(MeasureAlone(
          Sample(plain, format::Compression::kNone), *base, "uncompressed_files",
          "store the records uncompressed: " + cmd,
          "Compressed TFRecords cost an inflate of every byte on the reading thread." + detail_tail,
          true, cmd));
    }
  }
  if (small) {
    const std::string joined = tmp.path() + "/joined.tfrecord" + (compressed ? ".gz" : "");
    std::vector<std::string> all;
    for (const auto& file_records : records)
      all.insert(all.end(), file_records.begin(), file_records.end());
    const format::Compression out =
        compressed ? format::Compression::kGzip : format::Compression::kNone;
    const Status written = WriteRecords(joined, all, out);
    auto [cmd, n] = ReshardCommand(paths, total_bytes, keep);
    if (!written.ok()) {
      Recommendation r = Make("fewer_larger_files", fewer_title(n, cmd, " files"), "");
      r.error = ErrorText(written);
      recs_.push_back(std::move(r));
    } else {
      recs_.push_back(MeasureAlone(
          Sample({joined}, out), *base, "fewer_larger_files", fewer_title(n, cmd, " files"),
          "Each file costs an open, a read-ahead restart and (compressed) a new inflater. "
          "recordflow reshard copies the records unchanged (CRC-checked), with .idx files." +
              detail_tail,
          true, cmd));
    }
  }
}

Recommendation Variants::CacheVariant() {
  const std::string title =
      "cache the records after the first epoch: .cache() before .repeat() (or .cache(path))";
  const std::vector<std::string>& paths = c_.plan.files;
  uint64_t total = 0;
  for (const std::string& p : paths) total += FileSize(p);
  const std::string detail = Format(
      "Later epochs then skip reading (and inflating); the files hold %.0f MiB (compressed "
      "size), which .cache() keeps in memory and .cache(path) on a local disk.",
      static_cast<double>(total) / (1 << 20));
  if (c_.seconds <= 0 || paths.empty()) return Make("cache", title, detail);
  std::vector<std::string> sample;
  uint64_t size = 0;
  for (size_t i = 0; i < paths.size() && i < 16; ++i) {
    sample.push_back(paths[i]);
    size += FileSize(paths[i]);
    if (size > (16u << 20)) break;
  }
  const PipelinePlan base_plan = Sample(sample, c_.plan.files_options.compression);
  PipelinePlan cached = base_plan;
  for (size_t i = 0; i < cached.steps.size(); ++i) {
    if (cached.steps[i].kind != K::kRepeat) continue;
    PlanStep cache;
    cache.kind = K::kCache;
    cached.steps.insert(cached.steps.begin() + static_cast<std::ptrdiff_t>(i), cache);
    break;
  }
  c_.log(Format("trying: .cache() on a sample of %zu file(s) ...", sample.size()));
  return MeasureAgainst(base_plan, cached, "cache", title, detail,
                        Format(" Measured on a sample of %zu file(s) against the same "
                               "sample uncached.",
                               sample.size()));
}

// The shorter side a pre-resize at conversion should keep for a vision preset map.
std::optional<int> VisionTarget(const std::string& map_name) {
  std::smatch match;
  static const std::regex kEval(R"(imagenet_eval\((\d+), (\d+)\))");
  static const std::regex kTrain(R"(imagenet_train\((\d+)\))");
  if (std::regex_search(map_name, match, kEval)) return std::stoi(match[2]);
  if (std::regex_search(map_name, match, kTrain)) {
    return static_cast<int>(std::lround(std::stoi(match[1]) * 256.0 / 224.0));
  }
  return std::nullopt;
}

// The bytes of `key` in a serialized Example; nullopt when it has none.
std::optional<std::string> ImageBytes(const example::Features& features, const std::string& key) {
  auto it = features.find(key);
  if (it == features.end() || it->second.kind != example::ListKind::kBytes ||
      it->second.bytes.empty()) {
    return std::nullopt;
  }
  return it->second.bytes[0];
}

void Variants::Process() {
  std::vector<size_t> maps;
  for (size_t i = 0; i < c_.plan.steps.size(); ++i) {
    if (c_.plan.steps[i].kind == K::kMap) maps.push_back(i);
  }
  for (size_t i : maps) {
    const int parallel = c_.plan.steps[i].map_options.num_parallel;
    if (parallel == kAutotune || parallel >= m_.cores) continue;
    PipelinePlan v = c_.plan;
    v.steps[i].map_options.num_parallel = kAutotune;
    recs_.push_back(MeasureAlone(
        v, base_, "map_parallel", "more parallel map work: .map(op, num_parallel=rf.AUTOTUNE)",
        Format("The native map runs on %d thread(s) of %d cores.", parallel, m_.cores)));
  }
  std::optional<int> target;
  for (size_t i : maps) {
    if ((target = VisionTarget(c_.plan.steps[i].map_name))) break;
  }
  if (target) {
    const double upper = FreeGain(m_.stages, sid_, records_rate_);
    recs_.push_back(
        Make("decode_on_gpu", "decode JPEGs on the GPU (nvJPEG, e.g. DALI's mixed decoder)",
             "Decode + crop + resize is the pipeline's work; on a GPU it leaves the CPU. "
             "Estimated gain: the pipeline if this stage cost nothing (upper bound).",
             upper, false));
    // The first images of the first file, headers only.
    std::vector<std::pair<int, int>> dims;
    {
      Result<std::vector<std::string>> records = FirstRecords(c_.plan, 256);
      for (size_t i = 0; records.ok() && i < records->size() && dims.size() < 16; ++i) {
        const std::string& r = (*records)[i];
        Result<example::Features> f =
            example::ParseExample(std::as_bytes(std::span(r.data(), r.size())));
        if (!f.ok()) break;
        std::optional<std::string> bytes = ImageBytes(*f, "image/encoded");
        if (!bytes) continue;
        Result<image::ImageInfo> info =
            image::Probe(std::as_bytes(std::span(bytes->data(), bytes->size())));
        if (info.ok()) dims.emplace_back(info->width, info->height);
      }
    }
    if (!dims.empty()) {
      double now = 0, after = 0, sum_w = 0, sum_h = 0;
      for (auto [w, h] : dims) {
        const double px = static_cast<double>(w) * h;
        const double shorter = std::min(w, h);
        now += px;
        after += shorter > *target ? px * std::pow(*target / shorter, 2) : px;
        sum_w += w;
        sum_h += h;
      }
      const double ratio = now / std::max(after, 1.0);
      if (ratio > 1.3) {
        const double count = static_cast<double>(dims.size());
        const std::string title =
            Format("pre-resize at conversion: recordflow convert --resize-shorter %d", *target);
        const std::string detail = Format(
            "The images average %.0fx%.0f px, %.1fx the pixels they would have after the "
            "resize; decode cost grows with pixels.",
            sum_w / count, sum_h / count, ratio);
        std::optional<Recommendation> measured = PreResize(*target, title, detail);
        recs_.push_back(measured
                            ? std::move(*measured)
                            : Make("pre_resize", title,
                                   detail + " Estimated gain: the smaller of that ratio and "
                                            "the stage's upper bound (DCT-scaled decoding already "
                                            "wins part of it).",
                                   std::min(ratio, upper), false));
      }
    }
  }
  if (maps.empty()) {
    recs_.push_back(Make("parse_fewer_features", "parse only the features you use",
                         "Parsing is the busiest stage; each key in the spec costs a column."));
  }
}

// Up to 128 records re-encoded with the shorter side at `target` (as convert --resize-shorter
// does: resize, JPEG quality 95) against the same records as they are, both uncompressed in
// one file. nullopt when it cannot be tried (then the estimate stands).
std::optional<Recommendation> Variants::PreResize(int target, const std::string& title,
                                                  const std::string& detail) {
  if (c_.seconds <= 0) return std::nullopt;
  const std::string key = "image/encoded";
  std::vector<std::string> original, resized;
  {
    Result<std::vector<std::string>> records = FirstRecords(c_.plan, 128);
    if (!records.ok()) return std::nullopt;
    for (const std::string& r : *records) {
      Result<example::Features> f =
          example::ParseExample(std::as_bytes(std::span(r.data(), r.size())));
      if (!f.ok()) return std::nullopt;
      std::optional<std::string> bytes = ImageBytes(*f, key);
      if (!bytes) return std::nullopt;
      Result<image::Image> img =
          image::Decode(std::as_bytes(std::span(bytes->data(), bytes->size())));
      if (!img.ok()) return std::nullopt;
      const int h = img->height, w = img->width, shorter = std::min(h, w);
      if (shorter > target) {
        const int nh = static_cast<int>(std::lround(static_cast<double>(h) * target / shorter));
        const int nw = static_cast<int>(std::lround(static_cast<double>(w) * target / shorter));
        Result<image::Image> small = image::Resize(*img, nw, nh);
        if (!small.ok()) return std::nullopt;
        Result<std::string> jpeg = image::EncodeJpeg(*small, {.quality = 95});
        if (!jpeg.ok()) return std::nullopt;
        (*f)[key] = example::Feature::Bytes({std::move(*jpeg)});
        if (f->count("image/height")) (*f)["image/height"] = example::Feature::Int64s({nh});
        if (f->count("image/width")) (*f)["image/width"] = example::Feature::Int64s({nw});
      }
      original.push_back(r);
      resized.push_back(example::SerializeExample(*f));
    }
  }
  if (original.empty()) return std::nullopt;
  TempDir tmp;
  if (tmp.path().empty()) return std::nullopt;
  const std::string a = tmp.path() + "/original.tfrecord", b = tmp.path() + "/resized.tfrecord";
  if (!WriteRecords(a, original, format::Compression::kNone).ok() ||
      !WriteRecords(b, resized, format::Compression::kNone).ok()) {
    return std::nullopt;
  }
  c_.log(Format("trying: pre-resized images on a sample of %zu records ...", original.size()));
  return MeasureAgainst(Sample({a}, format::Compression::kNone),
                        Sample({b}, format::Compression::kNone), "pre_resize", title, detail,
                        Format(" Measured on a sample of %zu records re-encoded that way, "
                               "against the same records as they are.",
                               original.size()));
}

void Variants::Prefetch() {
  const uint64_t element = std::max<uint64_t>(m_.alone.element_bytes, 1);
  const int n =
      static_cast<int>(std::min<uint64_t>(64, std::max<uint64_t>(8, kMaxPrefetchBytes / element)));
  std::optional<int64_t> current;
  for (const PlanStep& s : c_.plan.steps) {
    if (s.kind == K::kPrefetch) current = s.count;
  }
  if (c_.seconds <= 0) {
    recs_.push_back(Make("bigger_prefetch", Format("a bigger prefetch buffer: .prefetch(%d)", n),
                         "The buffer is too small to absorb the step's bursts."));
    return;
  }
  c_.log(Format("trying: prefetch(%d) with the step ...", n));
  const std::string title =
      Format("a bigger prefetch buffer: .prefetch(%d) (or .prefetch() to autotune)", n);
  const std::string detail =
      Format("The pipeline keeps up on average (%.1fx the step's rate) but its buffer ",
             c_.cause.ceiling_over_demand.value_or(0)) +
      (current && *current != kAutotune
           ? Format("(prefetch(%lld)) ", static_cast<long long>(*current))
           : "") +
      "is too small to absorb the step's bursts; a bigger one lets it work ahead during long "
      "steps.";
  PipelinePlan v = c_.plan;
  auto last = std::find_if(v.steps.rbegin(), v.steps.rend(),
                           [](const PlanStep& s) { return s.kind == K::kPrefetch; });
  if (last != v.steps.rend()) {
    last->count = n;
  } else {
    PlanStep p;
    p.kind = K::kPrefetch;
    p.count = n;
    v.steps.push_back(p);
  }
  Result<Dataset> ds = v.Build();
  Result<StepRun> run = !c_.step  ? Result<StepRun>(InvalidArgumentError("no step"))
                        : ds.ok() ? RunWithStep(*ds, c_.step, c_.seconds, c_.iterator)
                                  : Result<StepRun>(ds.status());
  if (!run.ok() || !m_.step) {
    Recommendation r = Make("bigger_prefetch", title, detail);
    r.error = ErrorText(run.ok() ? InvalidArgumentError("no step run") : run.status());
    recs_.push_back(std::move(r));
    return;
  }
  const double gain = run->steps_per_s / std::max(m_.step->steps_per_s, 1e-9);
  Recommendation r = Make("bigger_prefetch", title, detail, gain, true);
  r.metric = "steps_per_s";
  r.baseline = m_.step->steps_per_s;
  r.variant = run->steps_per_s;
  r.wait_fraction_before = m_.step->wait_fraction;
  r.wait_fraction_after = run->wait_fraction;
  recs_.push_back(std::move(r));
}

}  // namespace

namespace internal {

std::vector<Recommendation> Recommend(const VariantContext& context) {
  return Variants(context).Run();
}

}  // namespace internal
}  // namespace recordflow::pipeline
