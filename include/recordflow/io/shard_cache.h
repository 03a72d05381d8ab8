// A local cache of whole remote objects (shards and their .idx files): once set, every
// RandomAccessFile::Open of an s3://, gs:// or http(s):// URL is served from a local copy in
// `dir` when one of the object's current version is there, and otherwise fetches the whole
// object into it first. docs/remote-storage.md ("Local shard cache") has the guarantees:
//
// - Validation: each open asks the store for the object's ETag and size (HEAD on s3:// and
//   http(s)://, the metadata request on gs://); an entry is named by URL, ETag and size, so a
//   changed object is fetched again and never served stale. A warm hit makes no data GET.
// - Filling: the object is written to a temporary file (O_EXCL name), fsynced, checked against
//   a second ETag/size answer (an object changed while it was copied is not committed, and the
//   copy is retried), then renamed; a crash leaves only a temporary file, never served and
//   removed later. Processes sharing `dir` take a per-object lock file (flock), so one of them
//   fetches and the others wait and then read its entry.
// - Limit: committed entries never exceed max_bytes; least recently used entries (by mtime,
//   refreshed on every hit) are evicted first. An object larger than max_bytes is read
//   directly from the store, not cached.
// - An entry whose size on disk differs from the object's is removed and fetched again;
//   damaged bytes inside an entry are caught by the record CRCs as for any file.
#pragma once

#include <cstdint>
#include <string>

#include "recordflow/core/status.h"

namespace recordflow::io {

struct ShardCacheOptions {
  // Empty: no cache. Created when missing.
  std::string dir;
  // Upper bound on the bytes of committed entries in `dir` (files being filled come on top).
  uint64_t max_bytes = 10ull << 30;
};

// Process-wide; applies to files opened after the call. Thread-safe. Errors: kInvalidArgument
// for max_bytes == 0; the errors of creating `dir`.
// Default (until the first call): RECORDFLOW_CACHE_DIR and RECORDFLOW_CACHE_SIZE (bytes, or
// with a K/M/G/T suffix, powers of 1024) from the environment.
Status SetShardCache(const ShardCacheOptions& options);
ShardCacheOptions GetShardCache();

// Parses "1073741824", "512M", "20G", "1.5T" (powers of 1024). Errors: kInvalidArgument.
Result<uint64_t> ParseByteSize(const std::string& text);

// Counters of this process since it started (all caches).
struct ShardCacheStats {
  uint64_t hits = 0;           // opens served from an entry
  uint64_t misses = 0;         // opens that fetched the object
  uint64_t bytes_fetched = 0;  // bytes copied from the store into entries
  uint64_t evictions = 0;      // entries removed to stay under max_bytes
  uint64_t invalidated = 0;    // entries removed as stale (object changed) or of a wrong size
  uint64_t bypassed = 0;       // opens read directly (no ETag, or larger than max_bytes)
};
ShardCacheStats GetShardCacheStats();

}  // namespace recordflow::io
