// Private pieces of the pipeline engine: stage descriptions, the record stream, checkpoint
// encoding and the random number generator every seeded stage uses.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/core/thread_annotations.h"
#include "recordflow/pipeline/dataset.h"

namespace recordflow::pipeline::internal {

// xoshiro256** seeded through splitmix64: small state that saves as four words, and the same
// sequence on every platform (std::mt19937_64 distributions are not portable).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { Seed(seed); }
  void Seed(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, n) without modulo bias. n > 0.
  uint64_t Below(uint64_t n);
  uint64_t state[4] = {};
};

// Mixes a base seed with a number (epoch, stage) into a new seed.
uint64_t MixSeed(uint64_t seed, uint64_t salt);
// A seed from the OS, for stages without one.
uint64_t RandomSeed();

// Checkpoint bytes: little-endian fixed words and length-prefixed strings.
class StateWriter {
 public:
  void U64(uint64_t v);
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Bool(bool v) { U64(v ? 1 : 0); }
  void Str(std::string_view s);
  void RngState(const Rng& rng);
  // Appends the masked CRC32C of everything written so far (4 bytes, little-endian); call last.
  void AppendChecksum();
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

// Errors: kDataLoss naming what was being read when the state ends early.
class StateReader {
 public:
  explicit StateReader(std::string_view in) : in_(in) {}
  Result<uint64_t> U64(const char* what);
  Result<int64_t> I64(const char* what);
  Result<bool> Bool(const char* what);
  Result<std::string> Str(const char* what);
  Status RngState(Rng* rng, const char* what);
  // Checks the trailing masked CRC32C (StateWriter::AppendChecksum) against every byte before
  // it, then leaves it out of what is read. Errors: kDataLoss for a mismatch or a state too
  // short to hold one.
  Status VerifyChecksum();
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

// One record travelling through the record stream.
struct Record {
  std::string data;
  RecordPosition position;
};

// What a record costs while a buffer holds it: its bytes and its bookkeeping.
inline size_t RecordBytes(const Record& r) { return sizeof(Record) + r.data.capacity(); }

// What a Dataset is made of: one Node per stage, each pointing at its input.
struct Node {
  enum class Kind {
    kFiles, kMemory, kShard, kInterleave, kShuffle, kGlobalShuffle, kRepeat, kTake, kSkip,
    kCache, kParse, kMap, kBatch, kPrefetch,
  };
  Kind kind = Kind::kFiles;
  std::shared_ptr<const Node> input;

  // kFiles
  std::vector<std::string> files;
  FilesOptions files_options;
  // kMemory
  std::shared_ptr<const std::vector<std::string>> memory;
  // kShard
  int num_shards = 1;
  int shard_index = 0;
  // kInterleave
  InterleaveOptions interleave;
  // kShuffle / kGlobalShuffle
  ShuffleOptions shuffle;
  // kRepeat / kTake / kSkip
  int64_t count = -1;
  // kCache
  std::string cache_path;
  // kParse
  std::shared_ptr<const example::ExampleParser> parser;
  bool bytes_as_views = false;
  // kMap
  MapFn map_fn;
  std::string map_name;
  int num_parallel = kAutotune;
  bool splits_batches = false;
  bool elementwise = false;  // MapOptions::elementwise; not part of Describe (nor fingerprints)
  // kBatch
  size_t batch_size = 0;
  bool drop_remainder = false;
  // kPrefetch
  int buffer_size = kAutotune;

  std::string Describe() const;
};

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

// Shared by all stage iterators of one pipeline iterator.
struct StreamContext {
  std::shared_ptr<RecordFetcher> fetcher;
  std::atomic<bool> cancelled{false};
  // Caches filled in the first epoch, by the Node that owns them.
  std::mutex cache_mu;
  std::map<const Node*, std::shared_ptr<struct CacheStore>> caches;
  // Per-stage stats, indexed as in Iterator::stats().
  std::vector<StageStats>* stats = nullptr;
  // The iterator's memory account; null: nothing is counted (stand-alone stream tests).
  MemoryAccount* memory = nullptr;
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

// Builds the record-stream iterator for `node` (a record-stream stage) in `epoch`. `seeds`
// supplies the base seed of each unseeded stage, by node; it is filled on first use.
struct SeedTable {
  std::map<const Node*, uint64_t> seeds;
  uint64_t For(const Node* node, const std::optional<uint64_t>& fixed);
};
Result<std::unique_ptr<RecordIterator>> MakeRecordIterator(const Node* node, uint64_t epoch,
                                                           StreamContext* ctx, SeedTable* seeds,
                                                           int stat_index);

// True for stages that belong to the record stream.
bool IsRecordStage(Node::Kind kind);

// The pipeline's file list and fetcher (from its source node).
std::shared_ptr<RecordFetcher> MakeFetcher(const Node* chain);

// Appends `from` (a batch of parsed rows) to `to`: dense columns grow along dimension 0,
// ragged ones get shifted row_splits. Errors: kInvalidArgument when shapes differ.
Status ConcatColumns(std::vector<example::Column>& to, std::vector<example::Column>&& from);
// Batches the dense tensors of native maps: part j holds element j's tensors; the result
// concatenates them along the first dimension (one copy).
Status StackTensors(std::vector<std::vector<Tensor>>&& parts, std::vector<Tensor>* out);

}  // namespace recordflow::pipeline::internal
