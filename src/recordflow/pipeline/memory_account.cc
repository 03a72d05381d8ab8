// The memory account (memory_account.h).
#include "memory_account.h"

namespace recordflow::pipeline::internal {

const char* MemoryAccount::StageName(int stage) {
  switch (stage) {
    case kShuffle:
      return "shuffle";
    case kInterleave:
      return "interleave read-ahead";
    case kCache:
      return "cache";
    case kExecutor:
      return "executor";
    case kReaders:
      return "record readers";
    default:
      return "?";
  }
}

namespace {
void RaiseTo(std::atomic<size_t>& peak, size_t value) {
  size_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}
}  // namespace

void MemoryAccount::Charge(int stage, size_t bytes) {
  if (bytes == 0) return;
  RaiseTo(peak_[stage], held_[stage].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  RaiseTo(total_peak_, total_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryAccount::Release(int stage, size_t bytes) {
  if (bytes == 0) return;
  held_[stage].fetch_sub(bytes, std::memory_order_relaxed);
  total_.fetch_sub(bytes, std::memory_order_relaxed);
}

Status MemoryAccount::CheckFixed(int stage, const std::string& what) const {
  // The record readers count here too: the open files need them whatever the budget says.
  const size_t fixed = held(kShuffle) + held(kCache) + held(kReaders);
  if (fixed <= budget_) return Status();
  std::string others;
  auto with = [&](int other, const char* what) {
    if (other == stage || held(other) == 0) return;
    others += (others.empty() ? " (with " : ", ") + std::string(what) + " holding " +
              std::to_string(held(other)) + " bytes";
  };
  with(kShuffle, "shuffle buffers");
  with(kCache, "memory caches");
  with(kReaders, "record readers");
  if (!others.empty()) others += ")";
  const char* fix = stage == kShuffle
                        ? "lower the shuffle's buffer_size, or raise the iterator's memory_budget"
                        : "cache to a file (Cache(path)), or raise the iterator's memory_budget";
  return ResourceExhaustedError(std::string(StageName(stage)) + " " + what + ": holds " +
                                std::to_string(held(stage)) + " bytes" + others +
                                ", over the iterator's memory_budget of " +
                                std::to_string(budget_) + " bytes; " + fix);
}

}  // namespace recordflow::pipeline::internal
