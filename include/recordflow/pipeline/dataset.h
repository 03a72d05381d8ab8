// The pipeline engine: an immutable Dataset description and the Iterator that runs it.
//
// A Dataset is a chain of stages, built with value-returning methods and shareable between
// threads; MakeIterator() starts the machinery (threads, buffers, files) that produces its
// elements. The chain has two parts, whatever order the user wrote it in:
//
//   record stream   files / in-memory records, shard, interleave, global or buffered shuffle,
//                   repeat, cache, take/skip of records. Sequential and cheap (framing and CRCs
//                   at GB/s); interleave reads its files ahead on the thread pool.
//   batch executor  batch + parse + native maps, run on the shared thread pool with several
//                   batches in flight, delivered in order (or as ready when not deterministic)
//                   into a bounded prefetch buffer; take/skip of outputs.
//
// Checkpoints: Iterator::Checkpoint() pauses the executor and saves the record stream's state
// (file offsets, RNG states, shuffle buffers and caches as record references when every source
// is an uncompressed file, as contents otherwise) plus the records of every batch not yet
// delivered; Dataset::Restore() continues with exactly the elements an uninterrupted run would
// have produced (for deterministic pipelines).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "recordflow/core/dtype.h"
#include "recordflow/core/status.h"
#include "recordflow/example/parse.h"
#include "recordflow/format/compression.h"
#include "recordflow/format/record_reader.h"

