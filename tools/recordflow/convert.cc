// `recordflow convert SRC DST`: an image folder or manifest -> sharded TFRecords. All the work
// is recordflow::convert::Convert; this file maps flags to ConvertOptions, draws the progress
// bar, and prints the summary.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "common.h"
#include "recordflow/convert/convert.h"

namespace recordflow::cli {
namespace {

struct ConvertCliOptions {
  std::string src;
  std::string dst;
  convert::ConvertOptions options;
  std::string shard_size;
  std::string non_jpeg = "transcode";
  std::string verify = "structure";
  std::optional<format::Compression> compression;
  bool no_shuffle = false;
  bool no_index = false;
  bool no_sync = false;
  bool json = false;
  std::optional<bool> progress;
};

// "128M", "1G", "500000", "64KiB" -> bytes.
std::optional<uint64_t> ParseSize(std::string text) {
  if (text.empty()) return std::nullopt;
  size_t pos = 0;
  double value;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return std::nullopt;
  }
  std::string unit = text.substr(pos);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && unit.back() == 'B') unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'I') unit.pop_back();
  double scale = 1;
  if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    return std::nullopt;
  // Also refuses nan, inf and values past 2^64 (the cast would be undefined) or under a byte.
  const double bytes = value * scale;
  if (!(bytes >= 1 && bytes < 18446744073709551616.0)) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string Duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

