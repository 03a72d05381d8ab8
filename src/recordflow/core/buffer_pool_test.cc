#include "recordflow/core/buffer_pool_internal.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace recordflow::internal {
namespace {

TEST(BufferPoolTest, AReleasedBufferServesTheNextAcquireOfTheSameSize) {
  auto pool = BufferPool::Create(2);
  std::byte* first = nullptr;
  {
    std::shared_ptr<std::byte[]> a = pool->Acquire(1000);
    first = a.get();
    a[999] = std::byte{7};
    EXPECT_EQ(pool->idle_buffers(), 0u);
  }
  EXPECT_EQ(pool->idle_buffers(), 1u);
  std::shared_ptr<std::byte[]> other_size = pool->Acquire(999);
  EXPECT_NE(other_size.get(), first);
  std::shared_ptr<std::byte[]> again = pool->Acquire(1000);
  EXPECT_EQ(again.get(), first);
  EXPECT_EQ(pool->idle_buffers(), 0u);
  EXPECT_EQ(pool->reused(), 1u);
  EXPECT_EQ(pool->allocated(), 2u);
}

TEST(BufferPoolTest, KeepsAtMostMaxIdleBuffers) {
  auto pool = BufferPool::Create(2);
  {
    std::vector<std::shared_ptr<std::byte[]>> held;
    for (int i = 0; i < 5; ++i) held.push_back(pool->Acquire(64));
  }
  EXPECT_EQ(pool->idle_buffers(), 2u);
  auto none = BufferPool::Create(0);
  { auto b = none->Acquire(64); }
  EXPECT_EQ(none->idle_buffers(), 0u);
}

TEST(BufferPoolTest, BuffersOutliveThePool) {
  std::shared_ptr<std::byte[]> kept;
  {
    auto pool = BufferPool::Create(4);
    kept = pool->Acquire(4096);
    { auto idle = pool->Acquire(4096); }  // idle when the pool goes: freed with it
  }
  kept[4095] = std::byte{1};  // still valid (ASan checks); freed by the deleter below
  EXPECT_EQ(kept[4095], std::byte{1});
  kept.reset();
}

TEST(BufferPoolTest, ConcurrentAcquireAndRelease) {
  auto pool = BufferPool::Create(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        auto b = pool->Acquire(128 + (i % 2) * 64);
        b[0] = static_cast<std::byte>(t);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(pool->idle_buffers(), 3u);
  EXPECT_EQ(pool->reused() + pool->allocated(), 8000u);
  EXPECT_GT(pool->reused(), 0u);
}

}  // namespace
}  // namespace recordflow::internal
