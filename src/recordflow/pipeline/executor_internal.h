// The pipeline iterator: the record stream feeding the batch executor (executor.cc).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "pipeline_internal.h"
#include "recordflow/core/thread_annotations.h"

namespace recordflow::pipeline::internal {

// What MapThreads() and MapCancelled() answer on this thread (executor.cc).
inline thread_local int map_threads_on_this_thread = 1;
inline const std::atomic<bool> never_cancelled{false};
inline thread_local const std::atomic<bool>* map_cancelled_on_this_thread = &never_cancelled;

// A Dataset's chain split into the record stream and the executor's work (dataset.cc).
// Made once per iterator by Compile(), which also applies the static rewrites.
struct Plan {
  std::shared_ptr<const Node> last;  // keeps every node below alive for the iterator
  std::vector<const Node*> nodes;  // source first; ordinals used in checkpoints
  const Node* stream_end = nullptr;  // last record-stream stage
  std::vector<const Node*> pre_batch;   // parse / map on single records
  size_t batch_size = 0;                // 0: no batch
  bool drop_remainder = false;
  std::vector<const Node*> post_batch;  // parse / map on batches
  // A post-batch map splits each batch over the threads itself: process one unit at a time.
  bool one_batch_at_a_time = false;
  int num_parallel = kAutotune;
  int prefetch = kAutotune;
  bool deterministic = true;
  int64_t tail_repeat = 0;  // repeat after batch/parse/map: count (-1 forever), 0 none
  int64_t take = -1;        // outputs
  int64_t skip = 0;
  uint64_t fingerprint = 0;
  std::string stream_description;
  std::string executor_description;
  // The optimizer's rewrites (empty when the chain runs as written), and the whole chain in the
  // order it runs.
  std::vector<std::string> rewrites;
  std::string run_description;

  uint64_t NodeOrdinal(const Node* n) const {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i] == n) return i;
    }
    return ~uint64_t{0};
  }
  const Node* NodeAt(uint64_t i) const { return i < nodes.size() ? nodes[i] : nullptr; }
};

class EmptyStream final : public RecordIterator {
 public:
  Result<bool> Next(Record*) override { return false; }
  Status Save(StateWriter&) override { return Status(); }
  Status Restore(StateReader&) override { return Status(); }
};

class PipelineIterator final : public Iterator {
 public:
  PipelineIterator(Plan plan, IteratorOptions options);
  ~PipelineIterator() override;

  // Builds the record stream (restoring it from `restore_from` when given) and starts the
  // producer thread.
  Status Start(SeedTable seeds, StateReader* restore_from);

  Result<bool> GetNext(Element* out) override;
  Result<bool> GetNextFor(Element* out, std::chrono::nanoseconds timeout,
                          bool* timed_out) override;
  Result<std::string> Checkpoint() override;
  PipelineStats stats() const override;
  uint64_t iteration() const override { return iteration_; }

 private:
  struct Unit;

  void ProduceLoop();
  // GetNext with an optional deadline (GetNextFor).
  Result<bool> NextElement(Element* out, std::optional<std::chrono::steady_clock::time_point> deadline,
                           bool* timed_out);
  Status PullUnit(Unit* u, bool* end_of_stream);
  // Starts processing queued units: all of them, or the oldest when one runs at a time.
  // mu_ held.
  void ScheduleQueued();
  void Schedule(const std::shared_ptr<Unit>& unit);
  Status Process(Unit& u);
  Status Apply(const Node* op, Element& e, const Unit& u);
  Status RestoreState(StateReader& r);
  void Stop();
  void Autotune();  // mu_ held
  size_t Capacity() const;
  size_t CountReady() const;
  // The epoch number seeded stages and augmentation seeds see for executor epoch `epoch`:
  // `epoch` itself in iteration 0, a mix of (iteration, epoch) in later iterations.
  uint64_t SeedEpoch(uint64_t epoch) const;

  Plan plan_;
  IteratorOptions options_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point end_;  // when GetNext first reported the end
  bool ended_ = false;
  // Before ctx_: the caches in ctx_ release into it when they go.
  MemoryAccount memory_;
  StreamContext ctx_;
  SeedTable seeds_;
  int parallelism_ = 1;
  bool autotune_buffer_ = true;
  size_t buffer_ = 2;
  bool keep_payloads_ = false;

  // Owned by the producer thread (or by Checkpoint/Restore while it is paused/not running).
  std::unique_ptr<RecordIterator> stream_;
  std::deque<Unit> replay_;
  bool replay_done_ = false;
  Status pending_error_;
  uint64_t epoch_ = 0;
  // IteratorOptions::iteration, or the restored checkpoint's.
  uint64_t iteration_ = 0;
  int64_t tail_epochs_done_ = 0;
  bool produced_in_epoch_ = false;
  std::thread producer_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Unit>> units_ RF_GUARDED_BY(mu_);
  bool cancelled_ RF_GUARDED_BY(mu_) = false;
  bool paused_ RF_GUARDED_BY(mu_) = false;
  bool producing_ RF_GUARDED_BY(mu_) = false;
  bool stream_done_ RF_GUARDED_BY(mu_) = false;
  bool failed_ = false;
  int running_ RF_GUARDED_BY(mu_) = 0;
  uint64_t delivered_ = 0;
  int64_t skipped_ = 0;
  uint64_t delivered_bytes_ = 0;
  double consumer_wait_ = 0;
  // A GetNextFor slice timed out since the last delivery: the consumer waited, though the
  // call that delivers may find its element ready (autotune must still see the wait).
  bool waited_in_earlier_slice_ RF_GUARDED_BY(mu_) = false;
  double ready_sum_ = 0;
  uint64_t ready_samples_ = 0;
  double process_busy_ RF_GUARDED_BY(mu_) = 0;
  uint64_t processed_elements_ RF_GUARDED_BY(mu_) = 0;
  std::vector<StageStats> stream_stats_;
};

}  // namespace recordflow::pipeline::internal