std::string MegaBytes(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

void DrawProgress(const convert::ConvertProgress& p) {
  constexpr int kWidth = 30;
  const double fraction = p.total ? static_cast<double>(p.done) / p.total : 1.0;
  const int filled = static_cast<int>(fraction * kWidth);
  const double rate = p.seconds > 0 ? p.done / p.seconds : 0;
  const double eta = rate > 0 ? (p.total - p.done) / rate : 0;
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %llu/%llu %3.0f%%  %.0f images/s  ETA %s  skipped %llu ",
               bar.c_str(), static_cast<unsigned long long>(p.done),
               static_cast<unsigned long long>(p.total), 100 * fraction, rate,
               Duration(eta).c_str(), static_cast<unsigned long long>(p.skipped));
  if (p.done == p.total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

std::string TextSummary(const convert::ConvertSummary& s) {
  std::string out = "converted " + CountOf(s.records, "image") + " of " + std::to_string(s.inputs) +
                    " into " + s.destination + " (" +
                    CountOf(s.class_names.size(), "class", "classes") + ", " +
                    MegaBytes(s.output_bytes);
  char buf[96];
  std::snprintf(buf, sizeof(buf), ", %.2f s, %.0f images/s", s.seconds,
                s.seconds > 0 ? s.records_this_run / s.seconds : 0.0);
  out += buf;
  out += ")\n";
  for (const auto& split : s.splits) {
    out += "  " + split.name + ": " + CountOf(split.records, "record") + " in " +
           CountOf(split.shards.size(), "shard") + ", " + MegaBytes(split.bytes) + "\n";
  }
  if (s.resumed_shards)
    out += "  resumed: " + CountOf(s.resumed_shards, "shard") + " kept from the interrupted run\n";
  if (s.transcoded) out += "  re-encoded: " + CountOf(s.transcoded, "image") + "\n";
  if (!s.skipped.empty()) {
    out += "skipped " + CountOf(s.skipped.size(), "input") + ":\n";
    for (const auto& skip : s.skipped) out += "  " + skip.path + ": " + skip.reason + "\n";
  }
  return out;
}

int RunConvert(ConvertCliOptions& cli) {
  convert::ConvertOptions& options = cli.options;
  if (!cli.shard_size.empty()) {
    auto size = ParseSize(cli.shard_size);
    if (!size)
      return UsageError("--shard-size: not a size from 1 byte to 16E: '" + cli.shard_size +
                        "' (e.g. 128M, 1G)");
    options.shard_size = *size;
    if (options.train_shards != 0)
      return UsageError("--shards and --shard-size exclude each other");
  }
  // The validators of --non-jpeg and --verify have already accepted these.
  options.non_jpeg = *convert::ParseNonJpegPolicy(cli.non_jpeg);
  options.verify = *convert::ParseVerifyLevel(cli.verify);
  if (cli.compression) options.compression = *cli.compression;
  options.shuffle = !cli.no_shuffle;
  options.write_index = !cli.no_index;
  options.sync = !cli.no_sync;
  if (options.resume && options.overwrite)
    return UsageError("--resume and --overwrite exclude each other");
  const bool progress = cli.progress.value_or(isatty(STDERR_FILENO) == 1);
  if (progress) options.progress = DrawProgress;
  Result<convert::ConvertSummary> summary = convert::Convert(cli.src, cli.dst, options);
  if (!summary.ok()) return FailWith(summary.status());
  if (WriteOutOrFail(cli.json ? summary->ToJson() + "\n" : TextSummary(*summary)) != kExitOk) {
    return kExitError;
  }
  if (!summary->skipped.empty()) {
    if (cli.json) {
      std::fprintf(stderr, "recordflow: convert skipped %s (listed in the summary)\n",
                   CountOf(summary->skipped.size(), "input").c_str());
    }
    return kExitSkipped;
  }
  return kExitOk;
}

}  // namespace

Command AddConvertCommand(CLI::App& app) {
  auto cli = std::make_shared<ConvertCliOptions>();
  convert::ConvertOptions& o = cli->options;
  CLI::App* command = app.add_subcommand(
      "convert",
      "Convert an image folder (one sub-folder per class) or a CSV/JSONL manifest into sharded "
      "TFRecords: DST/train-00000-of-0000N.tfrecord, validation-..., .idx files, labels.txt, "
      "summary.json");
  AddRequiredArgument(*command, "src", &cli->src, "Image folder, or manifest (.csv, .jsonl)",
                      "SRC");
  AddRequiredArgument(*command, "dst", &cli->dst, "Output folder (created if missing)", "DST");
  command
      ->add_option("--val-fraction", o.val_fraction,
                   "Fraction of each class for the validation split (default 0)")
      ->check(CLI::Range(0.0, 0.999999));
  command->add_option("--seed", o.seed, "Seed for the split and the shuffle (default 0)")
      ->check(UnsignedIn(0));
  command->add_option("--shards", o.train_shards, "Train shards (default: by --shard-size)")
      ->check(UnsignedIn(1, INT32_MAX));
  command
      ->add_option("--val-shards", o.validation_shards,
                   "Validation shards (default: in proportion to --shards, or by size)")
      ->check(UnsignedIn(1, INT32_MAX));
  command
      ->add_option("--shard-size", cli->shard_size,
                   "Target bytes per shard, e.g. 128M (default), 1G")
      ->type_name("SIZE");
  command->add_flag("--no-shuffle", cli->no_shuffle,
                    "Keep class, then file order instead of shuffling across shards");
  AddCompressionOption(*command, &cli->compression);
  command->add_flag("--no-index", cli->no_index, "Write no .idx files");
  command
      ->add_option("--label-offset", o.label_offset,
                   "Added to every label (1 for TF models' 1-based labels; default 0)")
      ->check(SignedIn());
  command
      ->add_option("--non-jpeg", cli->non_jpeg,
                   "PNG/GIF/BMP/WebP inputs: transcode to JPEG (default) or keep as they are")
      ->check(ParsedBy([](std::string_view v) { return convert::ParseNonJpegPolicy(v).status(); }));
  command
      ->add_option("--resize-shorter", o.resize_shorter,
                   "Shrink images whose shorter side is longer than N pixels to N "
                   "(re-encoded at --quality)")
      ->check(UnsignedIn(0, INT32_MAX))
      ->type_name("N");
  command->add_option("--quality", o.quality, "JPEG quality of re-encoded images (default 95)")
      ->check(UnsignedIn(1, 100));
  command->add_flag("--force-rgb", o.force_rgb,
                    "Re-encode grayscale and CMYK JPEGs as 3-channel RGB");
  command->add_flag("--exif-orientation", o.apply_exif_orientation,
                    "Re-encode images with an EXIF orientation so that pixels are upright");
  command
      ->add_option("--verify", cli->verify,
                   "Input checks: header, structure (default: JPEG markers run to the end), "
                   "decode (full decode of every image)")
      ->check(ParsedBy([](std::string_view v) { return convert::ParseVerifyLevel(v).status(); }));
  command
      ->add_option("--max-pixels", o.max_pixels, "Skip images with more pixels (default 268435456)")
      ->check(UnsignedIn(1));
  command->add_option("--image-column", o.image_column, "Manifest: image path column");
  command->add_option("--label-column", o.label_column, "Manifest: label column");
  command->add_option("--label-separator", o.label_separator,
                      "Manifest (CSV): separator of several labels in one cell, e.g. '|'");
  command->add_flag("--strict", o.strict,
                    "Fail on the first unusable input instead of skipping it");
  command->add_flag("--resume", o.resume,
                    "Finish an interrupted conversion in DST (same SRC and options)");
  command->add_flag("--overwrite", o.overwrite, "Replace an earlier conversion in DST");
  command->add_option("-j,--threads", o.num_threads, "Worker threads (default: one per core)")
      ->check(UnsignedIn(0, 4096));
  command->add_flag("--no-sync", cli->no_sync, "Do not fsync shards before publishing them");
  command->add_flag("--json", cli->json, "Print the summary as JSON");
  command->add_flag("--progress,!--no-progress", cli->progress,
                    "Progress bar on stderr (default: when stderr is a terminal)");
  return {command, [cli] { return RunConvert(*cli); }};
}

}  // namespace recordflow::cli
