#include "recordflow/core/thread_pool.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>

#include <pthread.h>

namespace recordflow {
namespace {
// The pool the calling thread works for (null: not a pool worker).
thread_local ThreadPool* current_pool = nullptr;
}  // namespace

void SetCurrentThreadName(std::string_view name) {
  char cut[16] = {};
  name.copy(cut, sizeof(cut) - 1);
  pthread_setname_np(pthread_self(), cut);  // fails only for a name over 15 bytes
}

ThreadPool::ThreadPool(int num_threads, std::string_view name) {
  for (int i = 0; i < std::max(1, num_threads); ++i) {
    threads_.emplace_back([this, worker = std::string(name) + "-" + std::to_string(i)] {
      SetCurrentThreadName(worker);
      WorkerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  {
    MutexLock lock(mu_);
    queue_.push_back(std::move(fn));
  }
  cv_.NotifyOne();
}

void ThreadPool::WorkerLoop() {
  current_pool = this;
  while (true) {
    std::function<void()> fn;
    {
      MutexLock lock(mu_);
      while (!stopping_ && queue_.empty()) cv_.Wait(mu_);
      if (queue_.empty()) return;  // stopping and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      fn();
    } catch (...) {
      // A closure broke the contract; an exception leaving the thread would abort the process.
      const Status s = StatusFromCurrentException("running a thread-pool task");
      std::fprintf(stderr, "recordflow: %s\n", s.ToString().c_str());
    }
  }
}

Status StatusFromCurrentException(const std::string& what) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory while " + what);
  } catch (const std::exception& e) {
    return InternalError("unexpected exception while " + what + ": " + e.what());
  } catch (...) {
    return InternalError("unexpected exception while " + what);
  }
}

namespace {

// The default pool; never destroyed: workers may outlive static destruction order.
std::atomic<ThreadPool*> default_pool{nullptr};

// A forked child has only the thread that called fork(): the parent's pool has no workers
// there (and its mutex may have been held by one), so the child starts a pool of its own on
// first use. This is what lets PyTorch DataLoader workers, forked from a process that already
// ran recordflow, run it too. The parent's pool object is left alone (not joined).
void ForgetPoolInChild() { default_pool.store(nullptr, std::memory_order_relaxed); }

// RECORDFLOW_NUM_THREADS when set, else the CPUs this process may run on (taskset, cgroup
// cpusets), else the machine's.
int DefaultThreadCount() {
  if (const char* env = std::getenv("RECORDFLOW_NUM_THREADS")) {
    const long n = std::strtol(env, nullptr, 10);
    if (n > 0 && n <= 4096) return static_cast<int>(n);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

ThreadPool& ThreadPool::Default() {
  static const int registered = pthread_atfork(nullptr, nullptr, &ForgetPoolInChild);
  (void)registered;
  ThreadPool* pool = default_pool.load(std::memory_order_acquire);
  if (pool != nullptr) return *pool;
  auto fresh = std::make_unique<ThreadPool>(DefaultThreadCount());
  if (default_pool.compare_exchange_strong(pool, fresh.get(), std::memory_order_acq_rel)) {
    return *fresh.release();
  }
  return *pool;  // another thread made it first; `fresh` is joined and freed
}

ThreadPool& ThreadPool::Current() { return current_pool != nullptr ? *current_pool : Default(); }

void ParallelFor(size_t n, size_t min_chunk, int max_parallelism,
                 const std::function<void(size_t, size_t)>& fn) {
  if (n == 0) return;
  ThreadPool& pool = ThreadPool::Current();
  size_t parallelism = max_parallelism > 0 ? static_cast<size_t>(max_parallelism)
                                           : static_cast<size_t>(pool.num_threads());
  size_t chunks = std::min(parallelism, std::max<size_t>(1, n / std::max<size_t>(1, min_chunk)));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  // Shared state lives on the heap: a helper task may start after every chunk is done and the
  // caller has returned.
  struct State {
    std::atomic<size_t> next{0};
    Mutex mu;
    CondVar done_cv;
    size_t finished RF_GUARDED_BY(mu) = 0;
    std::exception_ptr error RF_GUARDED_BY(mu);  // the first exception a chunk threw
  };
  auto state = std::make_shared<State>();
  // Every participant, the caller included, claims chunks until none are left, so the caller
  // never waits on a chunk that no thread has started (no deadlock when called from a worker).
  auto work = [state, chunks, n, &fn] {
    size_t c;
    while ((c = state->next.fetch_add(1)) < chunks) {
      std::exception_ptr error;
      try {
        fn(n * c / chunks, n * (c + 1) / chunks);
      } catch (...) {
        error = std::current_exception();
      }
      MutexLock lock(state->mu);
      if (error && !state->error) state->error = error;
      if (++state->finished == chunks) state->done_cv.NotifyAll();
    }
  };
  for (size_t c = 1; c < chunks; ++c) {
    pool.Schedule([state, chunks, work] {
      if (state->next.load() < chunks) work();
    });
  }
  work();
  MutexLock lock(state->mu);
  while (state->finished != chunks) state->done_cv.Wait(state->mu);
  if (state->error) std::rethrow_exception(state->error);
}

}  // namespace recordflow
