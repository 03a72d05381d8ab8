// A mutex, its scoped lock and a condition variable that clang's thread-safety analysis
// understands (std::mutex carries no capability annotation, so members "guarded" by one are
// not checked). Build with -DRF_THREAD_SAFETY_ANALYSIS=ON under clang to check them.
//
// Waiting on a CondVar releases and re-acquires the Mutex inside the call; to the analysis the
// mutex stays held throughout, which is what the code around the wait sees. Write waits as
//   while (!condition) cv.Wait(mu);
// so that the condition is read where the analysis knows the lock is held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "recordflow/core/thread_annotations.h"

namespace recordflow {

// Thread safety: thread-safe.
class RF_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() RF_ACQUIRE() { mu_.lock(); }
  void Unlock() RF_RELEASE() { mu_.unlock(); }
  // For code paths whose locking the analysis cannot follow (say why at the call).
  void AssertHeld() const RF_ASSERT_HELD(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` from construction to destruction; Unlock/Lock release and re-take it in between.
class RF_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) RF_ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RF_RELEASE() {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RF_RELEASE() {
    held_ = false;
    mu_.Unlock();
  }
  void Lock() RF_ACQUIRE() {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// Thread safety: thread-safe.
class CondVar {
 public:
  // Releases `mu`, waits for a notification (or a spurious wake-up), re-acquires `mu`.
  void Wait(Mutex& mu) RF_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's lock owns it
  }
  // As Wait, until `deadline` at the latest. True when the deadline has passed.
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      RF_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_until(lock, deadline) == std::cv_status::timeout;
    lock.release();
    return timed_out;
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace recordflow
