// File systems implemented outside the io layer (the Python package's fsspec bridge): a
// fallback asked for every URL scheme that recordflow does not serve natively, and the ranged
// reader that gives such a store the same read-ahead as s3:// and gs://.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "recordflow/io/filesystem.h"

namespace recordflow::io {

// Serves "scheme://..." URLs whose scheme is not local, s3, gs, http or https, when
// `handles(scheme)` is true. Replaces an earlier fallback; a null `fs` removes it. The file
// system is kept until process exit (FileSystemForPath hands out plain pointers). Thread-safe.
void SetFallbackFileSystem(std::function<bool(const std::string& scheme)> handles,
                           std::shared_ptr<FileSystem> fs);

// Fills `dst` with the bytes at `offset` (fewer only at the end); called from any thread.
using ByteRangeReader = std::function<Result<size_t>(uint64_t offset, std::span<std::byte> dst)>;

// A RandomAccessFile of `size` bytes at `url` read through `read`: direct calls for random
// reads; after AdviseSequential() dedicated threads read GetRemoteOptions().part_size parts
// ahead of the reader.
std::unique_ptr<RandomAccessFile> NewRangedRandomAccessFile(std::string url, uint64_t size,
                                                            ByteRangeReader read);

}  // namespace recordflow::io
