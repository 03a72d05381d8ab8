// The record stream: the record-level stages (stages/*.cc) as a chain of RecordIterators
// sharing one StreamContext, and what lets their state be saved by record reference.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_codec.h"
#include "memory_account.h"
#include "node.h"
#include "recordflow/core/mutex.h"
#include "recordflow/core/status.h"
#include "recordflow/core/thread_pool.h"

namespace recordflow::pipeline::internal {

// Reads any record back by its position; lets checkpoints store record references.
//
// Thread safety: thread-safe.
class RecordFetcher {
 public:
  RecordFetcher(std::vector<std::string> files, FilesOptions options,
                std::shared_ptr<const std::vector<std::string>> memory);
  // True when every record can be read back by position (uncompressed files or memory).
  bool can_fetch() const { return can_fetch_; }
  Result<std::string> Fetch(const RecordPosition& position) const;
  const std::vector<std::string>& files() const { return files_; }

 private:
  std::vector<std::string> files_;
  FilesOptions options_;
  std::shared_ptr<const std::vector<std::string>> memory_;
  bool can_fetch_ = false;
};

struct CacheStore;  // stages/cache.cc

// Shared by all stage iterators of one pipeline iterator.
struct StreamContext {
  std::shared_ptr<RecordFetcher> fetcher;
  std::atomic<bool> cancelled{false};
  // Caches filled in the first epoch, by the Node that owns them.
  Mutex cache_mu;
  std::map<const Node*, std::shared_ptr<CacheStore>> caches RF_GUARDED_BY(cache_mu);
  // The iterator's memory account; null: nothing is counted (stand-alone stream tests).
  MemoryAccount* memory = nullptr;
  // The iterator's thread pool (IteratorOptions::max_threads); null: the process's pool.
  ThreadPool* pool = nullptr;
  ThreadPool& Pool() const { return pool != nullptr ? *pool : ThreadPool::Default(); }
  void Charge(int stage, size_t bytes) const {
    if (memory != nullptr) memory->Charge(stage, bytes);
  }
  void Release(int stage, size_t bytes) const {
    if (memory != nullptr) memory->Release(stage, bytes);
  }

  // Saves a record as a reference (position) when it can be fetched back, else its bytes.
  void SaveRecord(StateWriter& w, const Record& r) const;
  Result<Record> RestoreRecord(StateReader& r) const;
};

// One stage of the record stream.
//
// Thread safety: thread-compatible: one thread calls Next; Save/Restore while no Next runs.
class RecordIterator {
 public:
  virtual ~RecordIterator() = default;
  // Sets *out and returns true; false at the end of the stream.
  virtual Result<bool> Next(Record* out) = 0;
  virtual Status Save(StateWriter& w) = 0;
  virtual Status Restore(StateReader& r) = 0;
};

// A stage whose only state is how many records it has read from its input (shard, take, skip):
// it saves that count, then its input's state.
class CountingRecordIterator : public RecordIterator {
 public:
  Status Save(StateWriter& w) final {
    w.U64(seen_);
    return input_->Save(w);
  }
  Status Restore(StateReader& r) final {
    RF_ASSIGN_OR_RETURN(seen_, r.U64(what_));
    return input_->Restore(r);
  }

 protected:
  // `what` names the count in a bad checkpoint's error (a string literal).
  CountingRecordIterator(std::unique_ptr<RecordIterator> input, const char* what)
      : input_(std::move(input)), what_(what) {}

  std::unique_ptr<RecordIterator> input_;
  uint64_t seen_ = 0;

 private:
  const char* what_;
};

// The base seed of each unseeded stage, by node; filled on first use, saved in checkpoints.
struct SeedTable {
  std::map<const Node*, uint64_t> seeds;
  uint64_t For(const Node* node, const std::optional<uint64_t>& fixed);
};

// Builds the record-stream iterator for `node` (a record-stream stage) in `epoch`.
Result<std::unique_ptr<RecordIterator>> MakeRecordIterator(const Node* node, uint64_t epoch,
                                                           StreamContext* ctx, SeedTable* seeds);

// True for stages that belong to the record stream.
bool IsRecordStage(Node::Kind kind);

// The pipeline's file list and fetcher (from its source node).
std::shared_ptr<RecordFetcher> MakeFetcher(const Node* chain);

}  // namespace recordflow::pipeline::internal
