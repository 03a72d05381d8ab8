// The conversion plan: which inputs exist, their labels, which split and shard each goes to,
// in which order. Pure functions of the listing and the options; no image bytes are read.
//
// Thread safety: the functions are thread-safe; the structs are values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recordflow/convert/convert.h"
#include "recordflow/core/status.h"
#include "recordflow/example/example.h"

namespace recordflow::convert {

// One input image.
struct InputItem {
  std::string path;             // to open
  std::string filename;         // stored as image/filename (empty: not stored)
  std::vector<int64_t> labels;  // class indices (no offset); empty when unlabeled
  uint64_t size = 0;            // file size at listing time (0 when it could not be read)
  example::Features extra;      // a manifest's other columns
  uint64_t source_index = 0;    // the source's own handle (SpooledSource: its entry)
};

struct InputListing {
  std::vector<std::string> class_names;  // sorted; label i is class_names[i]
  bool named_classes = true;             // false: a manifest with integer labels
  std::vector<InputItem> items;          // class, then name order (manifest: file order)
  std::vector<SkippedInput> skipped;     // found while listing (empty class folders, ...)
};

// Lists an ImageFolder tree: every sub-folder of `root` is a class (sorted byte-wise by name);
// every file under it, recursively and sorted, is an input (format checks come later). Listed
// in `skipped` instead: hidden entries (name starting with '.', reason "hidden"; a hidden
// folder is not entered), empty class folders (they keep their label), files directly in
// `root`, symlinks to folders (not followed), broken symlinks, and duplicates: a file whose
// inode (device, inode number) was already reached under another name, e.g. through a
// symlink; the first in listing order is used. A symlink to a file is an input under the
// link's own path and name (image/filename is the path as found in the class folder, never
// the link's target).
// On an object store (s3://, gs://) `root` is a key prefix: a class is the first
// '/'-separated component of the keys under `root`/, its inputs every key below it (same
// order, names and skips as the same tree on disk); a key ending in '/' is a folder marker.
// Errors: kNotFound, kInvalidArgument (not a folder, or no class folders), kIOError, and the
// store's errors (kPermissionDenied, ...) naming the URL.
Result<InputListing> ListImageFolder(const std::string& root);

// Sets `size` of every input at a URL (one concurrent HEAD each); failures leave 0 (the read
// reports them).
void FillRemoteSizes(InputListing* listing);

// Reads a CSV (RFC 4180, header row) or JSON Lines manifest; see ConvertOptions for columns.
// Errors: kInvalidArgument naming the line for malformed rows or a missing image column;
// kNotFound.
Result<InputListing> ReadManifest(const std::string& path, const ConvertOptions& options);

struct ShardPlan {
  std::string split;  // "train" / "validation"
  int index = 0;
  int count = 0;                // shards in this split
  std::string file;             // "train-00003-of-00008.tfrecord" (".gz" / ".zz" when compressed)
  std::vector<uint32_t> items;  // indices into the listing, in write order
};

struct Plan {
  InputListing listing;
  std::vector<ShardPlan> shards;  // train shards, then validation shards
  // Hash of everything that determines the output bytes (listing, sizes, options, format
  // version). A resumed run must have the same.
  uint64_t hash = 0;
  std::string HashHex() const;
};

// Splits each class (first label; unlabeled inputs form one group) into train/validation with
// round(val_fraction * n) validation items chosen by a seeded RNG; shuffles each split
// (seeded) unless !shuffle; cuts each split into shards of equal count, or of about equal input
// bytes when shard counts are not given. The RNG is recordflow's own (SplitMix64 with
// rejection sampling), so plans are the same on every platform and standard library.
// Errors: kInvalidArgument for bad options.
Result<Plan> MakePlan(InputListing listing, const ConvertOptions& options);

// "train-00003-of-00008.tfrecord" plus ".gz" / ".zz" for GZIP / ZLIB.
std::string ShardFileName(const std::string& split, int index, int count,
                          format::Compression compression);

}  // namespace recordflow::convert
