// The hook from RandomAccessFile::Open into the shard cache (shard_cache.h).
#pragma once

#include <memory>
#include <string>

#include "recordflow/io/file.h"

namespace recordflow::io::internal {

// True when a cache directory is set (SetShardCache or RECORDFLOW_CACHE_DIR).
bool ShardCacheEnabled();
// Opens the remote `url` through the cache (shard_cache.h has the contract).
Result<std::unique_ptr<RandomAccessFile>> OpenThroughShardCache(const std::string& url);
// Stamps `entry`'s last use (its mtime, which eviction sorts by): later than any stamp this
// process made before, even inside one tick of the kernel's coarse file clock.
void MarkUsed(const std::string& entry);

}  // namespace recordflow::io::internal
