// The convert layer: an image folder (one sub-folder per class) or a CSV/JSONL manifest ->
// sharded TFRecord files of tf.train.Example records; and TFRecords -> image files (extract).
//
// Convert runs in two separate steps:
//   1. the plan (plan.h): list the inputs, sort class names, split train/validation per class
//      with a seeded RNG, shuffle, assign records to shards. It reads no image bytes, so it is
//      cheap, and it depends only on the listing and the options;
//   2. the writer (Convert below): worker threads read, check and (optionally) transcode the
//      images; the calling thread writes each shard's records in plan order. The output bytes
//      therefore never depend on thread timing: same input, options and seed -> same bytes.
//
// Records carry the TensorFlow models ImageNet keys: image/encoded, image/format,
// image/height, image/width, image/channels, image/colorspace, image/class/label,
// image/class/text, image/filename (and a manifest's extra columns under their own names).
//
// Crash safety: a shard (and its .idx) appears under its final name only when complete; a
// small state file per finished shard in DST/.recordflow-convert/ lets `resume` skip it.
//
// Thread safety: Convert and Extract may run concurrently on different destinations (two runs
// on one DST race like two programs would). Convert uses its own worker threads (options.
// num_threads) and joins them all before it returns, on success and on error; the progress
// callback runs on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/format/compression.h"

namespace recordflow::convert {

// What to do with PNG, GIF, BMP and WebP inputs.
enum class NonJpegPolicy : uint8_t {
  kTranscode,  // decode and re-encode as JPEG at `quality` (what TF's image pipelines expect)
  kKeep,       // store the original bytes; image/format says which format they are
};

// How thoroughly each input is checked before it is stored.
enum class VerifyLevel : uint8_t {
  kHeader,     // the header parses (dimensions, channels)
  kStructure,  // also, a JPEG's markers and entropy-coded data run to its end marker (catches
               // truncated files; one memchr pass, no decode)
  kDecode,     // every image is fully decoded; libjpeg warnings (corrupt data mid-stream
               // that libjpeg would decode anyway) count as corrupt data
};

// "transcode" / "keep", as the CLI's --non-jpeg and Python's non_jpeg= spell them.
// Errors: kInvalidArgument naming the value and the accepted ones.
Result<NonJpegPolicy> ParseNonJpegPolicy(std::string_view name);
std::string_view NonJpegPolicyName(NonJpegPolicy policy);
// "header" / "structure" / "decode" (--verify, verify=). Errors: kInvalidArgument.
Result<VerifyLevel> ParseVerifyLevel(std::string_view name);
std::string_view VerifyLevelName(VerifyLevel level);

// Progress of a running conversion, reported from the calling thread.
struct ConvertProgress {
  uint64_t done = 0;   // inputs processed (written or skipped), resumed shards included
  uint64_t total = 0;  // inputs planned
  uint64_t skipped = 0;
  uint64_t bytes_out = 0;  // record bytes written so far
  double seconds = 0;      // since the start
};

struct ConvertOptions {
  // ---- split and shards ----
  // Fraction of each class that goes to the validation split (stratified), 0 <= f < 1.
  double val_fraction = 0.0;
  uint64_t seed = 0;
  // Shards of the train split; 0: as many as `shard_size` asks for.
  int train_shards = 0;
  // Shards of the validation split; 0: in proportion to train_shards (at least 1), or by
  // `shard_size` when train_shards is 0.
  int validation_shards = 0;
  // Target bytes per shard, estimated from input file sizes, when no shard count is given.
  uint64_t shard_size = uint64_t{128} << 20;
  // Shuffle the records of each split across its shards (seeded). Off: class, then file order.
  bool shuffle = true;
  format::Compression compression = format::Compression::kNone;
  // Write `<shard>.idx` (DALI format) beside each uncompressed shard.
  bool write_index = true;
  // fsync shards before publishing them.
  bool sync = true;

  // ---- labels ----
  // Added to every class index (1 for TF models' 1-based labels).
  int64_t label_offset = 0;

  // ---- images ----
  NonJpegPolicy non_jpeg = NonJpegPolicy::kTranscode;
  // Re-encode images whose shorter side is longer than this, resized so that it is this
  // long (antialiased bilinear). 0: keep sizes.
  int resize_shorter = 0;
  // JPEG quality for every re-encoded image.
  int quality = 95;
  // Re-encode grayscale and CMYK/YCCK JPEGs as 3-channel RGB JPEGs.
  bool force_rgb = false;
  // Re-encode images whose EXIF orientation is not 1 so that the pixels are upright.
  bool apply_exif_orientation = false;
  VerifyLevel verify = VerifyLevel::kStructure;
  // Inputs with more pixels than this are skipped (decompression-bomb guard).
  uint64_t max_pixels = uint64_t{1} << 28;
  // Inputs larger than this are skipped.
  uint64_t max_file_size = uint64_t{1} << 30;

  // ---- manifest inputs (SRC is a .csv, .jsonl or .ndjson file) ----
  // Column of the image path (relative paths are relative to the manifest's folder).
  // Empty: the first of image, path, filename, file, image_path.
  std::string image_column;
  // Column of the label(s). Empty: the first of label, labels, class; none is fine
  // (unlabeled). Integer labels are used as given; other labels are class names, mapped to
  // the indices of their sorted list. A JSON list, or a CSV value split by
  // `label_separator`, gives several labels (multi-label).
  std::string label_column;
  std::string label_separator;

