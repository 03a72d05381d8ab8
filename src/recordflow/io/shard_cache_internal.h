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

}  // namespace recordflow::io::internal
