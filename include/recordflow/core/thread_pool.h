// A fixed set of worker threads, and a blocking ParallelFor over it.
#pragma once

#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "recordflow/core/mutex.h"
#include "recordflow/core/status.h"

namespace recordflow {

// Runs submitted closures on `num_threads` threads.
//
// A closure must not throw: wrap its body in CatchExceptions and carry the Status to whoever
// waits for it. As a last resort a worker catches what escapes anyway, prints it to stderr and
// goes on (the process is not aborted; whoever waited for that closure's result may wait on).
//
// Thread safety: thread-safe.
// Lifetime: the destructor finishes queued work, then joins every thread.
// Names the calling thread (at most 15 characters are kept; longer names are cut). Threads the
// engine starts carry an "rf-" name: "rf-pool-<i>" (the process-wide pool), "rf-cap-<i>" (an
// iterator's capped pool), "rf-producer", "rf-fetch-<i>" (remote reads), "rf-shuffle-<i>".
void SetCurrentThreadName(std::string_view name);

class ThreadPool {
 public:
  // Workers are named "<name>-<i>" (cut to the 15 characters Linux keeps), so top -H, perf,
  // gdb and py-spy show which pool a busy thread belongs to.
  explicit ThreadPool(int num_threads, std::string_view name = "rf-pool");
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn) RF_EXCLUDES(mu_);
  int num_threads() const { return static_cast<int>(threads_.size()); }

  // The process-wide pool, one thread per core, created on first use (and again on first use
  // in a forked child, whose copy of the parent's pool has no threads).
  static ThreadPool& Default();

  // The pool whose worker thread calls this, else Default(). ParallelFor spreads its chunks
  // here, so work started on a smaller pool (an iterator's capped pool, see
  // pipeline::IteratorOptions::max_threads) stays within that pool's threads.
  static ThreadPool& Current();

 private:
  void WorkerLoop() RF_EXCLUDES(mu_);
  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ RF_GUARDED_BY(mu_);
  bool stopping_ RF_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// The Status for the exception being handled (call inside a catch block): std::bad_alloc is
// kResourceExhausted ("out of memory while <what>"), anything else kInternal.
Status StatusFromCurrentException(const std::string& what);

// Runs `fn` (returning Status) at a thread or task boundary, turning any C++ exception it
// throws into a Status (see StatusFromCurrentException), so none escapes the thread.
template <typename Fn>
Status CatchExceptions(const std::string& what, Fn&& fn) {
  try {
    return fn();
  } catch (...) {
    return StatusFromCurrentException(what);
  }
}

// Calls fn(begin, end) over [0, n) split into at most `max_parallelism` contiguous chunks of at
// least `min_chunk` items, on ThreadPool::Current() and the calling thread; returns when all are
// done. max_parallelism <= 0 means one chunk per core. An exception thrown by `fn` on any
// thread is rethrown on the calling thread once every chunk has finished.
void ParallelFor(size_t n, size_t min_chunk, int max_parallelism,
                 const std::function<void(size_t begin, size_t end)>& fn);

}  // namespace recordflow
