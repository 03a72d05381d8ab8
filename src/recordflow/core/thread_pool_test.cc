#include "recordflow/core/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
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

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  EXPECT_EQ(SumOnDefaultPool(1000), 999u * 1000u / 2);
}

// A child forked after the default pool started (a PyTorch DataLoader worker) gets a pool of its
// own instead of queueing work for threads that do not exist there.
TEST(ThreadPoolTest, DefaultPoolWorksInForkedChild) {
  ASSERT_EQ(SumOnDefaultPool(1000), 999u * 1000u / 2);  // starts the parent's pool
  std::atomic<int> ran{0};
  ThreadPool::Default().Schedule([&] { ++ran; });
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<bool> done{false};
    ThreadPool::Default().Schedule([&] { done = true; });
    // Generous: on a loaded CI machine a forked child can wait seconds for CPU time; a real
    // deadlock still fails.
    for (int i = 0; i < 60000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    _exit(done && SumOnDefaultPool(100) == 99u * 100u / 2 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  for (int i = 0; i < 5000 && ran == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(ran.load(), 1);  // the parent's pool carries on
}

}  // namespace
}  // namespace recordflow
