// Reshard: TFRecord files -> N shards with the same records (byte for byte), optionally in a
// seeded random order, optionally in another compression, each with its `.idx` index.
//
//   DST/<prefix>-00000-of-0000N.tfrecord[.gz|.zz]   (+ .idx for uncompressed shards)
//   DST/.reshard-plan.json                           what a resumed run must match
//
// Records are read with their CRCs checked (corrupt input fails the run with kDataLoss naming
// the file, byte offset and record index). The records in input order (files in the order
// given), or a seeded permutation of them with `shuffle`, are cut into N contiguous runs whose
// sizes differ by at most one: shard k holds positions [k*T/N, (k+1)*T/N) of that order.
//
// Each shard is written under a temporary name and renamed when complete (its index after
// it), so a killed run leaves only whole shards; `resume` keeps them and writes the rest, and
// the result is byte-identical to an uninterrupted run (the output depends only on the input
// bytes and the options).
//
// Memory: the record order (8 bytes per record) and the index of each uncompressed input;
// uncompressed inputs are read by random access through their index. Records from GZIP/ZLIB
// inputs are read by streaming them: one shard's worth of their records is held at a time, and
// with `shuffle` every compressed input is streamed once per shard (reshard compressed inputs
// to uncompressed ones first when N is large).
//
// Thread safety: Reshard() is reentrant (distinct destinations).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/format/compression.h"

namespace recordflow::convert {

struct ReshardOptions {
  int num_shards = 1;
  // A seeded permutation of all records; off: input order.
  bool shuffle = false;
  uint64_t seed = 0;
  // Compression of the inputs; nullopt: from each file name (.gz GZIP, .zz ZLIB, else none).
  std::optional<format::Compression> input_compression;
  // Compression of the shards (their names end in .gz / .zz accordingly).
  format::Compression compression = format::Compression::kNone;
  // Shard names: <prefix>-00000-of-00004.tfrecord.
  std::string prefix = "shard";
  // Write `<shard>.idx` beside each uncompressed shard.
  bool write_index = true;
  // Keep the whole shards of an interrupted run with the same inputs and options in DST.
  bool resume = false;
  // fsync each shard before publishing it.
  bool sync = true;
};

struct ReshardShard {
  std::string file;  // name inside DST
  uint64_t records = 0;
  uint64_t bytes = 0;    // file size
  bool resumed = false;  // kept from an interrupted run
};

struct ReshardSummary {
  std::vector<std::string> inputs;
  std::string destination;
  uint64_t records = 0;
  uint64_t input_bytes = 0;   // sizes of the input files
  uint64_t output_bytes = 0;  // sizes of the shard files
  uint64_t resumed_shards = 0;
  uint64_t records_this_run = 0;  // records not in resumed shards
  std::vector<ReshardShard> shards;
  double seconds = 0;
  // The summary as one JSON object (the CLI's --json output).
  std::string ToJson() const;
};

// The name of shard `index` of `count`: "<prefix>-00003-of-00016.tfrecord[.gz|.zz]".
std::string ReshardFileName(const std::string& prefix, int index, int count,
                            format::Compression compression);

// Reshards the records of `paths` into `dst` (created if missing). Returns what was written.
// `paths`: files and glob patterns, expanded by io::ExpandGlobs (each pattern's matches
// sorted); the summary's inputs are the expanded files.
// Errors: kInvalidArgument (no inputs, num_shards < 1, an empty prefix, an input that is also
// an output); kNotFound (an input missing, a pattern matching nothing); kAlreadyExists (DST already
// holds shards of this prefix and `resume` is not set); kFailedPrecondition (resume with other
// inputs or options than the interrupted run); kDataLoss (corrupt input, naming file, offset and
// record); I/O errors naming the path.
Result<ReshardSummary> Reshard(const std::vector<std::string>& paths, const std::string& dst,
                               const ReshardOptions& options);

}  // namespace recordflow::convert
