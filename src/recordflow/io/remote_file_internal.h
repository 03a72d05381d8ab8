// A RandomAccessFile over any object store that can serve byte ranges: direct ranged GETs for
// random reads, and after AdviseSequential() concurrent GETs of large parts ahead of the reader.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::io::internal {

// Fills `dst` with the bytes at `offset` (fewer only at the end of the object), retrying and
// resuming as needed. Returns the count or the final error (naming URL and offset).
using RangeFetcher = std::function<Result<size_t>(uint64_t offset, std::span<std::byte> dst)>;

// Thread safety: thread-safe. Lifetime: joins its read-ahead threads on destruction.
class RemoteRandomAccessFile final : public RandomAccessFile {
 public:
  RemoteRandomAccessFile(std::string url, uint64_t size, RangeFetcher fetch, RemoteOptions options);
  ~RemoteRandomAccessFile() override;
  Result<size_t> ReadAt(uint64_t offset, std::span<std::byte> dst) const override;
  void AdviseSequential() const override;

 private:
  struct Part {
    uint64_t index = 0;
    bool done = false;
    bool started = false;
    Status status;
    std::vector<std::byte> data;
  };
  Result<size_t> ReadSequential(uint64_t offset, std::span<std::byte> dst) const;
  void Schedule(uint64_t first_part) const;  // requires mu_
  void Worker() const;

  RangeFetcher fetch_;
  RemoteOptions options_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable bool sequential_ = false;
  mutable bool stop_ = false;
  mutable std::deque<std::shared_ptr<Part>> window_;  // consecutive parts, oldest first
  mutable std::vector<std::thread> workers_;
};

}  // namespace recordflow::io::internal