namespace recordflow::pipeline {

// For parallelism and buffer sizes: chosen at run time from measured rates (see Autotune in
// docs/pipeline.md).
inline constexpr int kAutotune = -1;

// Where a record came from: index into the dataset's file list (or the in-memory list), byte
// offset of its header, and its index among the records of that file.
struct RecordPosition {
  uint32_t file = 0;
  uint64_t offset = 0;
  uint64_t index = 0;
  // Which pass over the data read the record (a mix of the repeat stages' epoch counters, set
  // by them and the executor; not part of a record's identity): per-element augmentation seeds
  // mix it in so that every epoch differs.
  uint64_t epoch = 0;
};

// A dense array made by a native map (image ops): prod(shape) values of `dtype`, row-major,
// the first dimension counting records. `data` is shared so that a consumer (the Python
// binding) can hand it out zero-copy.
struct Tensor {
  using DType = recordflow::DType;  // any but kBytes
  std::string key;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::shared_ptr<std::byte[]> data;
  size_t size_bytes = 0;
};

// What the pipeline produces: one record or a batch of them, raw or parsed.
//
// Unparsed: `records` holds the payloads (one unless `batched`). Parsed: `columns` holds one
// Column per spec, with a leading batch dimension (size 1 for an unbatched element), and
// `records` is empty unless a checkpoint may need it or bytes columns are views into it.
struct Element {
  bool batched = false;
  bool parsed = false;
  std::vector<std::string> records;
  std::vector<RecordPosition> positions;  // one per record
  std::vector<example::Column> columns;
  // Outputs of native maps (after `columns`): image batches and the like. Batching unbatched
  // elements concatenates them along the first dimension.
  std::vector<Tensor> tensors;
  // Records in this element (batch size, 1 when not batched).
  size_t num_records() const { return positions.size(); }
};

// What a map call gets besides its element.
struct MapContext {
  // Threads the call may spread its element over (with ParallelFor): the iterator's
  // parallelism when a map added with `splits_batches` is called on a batch, 1 otherwise.
  int threads = 1;
  // Set when the iterator closes and the call's output will be dropped, so that a long map may
  // stop early (returning any error). It may be read from the threads the call spreads its work
  // over, until the call returns. Null: never cancelled.
  const std::atomic<bool>* cancel_flag = nullptr;
  bool cancelled() const {
    return cancel_flag != nullptr && cancel_flag->load(std::memory_order_relaxed);
  }
};

// A native operation for Map (image decoding and the like). Called on pool threads, several at
// once: must be thread-safe. Errors stop the pipeline and reach the consumer in order.
// Made from a callable taking (Element&, const MapContext&), or (Element&) when it needs no
// context.
class MapFn : public std::function<Status(Element& element, const MapContext& context)> {
 public:
  using Base = std::function<Status(Element& element, const MapContext& context)>;
  MapFn() = default;
  MapFn(std::nullptr_t) {}  // NOLINT(google-explicit-constructor): as std::function
  template <
      typename F,
      std::enable_if_t<std::is_invocable_r_v<Status, F&, Element&, const MapContext&>, int> = 0>
  MapFn(F fn) : Base(std::move(fn)) {}  // NOLINT(google-explicit-constructor)
  template <typename F,
            std::enable_if_t<!std::is_invocable_r_v<Status, F&, Element&, const MapContext&> &&
                                 std::is_invocable_r_v<Status, F&, Element&>,
                             int> = 0>
  MapFn(F fn)  // NOLINT(google-explicit-constructor)
      : Base([fn = std::move(fn)](Element& e, const MapContext&) mutable { return fn(e); }) {}
};

struct FilesOptions {
  std::optional<format::Compression> compression;  // nullopt: from each file name
  bool shuffle_files = false;                      // new file order every epoch
  std::optional<uint64_t> seed;                    // nullopt: random per iterator
  format::CorruptionPolicy on_corruption = format::CorruptionPolicy::kRaise;
  bool verify_checksums = true;
};

struct InterleaveOptions {
  int cycle_length = kAutotune;  // files read at once; kAutotune: number of cores
  int block_length = 1;          // consecutive records taken from one file
  int num_parallel = kAutotune;  // files read ahead on the pool; 0/1: on the calling thread
  bool deterministic = true;     // false: take from whichever file has records ready
};

struct ShuffleOptions {
  size_t buffer_size = 1;
  std::optional<uint64_t> seed;
  bool reshuffle_each_iteration = true;
};

struct IteratorOptions {
  // Static rewrites of the chain, applied once when the iterator is made (docs/pipeline.md
  // lists them): each gives the same elements, skip counts and checkpoints as the chain as
  // written, only cheaper. false runs the chain as written (for comparisons).
  bool optimize = true;
  // Upper bound on the bytes the iterator holds in its buffers: shuffle buffers, in-memory
  // caches, interleave read-ahead queues and the executor's in-flight and ready batches, all
  // counted in one account (PipelineStats::memory_*). Shuffle buffers and memory caches are
  // sized by the user: when they alone exceed the budget, GetNext fails with
  // kResourceExhausted naming the stage. Read-ahead and executor batches use what is left and
  // wait when it is spent, down to one record per read-ahead file and one batch in flight,
  // which may go past the budget so that a too-small budget still makes progress.
  // Elements already returned by GetNext belong to the caller and are not counted.
  size_t memory_budget = size_t{1} << 30;
  // Caps the cores the iterator's work may occupy (reading ahead, parsing, native maps and
  // image decoding), leaving the rest to the training step: when the cap is below the process
  // pool's size the iterator runs on a pool of its own with that many threads, and autotuned
  // parallelism, MapContext::threads and every ParallelFor inside its work stay within it.
  // Besides the pool, one producer thread pulls records into units; it blocks while the
  // units in flight are full, so a CPU-bound pipeline uses about `cap` cores.
  // max_threads: at most this many threads (0: no cap). max_cpu_fraction: at most this share
  // of the cores the process may run on, rounded down, at least one (0: no cap; e.g. 0.4 keeps
  // loading within 40% of the host's CPU). Both set: the smaller. See EffectiveThreads.
  int max_threads = 0;
  double max_cpu_fraction = 0;
  // Which iteration of the Dataset this iterator is (tf.data's reshuffle_each_iteration): the
  // seeds of shuffles and file orders (unless reshuffle_each_iteration is off) and the epoch
  // that per-element augmentation seeds mix in are derived from (seed, iteration, repeat
  // epoch), so iteration k of a seeded pipeline is a new order, the same in every run.
  // 0 is the first iteration. A checkpoint carries it: Restore ignores this field.
  uint64_t iteration = 0;
};

// The threads an iterator made with `options` works on, out of `cores` (the process pool's
// size): `cores`, lowered by max_threads and max_cpu_fraction, at least 1.
int EffectiveThreads(const IteratorOptions& options, int cores);

// How a native map may be run; see Dataset::Map.
struct MapOptions {
  int num_parallel = kAutotune;
  // The function spreads one batch over MapContext::threads threads itself (the vision
  // presets do), so the iterator maps one batch at a time with all its threads instead of a batch
  // per thread: the first batch comes sooner, and fewer batches are held at once.
  bool splits_batches = false;
  // Calling the function on a batch gives exactly the batch of its outputs on each record
  // (tensors, columns, skipped records and errors, bit for bit; randomness only from each
  // record's RecordPosition). Lets the optimizer run `map(f).batch(n)` as `batch(n).map(f)`.
  bool elementwise = false;
};

// A native map op with how it may run: what the vision presets (vision::VisionOp) and the
// Python bindings' native ops are; Dataset::Map(op) adds it.
struct MapOp {
  MapFn fn;
  std::string name;
  bool splits_batches = false;  // see MapOptions
  bool elementwise = false;     // see MapOptions
  // Records the op dropped (a kSkip corruption policy); may be null.
  std::shared_ptr<std::atomic<uint64_t>> skipped;
  uint64_t skipped_records() const { return skipped ? skipped->load() : 0; }
};

// Per-stage counters; Iterator::stats() returns one per stage, source first.
struct StageStats {
  std::string name;
  uint64_t elements = 0;
  uint64_t bytes = 0;
  double busy_seconds = 0;         // producing elements (summed over threads)
  double wait_input_seconds = 0;   // waiting for the stage before it
  double wait_output_seconds = 0;  // waiting for room in its output buffer
  double buffer_fill = 0;          // mean occupancy of its output buffer (0..1), when it has one
  int parallelism = 0;             // threads/in-flight units at the end (autotuned or fixed)
  int buffer_size = 0;             // output buffer capacity at the end
};

// Bytes one kind of buffer holds, summed over the stages of that kind.
struct MemoryStats {
  std::string stage;  // "shuffle", "interleave read-ahead", "cache", "executor"
  uint64_t held = 0;  // now
  uint64_t peak = 0;  // highest so far
};

struct PipelineStats {
  std::vector<StageStats> stages;
  uint64_t elements_delivered = 0;
  // The memory account (IteratorOptions::memory_budget): bytes held now and the peak of the
  // total, and per kind of buffer (the per-kind peaks need not coincide in time).
  uint64_t memory_budget = 0;
  uint64_t memory_held = 0;
  uint64_t memory_peak = 0;
  std::vector<MemoryStats> memory;
  double consumer_wait_seconds = 0;  // time GetNext spent waiting for an element
  double wall_seconds = 0;           // from the iterator's creation to its end (or to now)
  // Human-readable table.
  std::string Report() const;
};

class Iterator;
namespace internal {
struct Node;  // the description of one stage (pipeline_internal.h)
}

// Thread safety: thread-safe (immutable); methods return new Datasets sharing the old chain.
class Dataset {
 public:
  // Records of `paths` (globs are expanded, sorted; each pattern must match something).
  // Errors: kNotFound for a pattern matching nothing; kInvalidArgument for no paths.
  static Result<Dataset> FromFiles(std::vector<std::string> paths, FilesOptions options = {});
  // Records held in memory (tests, small data).
  static Dataset FromRecords(std::vector<std::string> records);

