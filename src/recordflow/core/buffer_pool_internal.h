// Recycles large output buffers (batch tensors) between consecutive units of one pipeline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "recordflow/core/thread_annotations.h"

namespace recordflow::internal {

// Hands out byte buffers as shared_ptrs whose deleter gives the buffer back to the pool, which
// keeps at most `max_idle` of them for the next Acquire of the same size, plus up to `surplus`
// more while they are still being asked for: the number of buffers a pipeline has out wobbles
// (a consumer that holds one batch longer, a prefetch that drains and refills), and a buffer
// freed on one wobble is allocated, mapped and zeroed again on the next. A surplus buffer goes
// once a whole window of `window` acquires has passed in which it was never needed (the idle
// count never fell to max_idle or below), so memory held for a demand that has gone is given
// back after `window` acquires.
//
// Why: an image batch (256 x 224 x 224 x 3 float32 = 154 MB) is above glibc's mmap threshold,
// so allocating a fresh one per batch maps fresh pages, and the kernel faults in and zeroes
// every 4 KiB page as the batch is written (~37k faults per batch, a fifth of the CPU time of
// an image pipeline). A buffer that comes back is already mapped. A new buffer of at least
// kHugePageBytes is aligned to 2 MiB and advised for transparent huge pages (MADV_HUGEPAGE, as
// PyTorch's CPU allocator does), so where the kernel has THP in "madvise" or "always" mode the
// first write of each 2 MiB faults once instead of 512 times. Where THP is off it is a no-op.
//
// Thread safety: thread-safe (Acquire and the deleters may run on any thread).
// Lifetime: buffers may outlive the pool; a buffer released after the pool is gone is freed.
// Memory: besides the buffers in use, at most max_idle + surplus idle buffers are kept, and
// more than max_idle only until a window of `window` acquires passes without needing them.
class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> Create(size_t max_idle, size_t surplus = 0,
                                            size_t window = 16);

  // Buffers this large or larger are 2 MiB aligned and advised for huge pages.
  static constexpr size_t kHugePageBytes = size_t{2} << 20;

  // A buffer of `size` bytes (at least 1), uninitialised: an idle buffer of exactly that size
  // when there is one, else a new allocation.
  std::shared_ptr<std::byte[]> Acquire(size_t size);

  size_t idle_buffers() const;
  // Acquires served by an idle buffer, and by a new allocation.
  size_t reused() const;
  size_t allocated() const;

 private:
  BufferPool(size_t max_idle, size_t surplus, size_t window)
      : max_idle_(max_idle), surplus_(surplus), window_(window == 0 ? 1 : window) {}
  void Release(std::byte* buffer, size_t size);

  struct FreeDeleter {
    void operator()(std::byte* p) const;
  };
  using Owned = std::unique_ptr<std::byte, FreeDeleter>;
  static Owned Allocate(size_t size);
  struct Idle {
    size_t size;
    Owned buffer;
  };
  const size_t max_idle_;
  const size_t surplus_;
  const size_t window_;
  mutable std::mutex mu_;
  std::vector<Idle> idle_ RF_GUARDED_BY(mu_);
  // The current window: acquires so far, and the fewest idle buffers left after any of them.
  size_t window_acquires_ RF_GUARDED_BY(mu_) = 0;
  size_t window_min_idle_ RF_GUARDED_BY(mu_) = SIZE_MAX;
  size_t reused_ RF_GUARDED_BY(mu_) = 0;
  size_t allocated_ RF_GUARDED_BY(mu_) = 0;
};

}  // namespace recordflow::internal
