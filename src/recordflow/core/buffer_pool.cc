#include "recordflow/core/buffer_pool_internal.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <utility>

namespace recordflow::internal {

std::shared_ptr<BufferPool> BufferPool::Create(size_t max_idle) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_idle));
}

void BufferPool::FreeDeleter::operator()(std::byte* p) const { std::free(p); }

BufferPool::Owned BufferPool::Allocate(size_t size) {
  void* p = nullptr;
  if (size >= kHugePageBytes) {
    // Whole 2 MiB pages, so the advice covers the buffer and nothing else of the heap.
    const size_t rounded = (size + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    if (posix_memalign(&p, kHugePageBytes, rounded) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
#endif
  } else {
    p = std::malloc(size);
    if (p == nullptr) throw std::bad_alloc();
  }
  return Owned(static_cast<std::byte*>(p));
}

std::shared_ptr<std::byte[]> BufferPool::Acquire(size_t size) {
  size = std::max<size_t>(size, 1);
  Owned buffer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(idle_.begin(), idle_.end(),
                           [size](const Idle& idle) { return idle.size == size; });
    if (it != idle_.end()) {
      buffer = std::move(it->buffer);
      idle_.erase(it);
      ++reused_;
    } else {
      ++allocated_;
    }
  }
  // Not value-initialised: callers write every byte they hand out.
  if (buffer == nullptr) buffer = Allocate(size);
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::shared_ptr<std::byte[]>(buffer.release(), [pool, size](std::byte* p) {
    if (std::shared_ptr<BufferPool> alive = pool.lock()) {
      alive->Release(p, size);
    } else {
      FreeDeleter()(p);
    }
  });
}

void BufferPool::Release(std::byte* buffer, size_t size) {
  Owned owned(buffer);
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back({size, std::move(owned)});
  // Else `owned` frees it (under the lock, which is short: one delete).
}

size_t BufferPool::idle_buffers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}
size_t BufferPool::reused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reused_;
}
size_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_;
}

}  // namespace recordflow::internal