  // Keeps every num_shards-th file (directly on a file source, before interleave) or record
  // (elsewhere), starting at `index`. Errors: kInvalidArgument for index >= num_shards.
  Result<Dataset> Shard(int num_shards, int index) const;
  Result<Dataset> Interleave(InterleaveOptions options = {}) const;
  Result<Dataset> Shuffle(ShuffleOptions options) const;
  // An exact permutation of all records of all files per epoch, read by random access through
  // the files' .idx indexes (built in memory when missing). Directly on an uncompressed file
  // source only.
  Result<Dataset> GlobalShuffle(std::optional<uint64_t> seed = std::nullopt,
                                bool reshuffle_each_iteration = true) const;
  // count < 0: forever.
  Dataset Repeat(int64_t count = -1) const;
  // Counts records before Batch, batches after it.
  Dataset Take(int64_t count) const;
  Dataset Skip(int64_t count) const;
  // Records seen in the first epoch are kept (in memory, or in the TFRecord file `path`, which
  // later iterators read instead of the input once complete) and replayed on later epochs.
  Result<Dataset> Cache(std::string path = "") const;
  // bytes_as_views: bytes features come out as Column::bytes_views into the element's
  // `records` (kept in the element) instead of copies in bytes_data: one copy less for large
  // values. Views: valid while the Element and this Dataset (spec defaults) live. Ignored
  // (copies) when a map runs on single records before the batch.
  Result<Dataset> Parse(std::vector<example::FeatureSpec> specs, bool bytes_as_views = false) const;
  // A native map (see MapOptions; this form: not element-wise).
  Result<Dataset> Map(MapFn fn, std::string name, int num_parallel = kAutotune,
                      bool splits_batches = false) const;
  // Errors: kInvalidArgument for no function or num_parallel < 1 (other than kAutotune).
  Result<Dataset> Map(MapFn fn, std::string name, MapOptions options) const;
  // `op` with its own splits_batches and elementwise.
  Result<Dataset> Map(const MapOp& op, int num_parallel = kAutotune) const;
  Result<Dataset> Batch(size_t batch_size, bool drop_remainder = false) const;
  // Ready outputs kept ahead of the consumer; kAutotune grows it while the consumer waits.
  Result<Dataset> Prefetch(int buffer_size = kAutotune) const;

