#include "recordflow/core/thread_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

namespace recordflow {
namespace {

size_t SumOnDefaultPool(size_t n) {
  std::atomic<size_t> sum{0};
  ParallelFor(n, 1, 0, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) sum += i;
  });
  return sum.load();
}

std::string CurrentThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// top -H, perf and py-spy tell the engine's threads apart by name.
TEST(ThreadPoolTest, WorkersAreNamedAfterTheirPool) {
  std::string seen[2];
  {
    ThreadPool pool(2, "rf-test");
    std::atomic<int> done{0};
    // Both tasks wait for each other, so each runs on its own worker.
    for (int i = 0; i < 2; ++i) {
      pool.Schedule([&, i] {
        seen[i] = CurrentThreadName();
        done.fetch_add(1);
        while (done.load() < 2) std::this_thread::yield();
      });
    }
  }  // the destructor finishes the tasks and joins
  EXPECT_TRUE((seen[0] == "rf-test-0" && seen[1] == "rf-test-1") ||
              (seen[0] == "rf-test-1" && seen[1] == "rf-test-0"))
      << seen[0] << ", " << seen[1];
  std::string default_name;
  std::atomic<bool> named{false};
  ThreadPool::Default().Schedule([&] {
    default_name = CurrentThreadName();
    named.store(true);
  });
  while (!named.load()) std::this_thread::yield();
  EXPECT_EQ(default_name.rfind("rf-pool-", 0), 0u) << default_name;
  // Linux keeps 15 characters; a longer name is cut, not refused.
  std::thread([] {
    SetCurrentThreadName("rf-a-name-longer-than-fifteen");
    EXPECT_EQ(CurrentThreadName(), "rf-a-name-longe");
  }).join();
}

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  EXPECT_EQ(SumOnDefaultPool(1000), 999u * 1000u / 2);
}

// Returns once every worker of the default pool has run a task queued after all earlier work and
// finished it, so no worker is inside a task (or freeing one) when this returns. The task's
// std::function holds two references inline (no heap), so after the last increment the workers
// only go back to waiting on the queue's condition variable, without touching the allocator.
void WaitUntilDefaultPoolIsParked() {
  ThreadPool& pool = ThreadPool::Default();
  const int n = pool.num_threads();
  std::atomic<int> arrived{0};
  std::atomic<int> left{0};
  for (int i = 0; i < n; ++i) {
    pool.Schedule([&arrived, &left] {
      // Each worker holds here until all have arrived: then every earlier task (FIFO) is done.
      arrived.fetch_add(1);
      while (arrived.load() < static_cast<int>(ThreadPool::Default().num_threads())) {
        std::this_thread::yield();
      }
      left.fetch_add(1);
    });
  }
  while (left.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // back into the condition wait
}

// A child forked after the default pool started (a PyTorch DataLoader worker) gets a pool of its
// own instead of queueing work for threads that do not exist there.
//
// The fork happens with the parent's workers parked, as when a DataLoader starts its workers.
// Forking while a worker is mid-task is not safe under gcc 12's ASan runtime: its allocator
// locks are not taken around fork, so a lock held by a parent worker stays held in the child
// and the child's new workers block on their first free (seen in CI: the child timed out).
// glibc's own malloc is fork-safe, so this is a limit of the sanitizer, not of the pool.
TEST(ThreadPoolTest, DefaultPoolWorksInForkedChild) {
  ASSERT_EQ(SumOnDefaultPool(1000), 999u * 1000u / 2);  // starts the parent's pool
  WaitUntilDefaultPoolIsParked();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<bool> done{false};
    ThreadPool::Default().Schedule([&] { done = true; });
    // Generous: on a loaded CI machine a forked child can wait seconds for CPU time; a real
    // deadlock still fails.
    for (int i = 0; i < 60000 && !done; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    _exit(done && SumOnDefaultPool(100) == 99u * 100u / 2 ? 0 : 1);
  }
  std::atomic<int> ran{0};
  ThreadPool::Default().Schedule([&] { ++ran; });  // the parent's pool carries on meanwhile
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int i = 0; i < 5000 && ran == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran.load(), 1);
}

TEST(ThreadPoolTest, AnExceptionFromATaskDoesNotEndTheProcess) {
  // A task that throws (std::bad_alloc from a huge allocation) used to leave its worker
  // thread, which calls std::terminate: the whole process died with SIGABRT.
  ThreadPool pool(1);
  std::atomic<int> after{0};
  pool.Schedule([] { throw std::bad_alloc(); });
  pool.Schedule([&] { after = 1; });
  for (int i = 0; i < 500 && after.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(after.load(), 1) << "the worker did not go on after the throwing task";
}

TEST(ThreadPoolTest, ParallelForRethrowsAChunksExceptionOnTheCaller) {
  bool caught = false;
  try {
    ParallelFor(64, 1, 4, [](size_t begin, size_t) {
      if (begin != 0) throw std::bad_alloc();
    });
  } catch (const std::bad_alloc&) {
    caught = true;
  }
  EXPECT_TRUE(caught);
}

TEST(ThreadPoolTest, CatchExceptionsTurnsBadAllocIntoResourceExhausted) {
  Status s = CatchExceptions("growing the test buffer", []() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("growing the test buffer"), std::string::npos) << s.message();
  s = CatchExceptions("x", []() -> Status { throw std::runtime_error("boom"); });
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.ToString();
  EXPECT_EQ(CatchExceptions("x", [] { return Status(); }).code(), StatusCode::kOk);
}

}  // namespace
}  // namespace recordflow
