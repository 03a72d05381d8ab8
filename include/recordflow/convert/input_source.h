// Where Convert's inputs come from. Convert plans, splits, shuffles, shards, writes and
// summarizes the same way for every source; a source only lists its items (labels, sizes, no
// bytes read) and, later, gives each item's bytes to the worker threads.
//
// Sources: a path (an image folder or a .csv/.jsonl manifest, PathSource) and items handed in
// one by one by a caller such as rf.convert with Python data (SpooledSource).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/convert/convert.h"
#include "recordflow/convert/plan.h"
#include "recordflow/core/status.h"
#include "recordflow/example/example.h"

namespace recordflow::convert {

// What a source gives for one listed item.
struct LoadedInput {
  // Encoded image bytes (checked and re-encoded by Convert as the options say); nullopt for a
  // record without an image (only `extra` and the item's labels are stored).
  std::optional<std::string> image;
  // The source re-encoded the image already (pixels handed in as an array): counted as
  // transcoded in the summary.
  bool transcoded = false;
  // Features stored as they are, besides the item's own `extra`.
  example::Features extra;
};

// Thread safety: List is called once, before any Load, on the thread that runs Convert; Load
// is called concurrently from Convert's worker threads and must be thread-safe.
// Lifetime: the source must outlive the Convert call that uses it.
class InputSource {
 public:
  virtual ~InputSource() = default;
  // Shown as the summary's "source".
  virtual std::string Name() const = 0;
  // Refuses a destination the source cannot be converted into (an output folder inside the
  // image folder). Errors: kInvalidArgument.
  virtual Status CheckDestination(const std::string& dst) const { return Status(); }
  // The inputs, their labels and sizes, and what was skipped while listing.
  // Errors: the source's (kNotFound, kInvalidArgument for a malformed manifest, kIOError).
  virtual Result<InputListing> List(const ConvertOptions& options) = 0;
  // The bytes of one listed item. Errors: those of reading it (an error skips the item, or
  // fails the run with `strict`).
  virtual Result<LoadedInput> Load(const InputItem& item, const ConvertOptions& options) const = 0;
};

// An image folder or a .csv/.jsonl/.ndjson/.json manifest (chosen as Convert(src, ...) does).
std::unique_ptr<InputSource> MakePathSource(std::string src);

// Items added one at a time (rf.convert with a Python iterable), spooled to a file as they
// come, so memory holds a few numbers per item, not the items. The spool file is removed when
// the source is destroyed.
// Thread safety: Add is thread-compatible (one caller); Load is thread-safe.
class SpooledSource final : public InputSource {
 public:
  // `spool_path` must not exist; `class_names` (nullopt: labels are plain integers) names
  // label i as class_names[i]. Errors: those of creating the file.
  static Result<std::unique_ptr<SpooledSource>> Create(
      std::string spool_path, std::string name,
      std::optional<std::vector<std::string>> class_names);
  ~SpooledSource() override;
  SpooledSource(const SpooledSource&) = delete;
  SpooledSource& operator=(const SpooledSource&) = delete;

  // Appends one item: `image` (encoded bytes; nullopt: a record without an image), its labels
  // (class indices without the offset), `extra` (a serialized Example of the other features,
  // checked here), `transcoded` (the caller re-encoded the image). The item is listed as
  // "item <n>" (n counts from 0). Errors: kDataLoss (`extra` is not an Example), kIOError.
  Status Add(std::optional<std::string_view> image, std::vector<int64_t> labels,
             std::string_view extra, bool transcoded);
  uint64_t size() const { return listing_.items.size(); }

  std::string Name() const override { return name_; }
  Result<InputListing> List(const ConvertOptions& options) override;
  Result<LoadedInput> Load(const InputItem& item, const ConvertOptions& options) const override;

 private:
  struct Entry {
    uint64_t offset = 0;  // in the spool: `extra`, then the image
    uint32_t extra_size = 0;
    bool has_image = false;
    bool transcoded = false;
  };
  SpooledSource(int fd, std::string path, std::string name);

  int fd_;
  std::string path_;
  std::string name_;
  uint64_t end_ = 0;
  InputListing listing_;
  std::vector<Entry> entries_;  // entries_[i] is listing_.items[i]'s (InputItem::source_index)
};

// The refusal Convert would give for DST before it reads any input: kAlreadyExists when DST
// holds an earlier conversion and neither resume nor overwrite is set. For callers that must
// consume their items first (SpooledSource), so that they fail before that work.
Status CheckDestination(const std::string& dst, const ConvertOptions& options);

// Converts what `source` lists into shards in DST, as Convert(src, dst, options) does for a
// path. Errors: as Convert's, plus the source's.
Result<ConvertSummary> Convert(InputSource& source, const std::string& dst,
                               const ConvertOptions& options);

}  // namespace recordflow::convert