  // ---- run ----
  // Inputs that cannot be used (corrupt, not an image, unreadable, too large, empty class
  // folder) fail the run instead of being skipped and listed.
  bool strict = false;
  // Finish an interrupted run in DST: shards completed by it are kept, the rest written.
  bool resume = false;
  // Replace an earlier conversion's output in DST.
  bool overwrite = false;
  // Worker threads; 0: one per core.
  int num_threads = 0;
  // Non-empty: write only the shards with these plan indices (train shards, then validation
  // shards, as in the summary); the other shards are neither written nor counted. An index
  // that names no shard selects nothing, so {-1} writes only labels.txt and a summary that
  // lists the plan's shard names. Distributed conversion (recordflow.spark) runs one shard
  // per task this way: every task makes the same plan, so the bytes match a one-machine run.
  std::vector<int> only_shards;
  // Called on the calling thread about every 100 ms, and once at the end.
  std::function<void(const ConvertProgress&)> progress;
};

// One image as a record stores it, after the checks and re-encoding `options` ask for.
struct PreparedImage {
  std::string encoded;  // image/encoded: the input bytes, or the re-encoded JPEG
  std::string format;   // image/format: "JPEG", "PNG", ...
  int width = 0;
  int height = 0;
  int channels = 0;
  std::string colorspace;  // image/colorspace: "RGB", "Gray", "CMYK", ...
  bool transcoded = false;
};

// What Convert does with each input's bytes (verify, max_pixels, non_jpeg, resize_shorter,
// quality, force_rgb, apply_exif_orientation), for callers with bytes rather than files
// (rf.convert with Python inputs). With verify kDecode, a JPEG on which libjpeg warns
// (corrupt data it would paper over) is kDataLoss.
// Errors: kInvalidArgument (not an image), kDataLoss (corrupt or truncated),
// kResourceExhausted (over max_pixels), kUnimplemented (format not built in).
Result<PreparedImage> PrepareImage(std::string bytes, const ConvertOptions& options);

struct SkippedInput {
  std::string path;
  std::string reason;
};

struct ShardSummary {
  std::string file;  // name inside DST
  uint64_t records = 0;
  uint64_t bytes = 0;  // file size
  bool resumed = false;
};

struct SplitSummary {
  std::string name;  // "train" or "validation"
  uint64_t records = 0;
  uint64_t bytes = 0;
  std::vector<uint64_t> per_class;  // records per class index (class-labeled inputs)
  std::vector<ShardSummary> shards;
};

struct ConvertSummary {
  std::string source;
  std::string destination;
  std::vector<std::string> class_names;  // index i is label i + label_offset
  int64_t label_offset = 0;
  std::vector<SplitSummary> splits;  // train, then validation (when val_fraction > 0)
  uint64_t inputs = 0;               // inputs planned
  uint64_t records = 0;              // records written (all splits)
  uint64_t input_bytes = 0;          // bytes of the inputs read
  uint64_t output_bytes = 0;         // bytes of the shard files
  uint64_t transcoded = 0;           // records whose image was re-encoded
  uint64_t resumed_shards = 0;
  uint64_t records_this_run = 0;      // records not in resumed shards
  std::vector<SkippedInput> skipped;  // in plan order, empty class folders first
  double seconds = 0;

  // The summary as one JSON object (the CLI's --json output and DST/summary.json).
  std::string ToJson() const;
};

// Converts SRC (an image folder or a .csv/.jsonl manifest) into shards in DST (created if
// missing), plus DST/labels.txt (class names, one per line, in label order) and
// DST/summary.json. Returns the summary; inputs that could not be used are listed in
// `skipped` (unless `strict`).
// Errors: kInvalidArgument (bad options, an unreadable manifest); kNotFound (SRC missing);
// kAlreadyExists (DST holds an earlier conversion and neither resume nor overwrite is set);
// kFailedPrecondition (resume with different input or options than the interrupted run);
// with `strict`, the error of the first unusable input (kDataLoss for corrupt data,
// kInvalidArgument for a non-image, kResourceExhausted over a limit, ...); I/O errors.
Result<ConvertSummary> Convert(const std::string& src, const std::string& dst,
                               const ConvertOptions& options);

// ---- extract ------------------------------------------------------------------------------

struct ExtractOptions {
  // nullopt: from each file's name (.gz GZIP, .zz ZLIB).
  std::optional<format::Compression> compression;
  // Name of the CSV written in OUT_DIR: path,label,class per image (path relative to OUT_DIR).
  std::string labels_csv = "labels.csv";
  // Replace files already in OUT_DIR (otherwise a name taken gets a -1, -2, ... suffix).
  bool overwrite = false;
};

struct ExtractSummary {
  uint64_t records = 0;
  uint64_t images = 0;
  uint64_t bytes = 0;
  std::vector<SkippedInput> skipped;  // records without image/encoded, or not Examples
  std::string ToJson() const;
};

// Writes the images of the records in `files` as OUT_DIR/<class>/<file name>, and a labels
// CSV. Names come from image/class/text (else image/class/label, else "unlabeled") and
// image/filename (else "<record number>.<format>"), each reduced to one safe path component
// by SanitizePathComponent: nothing stored in a record can make it write outside OUT_DIR.
// Errors: those of reading the files (kDataLoss for corrupt records, kNotFound, ...) and of
// writing OUT_DIR.
Result<ExtractSummary> Extract(const std::vector<std::string>& files, const std::string& out_dir,
                               const ExtractOptions& options = {});

// One file or folder name that is safe to join to a folder: the last component of `name`
// (after '/' or '\\'), with NUL and control bytes, ':' and bytes that are not valid UTF-8
// replaced by '_'; "", "." and ".." become `fallback`; at most 200 bytes.
std::string SanitizePathComponent(std::string_view name, std::string_view fallback);

}  // namespace recordflow::convert
