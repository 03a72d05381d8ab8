#include "recordflow/core/buffer_pool_internal.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
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

// Demand that wobbles between 2 and 4 buffers out allocates 4 once, then reuses them: the
// surplus over max_idle is kept while it is needed. Once demand falls to 1 for a whole window,
// the surplus is freed back to max_idle.
TEST(BufferPoolTest, SurplusFollowsAWobblingDemandThenIsTrimmed) {
  auto pool = BufferPool::Create(/*max_idle=*/1, /*surplus=*/3, /*window=*/8);
  std::vector<std::shared_ptr<std::byte[]>> out;
  for (int round = 0; round < 20; ++round) {
    const size_t want = round % 3 == 2 ? 4 : 2;
    while (out.size() < want) out.push_back(pool->Acquire(4096));
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(want - 1));  // keep one
  }
  EXPECT_EQ(pool->allocated(), 4u) << "a wobble re-allocated a buffer the pool had freed";
  EXPECT_EQ(pool->reused(), 29u);  // 33 acquires in all
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(pool->idle_buffers(), 3u);
  // Demand of one at a time: after a window of acquires that never needed the surplus, the
  // pool keeps max_idle.
  for (int i = 0; i < 16; ++i) {
    out.clear();
    out.push_back(pool->Acquire(4096));
  }
  EXPECT_EQ(pool->allocated(), 4u);
  EXPECT_EQ(pool->idle_buffers(), 1u);
  // Without surplus (the default), the same wobble frees and re-allocates.
  auto strict = BufferPool::Create(1);
  out.clear();
  for (int round = 0; round < 20; ++round) {
    const size_t want = round % 3 == 2 ? 4 : 2;
    while (out.size() < want) out.push_back(strict->Acquire(4096));
    out.erase(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(want - 1));
  }
  EXPECT_GT(strict->allocated(), 4u);
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

// The VmFlags line of the /proc/self/smaps mapping holding `p`, or "" when none is found.
std::string VmFlagsOf(const void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= addr && addr < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(BufferPoolTest, LargeBuffersAreHugePageAlignedAndAdvised) {
  auto pool = BufferPool::Create(1);
  const size_t size = 3 * BufferPool::kHugePageBytes + 12345;  // not a multiple of 2 MiB
  std::shared_ptr<std::byte[]> big = pool->Acquire(size);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.get()) % BufferPool::kHugePageBytes, 0u);
  big[0] = std::byte{1};
  big[size - 1] = std::byte{2};
  // MADV_HUGEPAGE marks the mapping "hg" where the kernel has transparent huge pages.
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  if (thp.good()) {
    const std::string flags = VmFlagsOf(big.get());
    ASSERT_FALSE(flags.empty());
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  }
  std::byte* first = big.get();
  big.reset();
  EXPECT_EQ(pool->Acquire(size).get(), first);  // recycled like any other size
  // Small buffers come from malloc as before (no 2 MiB padding).
  EXPECT_NE(pool->Acquire(100), nullptr);
}

}  // namespace
}  // namespace recordflow::internal
