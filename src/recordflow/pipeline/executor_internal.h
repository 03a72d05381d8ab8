// The pipeline iterator: the record stream feeding the batch executor (executor.cc).
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "record_stream.h"
#include "recordflow/core/mutex.h"

namespace recordflow::pipeline::internal {

// A Dataset's chain split into the record stream and the executor's work (dataset.cc).
// Made once per iterator by Compile(), which also applies the static rewrites.
struct Plan {
  std::shared_ptr<const Node> last;    // keeps every node below alive for the iterator
  std::vector<const Node*> nodes;      // source first; ordinals used in checkpoints
  const Node* stream_end = nullptr;    // last record-stream stage
  std::vector<const Node*> pre_batch;  // parse / map on single records
  size_t batch_size = 0;               // 0: no batch
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

// One unit of the executor's work: a batch, or a run of unbatched records.
struct Unit {
  uint64_t epoch = 0;
  std::vector<Record> records;  // inputs; payloads dropped after processing when refs suffice
  std::vector<Element> outputs;
  size_t delivered = 0;  // outputs handed to the consumer
  Status status;
  bool done = false;
  size_t bytes = 0;
  size_t charged = 0;      // bytes charged to the memory account (records, then outputs)
  bool scheduled = false;  // handed to the pool (or done without it)
};

// What a unit holds now: its input records (payloads may have moved into outputs) and outputs.
size_t UnitBytes(const std::vector<Record>& records, const std::vector<Element>& outputs);

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
  Result<bool> GetNextFor(Element* out, std::chrono::nanoseconds timeout, bool* timed_out) override;
  Result<std::string> Checkpoint() override;
  PipelineStats stats() const override;
  uint64_t iteration() const override { return iteration_; }

 private:
  void ProduceLoop() RF_EXCLUDES(mu_);
  // GetNext with an optional deadline (GetNextFor).
  Result<bool> NextElement(Element* out,
                           std::optional<std::chrono::steady_clock::time_point> deadline,
                           bool* timed_out) RF_EXCLUDES(mu_);
  Status PullUnit(Unit* u, bool* end_of_stream);
  // Starts processing queued units: all of them, or the oldest when one runs at a time.
  void ScheduleQueued() RF_REQUIRES(mu_);
  void Schedule(const std::shared_ptr<Unit>& unit) RF_REQUIRES(mu_);
  Status Process(Unit& u);
  Status Apply(const Node* op, Element& e, const Unit& u);
  Status RestoreState(StateReader& r);
  void Stop() RF_EXCLUDES(mu_);
  void Autotune() RF_REQUIRES(mu_);
  size_t Capacity() const RF_REQUIRES(mu_);
  size_t CountReady() const RF_REQUIRES(mu_);
  // The epoch number seeded stages and augmentation seeds see for executor epoch `epoch`:
  // `epoch` itself in iteration 0, a mix of (iteration, epoch) in later iterations.
  uint64_t SeedEpoch(uint64_t epoch) const;

  Plan plan_;
  IteratorOptions options_;
  std::chrono::steady_clock::time_point start_;
  // Before ctx_: the caches in ctx_ release into it when they go.
  MemoryAccount memory_;
  StreamContext ctx_;
  int parallelism_ = 1;
  bool autotune_buffer_ = true;
  bool keep_payloads_ = false;

  // Owned by the producer thread (or by Checkpoint/Restore while it is paused/not running).
  std::unique_ptr<RecordIterator> stream_;
  SeedTable seeds_;
  std::deque<Unit> replay_;
  bool replay_done_ = false;
  Status pending_error_;
  uint64_t epoch_ = 0;
  int64_t tail_epochs_done_ = 0;
  bool produced_in_epoch_ = false;
  std::thread producer_;
  // IteratorOptions::iteration, or the restored checkpoint's (set before the producer starts).
  uint64_t iteration_ = 0;

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::shared_ptr<Unit>> units_ RF_GUARDED_BY(mu_);
  size_t buffer_ RF_GUARDED_BY(mu_) = 2;
  bool cancelled_ RF_GUARDED_BY(mu_) = false;
  bool paused_ RF_GUARDED_BY(mu_) = false;
  bool producing_ RF_GUARDED_BY(mu_) = false;
  bool stream_done_ RF_GUARDED_BY(mu_) = false;
  bool failed_ RF_GUARDED_BY(mu_) = false;
  int running_ RF_GUARDED_BY(mu_) = 0;
  bool ended_ RF_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point end_
      RF_GUARDED_BY(mu_);  // when GetNext first reported the end
  uint64_t delivered_ RF_GUARDED_BY(mu_) = 0;
  int64_t skipped_ RF_GUARDED_BY(mu_) = 0;
  uint64_t delivered_bytes_ RF_GUARDED_BY(mu_) = 0;
  double consumer_wait_ RF_GUARDED_BY(mu_) = 0;
  // A GetNextFor slice timed out since the last delivery: the consumer waited, though the
  // call that delivers may find its element ready (autotune must still see the wait).
  bool waited_in_earlier_slice_ RF_GUARDED_BY(mu_) = false;
  double ready_sum_ RF_GUARDED_BY(mu_) = 0;
  uint64_t ready_samples_ RF_GUARDED_BY(mu_) = 0;
  double process_busy_ RF_GUARDED_BY(mu_) = 0;
  uint64_t processed_elements_ RF_GUARDED_BY(mu_) = 0;
  std::vector<StageStats> stream_stats_ RF_GUARDED_BY(mu_);
  // A pool of the capped size (IteratorOptions::max_threads / max_cpu_fraction), or null.
  // Declared last: after what its tasks touch, so it is joined before those are destroyed.
  std::unique_ptr<ThreadPool> own_pool_;
};

}  // namespace recordflow::pipeline::internal
