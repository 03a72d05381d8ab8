// A RandomAccessFile over any object store that can serve byte ranges: direct ranged GETs for
// random reads, and after AdviseSequential() concurrent GETs of large parts ahead of the reader.
// The bytes the open request already fetched (the object's head, all of a small object) are
// served from memory, so a small object costs one request in all.
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
  // `head`: bytes [0, head.size()) of the object, fetched when it was opened (may be empty).
  RemoteRandomAccessFile(std::string url, uint64_t size, RangeFetcher fetch, RemoteOptions options,
                         std::vector<std::byte> head = {});
  ~RemoteRandomAccessFile() override;
  Result<size_t> ReadAt(uint64_t offset, std::span<std::byte> dst) const override;
  void AdviseSequential() const override;
  size_t buffered_bytes() const override;

 private:
  struct Part {
    uint64_t index = 0;
    uint64_t begin = 0;  // object offset of data[0]
    bool done = false;
    bool started = false;
    Status status;
    std::vector<std::byte> data;
  };
  Result<size_t> ReadSequential(uint64_t offset, std::span<std::byte> dst) const;
  // Copies what of [offset, offset + dst.size()) the head holds; requires mu_.
  size_t ReadHead(uint64_t offset, std::span<std::byte> dst) const;
  uint64_t PartBegin(uint64_t index) const;
  bool sequential_now() const;
  void Schedule(uint64_t first_part) const;  // requires mu_
  void Worker() const;

  RangeFetcher fetch_;
  RemoteOptions options_;
  const uint64_t head_size_;             // parts start after the head, even once it is released
  mutable std::vector<std::byte> head_;  // released once the reader has moved past it
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable bool sequential_ = false;
  mutable bool stop_ = false;
  mutable std::deque<std::shared_ptr<Part>> window_;  // consecutive parts, oldest first
  mutable std::vector<std::thread> workers_;
};

}  // namespace recordflow::io::internal
