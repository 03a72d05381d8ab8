// The memory account of one pipeline iterator (IteratorOptions::memory_budget).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "recordflow/core/status.h"

namespace recordflow::pipeline::internal {

// The bytes one pipeline iterator holds in its buffers, against IteratorOptions::memory_budget.
// Every record-holding buffer charges what it keeps and releases it when the records leave.
// Two kinds of buffer use it differently:
//   fixed    (shuffle buffer, memory cache): their size is the user's choice; they charge
//            unconditionally and fail with ResourceExhausted (CheckFixed) once the fixed
//            buffers alone exceed the budget, instead of growing without bound.
//   elastic  (interleave read-ahead, executor units): they take only what is left (Fits) and
//            wait otherwise, keeping one record per read-ahead slot and one executor unit as a
//            floor so that the pipeline always makes progress.
//   readers  (the record buffer and decompressor of each open file): counted but never
//            refused, since a file cannot be read without them; what they hold is what the
//            elastic buffers cannot take.
//
// Thread safety: thread-safe (atomics; peaks are best-effort maxima of the running totals).
class MemoryAccount {
 public:
  enum Stage : int { kShuffle, kInterleave, kCache, kExecutor, kReaders, kNumStages };
  static const char* StageName(int stage);

  explicit MemoryAccount(size_t budget) : budget_(budget) {}
  void Charge(int stage, size_t bytes);
  void Release(int stage, size_t bytes);
  // True when `bytes` more would keep the total within the budget.
  bool Fits(size_t bytes) const { return held() + bytes <= budget_; }
  // kResourceExhausted when the fixed buffers (shuffle + cache) and the record readers exceed
  // the budget; `stage` is the one that grew and `what` describes it ("buffer_size=50000").
  Status CheckFixed(int stage, const std::string& what) const;

  size_t budget() const { return budget_; }
  size_t held() const { return total_.load(std::memory_order_relaxed); }
  size_t peak() const { return total_peak_.load(std::memory_order_relaxed); }
  size_t held(int stage) const { return held_[stage].load(std::memory_order_relaxed); }
  size_t peak(int stage) const { return peak_[stage].load(std::memory_order_relaxed); }

 private:
  const size_t budget_;
  std::atomic<size_t> total_{0};
  std::atomic<size_t> total_peak_{0};
  std::atomic<size_t> held_[kNumStages] = {};
  std::atomic<size_t> peak_[kNumStages] = {};
};

}  // namespace recordflow::pipeline::internal