  Result<std::unique_ptr<Iterator>> MakeIterator(IteratorOptions options = {}) const;
  // An iterator continuing from `state` (from Iterator::Checkpoint of an iterator of an equal
  // Dataset). Errors: kInvalidArgument for a state of another pipeline; kDataLoss for a
  // damaged state.
  Result<std::unique_ptr<Iterator>> Restore(std::span<const std::byte> state,
                                            IteratorOptions options = {}) const;

  // The stages the iterator runs, in the order it runs them, e.g.
  // "files(3) -> shuffle(1000) -> batch(32) -> parse(a,b)"; when the optimizer reordered the
  // chain (IteratorOptions::optimize), followed by "  [rewrites: ...]" naming each rewrite.
  // A chain that cannot run is described as written.
  std::string DebugString() const;

  const std::shared_ptr<const internal::Node>& node() const { return node_; }

 private:
  explicit Dataset(std::shared_ptr<const internal::Node> node) : node_(std::move(node)) {}
  std::shared_ptr<const internal::Node> node_;
};

// Produces a Dataset's elements.
//
// Thread safety: not thread-safe: one consumer thread calls GetNext/Checkpoint.
// Lifetime: destroying it mid-stream cancels and joins every thread it started.
class Iterator {
 public:
  virtual ~Iterator() = default;
  // Sets *out to the next element and returns true; false at the end (not an error).
  // Errors come in order, with the stage, file and offset in the message; after an error the
  // iterator is finished.
  virtual Result<bool> GetNext(Element* out) = 0;
  // As GetNext, but waits at most `timeout` for an element: when none is ready by then, sets
  // *timed_out, returns false and consumes nothing (call again to keep waiting). Lets a caller
  // wait in slices: the Python bindings run signal handlers (Ctrl-C) between them. The default
  // implementation waits without a limit.
  virtual Result<bool> GetNextFor(Element* out, std::chrono::nanoseconds timeout, bool* timed_out);
  // The state after the last element returned. Errors: kFailedPrecondition after an error,
  // kUnimplemented for stages that cannot be saved (Python-side stages are handled above).
  virtual Result<std::string> Checkpoint() = 0;
  virtual PipelineStats stats() const = 0;
  // IteratorOptions::iteration, or the restored checkpoint's.
  virtual uint64_t iteration() const { return 0; }
};

}  // namespace recordflow::pipeline
