#include "recordflow/core/buffer_pool_internal.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <utility>

namespace recordflow::internal {

std::shared_ptr<BufferPool> BufferPool::Create(size_t max_idle, size_t surplus, size_t window) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_idle, surplus, window));
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
  std::vector<Idle> unneeded;  // freed after the lock is dropped (a munmap each)
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
    window_min_idle_ = std::min(window_min_idle_, idle_.size());
    if (++window_acquires_ >= window_) {
      // Buffers beyond max_idle that stayed idle through the whole window were not needed.
      size_t drop = window_min_idle_ > max_idle_ ? window_min_idle_ - max_idle_ : 0;
      for (; drop > 0 && !idle_.empty(); --drop) {
        unneeded.push_back(std::move(idle_.front()));  // the oldest first
        idle_.erase(idle_.begin());
      }
      window_acquires_ = 0;
      window_min_idle_ = SIZE_MAX;
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
  if (idle_.size() < max_idle_ + surplus_) idle_.push_back({size, std::move(owned)});
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
