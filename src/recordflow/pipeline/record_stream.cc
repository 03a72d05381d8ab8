// The record stream: sources and record-level transformations, each saveable.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <numeric>

#include "pipeline_internal.h"
#include "recordflow/core/thread_pool.h"
#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::pipeline::internal {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

format::RecordReaderOptions ReaderOptions(const FilesOptions& o) {
  format::RecordReaderOptions r;
  r.compression = o.compression;
  r.on_corruption = o.on_corruption;
  r.verify_checksums = o.verify_checksums;
  return r;
}

// The file source under a chain of record-stage nodes, if the chain starts with one, and the
// file sharding applied to it.
struct FileSource {
  const Node* files = nullptr;  // kFiles node
  int num_shards = 1;
  int shard_index = 0;
};

// The files of `src`'s shard, in the source's (sorted) order.
std::vector<uint32_t> ShardFiles(const FileSource& src) {
  std::vector<uint32_t> files;
  for (size_t i = static_cast<size_t>(src.shard_index); i < src.files->files.size();
       i += static_cast<size_t>(src.num_shards)) {
    files.push_back(static_cast<uint32_t>(i));
  }
  return files;
}

// The files of `src` read in `epoch`, as indexes into the source's file list.
std::vector<uint32_t> FileOrder(const FileSource& src, uint64_t epoch, SeedTable* seeds) {
  std::vector<uint32_t> order = ShardFiles(src);
  if (src.files->files_options.shuffle_files) {
    Rng rng(MixSeed(seeds->For(src.files, src.files->files_options.seed), epoch));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  }
  return order;
}

// The charge of one record reader's buffers to the memory account. The reader asks it before
// its record buffer grows (format::ReadBufferBudget), so a huge record is refused before the
// memory is taken; heap-allocated so its address survives moves of the CountedReader.
//
// Thread safety: thread-compatible (the account itself is thread-safe).
class ReaderCharge final : public format::ReadBufferBudget {
 public:
  explicit ReaderCharge(const StreamContext* ctx) : ctx_(ctx) {}
  ~ReaderCharge() override { SyncTo(0); }
  ReaderCharge(const ReaderCharge&) = delete;
  ReaderCharge& operator=(const ReaderCharge&) = delete;

  // Readers count with the fixed buffers (see MemoryAccount::CheckFixed): growth that would
  // take those past the budget is refused, whatever the elastic buffers hold.
  Status Reserve(const std::string& path, size_t bytes, uint64_t record_offset,
                 uint64_t record_index) override {
    MemoryAccount* m = ctx_ != nullptr ? ctx_->memory : nullptr;
    if (m == nullptr) return Status();
    const size_t fixed = m->held(MemoryAccount::kShuffle) + m->held(MemoryAccount::kCache) +
                         m->held(MemoryAccount::kReaders);
    if (fixed + bytes > m->budget()) {
      return ResourceExhaustedError(
          "record readers: the record in '" + path + "' at byte offset " +
          std::to_string(record_offset) + " (record index " + std::to_string(record_index) +
          ") needs its read buffer to grow by " + std::to_string(bytes) + " bytes, with " +
          std::to_string(fixed) + " bytes already held by readers, shuffle buffers and caches: "
          "over the iterator's memory_budget of " + std::to_string(m->budget()) +
          " bytes; raise memory_budget");
    }
    m->Charge(MemoryAccount::kReaders, bytes);
    charged_ += bytes;
    return Status();
  }
  // Sets the charge to what the reader holds now (its buffers shrink, and the decompressor's
  // are not asked for).
  void SyncTo(size_t now) {
    if (ctx_ == nullptr) return;
    if (now > charged_) ctx_->Charge(MemoryAccount::kReaders, now - charged_);
    if (now < charged_) ctx_->Release(MemoryAccount::kReaders, charged_ - now);
    charged_ = now;
  }

 private:
  const StreamContext* ctx_;
  size_t charged_ = 0;
};

// A record reader whose buffers (RecordReader::buffer_bytes) are charged to the memory account
// while it is open: growth is asked for first (ReaderCharge), and the charge re-synced after
// each read since the record buffer grows and shrinks.
//
// Thread safety: thread-compatible (the account itself is thread-safe).
class CountedReader {
 public:
  CountedReader() = default;
  CountedReader(std::unique_ptr<ReaderCharge> charge, std::unique_ptr<format::RecordReader> reader)
      : charge_(std::move(charge)), reader_(std::move(reader)) {
    Sync();
  }
  CountedReader(CountedReader&& other) noexcept = default;
  CountedReader& operator=(CountedReader&& other) noexcept {
    if (this != &other) {
      reset();
      reader_ = std::move(other.reader_);
      charge_ = std::move(other.charge_);
    }
    return *this;
  }
  CountedReader(const CountedReader&) = delete;
  CountedReader& operator=(const CountedReader&) = delete;
  ~CountedReader() { reset(); }

  explicit operator bool() const { return reader_ != nullptr; }
  format::RecordReader* operator->() const { return reader_.get(); }

  // Closes the reader and releases its charge.
  void reset() {
    reader_.reset();  // first: the reader points at charge_
    charge_.reset();
  }

  // Reads the next record into `out` (position: `file`), then re-syncs the charge.
  Result<bool> ReadInto(uint32_t file, Record* out) {
    std::span<const std::byte> data;
    Result<bool> ok = reader_->ReadRecord(&data);
    if (ok.ok() && *ok) {
      out->data.assign(reinterpret_cast<const char*>(data.data()), data.size());
      out->position = {file, reader_->last_record_offset(), reader_->records_read() - 1};
    }
    Sync();
    return ok;
  }
  // Reads and drops the next record.
  Result<bool> Skip() {
    std::span<const std::byte> data;
    Result<bool> ok = reader_->ReadRecord(&data);
    Sync();
    return ok;
  }

 private:
  void Sync() {
    if (charge_ && reader_) charge_->SyncTo(reader_->buffer_bytes());
  }

  std::unique_ptr<ReaderCharge> charge_;
  std::unique_ptr<format::RecordReader> reader_;
};

// Opens `path` with `options` as a CountedReader charged to `ctx`'s account.
Result<CountedReader> OpenCounted(const StreamContext* ctx, const std::string& path,
                                  format::RecordReaderOptions options) {
  auto charge = std::make_unique<ReaderCharge>(ctx);
  options.buffer_budget = charge.get();
  RF_ASSIGN_OR_RETURN(auto reader, format::RecordReader::Open(path, options));
  return CountedReader(std::move(charge), std::move(reader));
}

// Opens file `file` of `src` at a saved position.
Result<CountedReader> OpenAt(const StreamContext* ctx, const FileSource& src, uint32_t file,
                             uint64_t offset, uint64_t index) {
  RF_ASSIGN_OR_RETURN(CountedReader reader, OpenCounted(ctx, src.files->files[file],
                                                        ReaderOptions(src.files->files_options)));
  if (offset > 0 || index > 0) RF_RETURN_IF_ERROR(reader->SkipTo(offset, index));
  return reader;
}

// Counts elements and time into the stage's stats slot.
class StatsScope {
 public:
  StatsScope(StreamContext* ctx, int index) : ctx_(ctx), index_(index), start_(Clock::now()) {}
  void Done(const Record& r) {
    if (ctx_->stats == nullptr || index_ < 0) return;
    StageStats& s = (*ctx_->stats)[static_cast<size_t>(index_)];
    s.elements += 1;
    s.bytes += r.data.size();
    s.busy_seconds += Seconds(start_);
  }

 private:
  StreamContext* ctx_;
  int index_;
  Clock::time_point start_;
};

// ---------------------------------------------------------------------------------------------
// Files read one after the other.
class FilesIterator final : public RecordIterator {
 public:
  FilesIterator(FileSource src, std::vector<uint32_t> order, StreamContext* ctx, int stat)
      : src_(src), order_(std::move(order)), ctx_(ctx), stat_(stat) {}

  Result<bool> Next(Record* out) override {
    StatsScope scope(ctx_, stat_);
    while (k_ < order_.size()) {
      if (!reader_) {
        RF_ASSIGN_OR_RETURN(reader_, OpenAt(ctx_, src_, order_[k_], offset_, index_));
      }
      RF_ASSIGN_OR_RETURN(bool ok, reader_.ReadInto(order_[k_], out));
      if (ok) {
        offset_ = reader_->offset();
        index_ = reader_->records_read();
        scope.Done(*out);
        return true;
      }
      reader_.reset();
      ++k_;
      offset_ = index_ = 0;
    }
    return false;
  }

  Status Save(StateWriter& w) override {
    w.U64(k_);
    w.U64(offset_);
    w.U64(index_);
    return Status();
  }

  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(k_, r.U64("files position"));
    RF_ASSIGN_OR_RETURN(offset_, r.U64("files offset"));
    RF_ASSIGN_OR_RETURN(index_, r.U64("files record index"));
    if (k_ > order_.size()) return DataLossError("checkpoint: file position out of range");
    reader_.reset();
    return Status();
  }

 private:
  FileSource src_;
  std::vector<uint32_t> order_;
  StreamContext* ctx_;
  int stat_;
  size_t k_ = 0;  // position in order_
  uint64_t offset_ = 0;
  uint64_t index_ = 0;
  CountedReader reader_;
};

// ---------------------------------------------------------------------------------------------
class MemoryIterator final : public RecordIterator {
 public:
  MemoryIterator(std::shared_ptr<const std::vector<std::string>> records, StreamContext* ctx,
                 int stat)
      : records_(std::move(records)), ctx_(ctx), stat_(stat) {}
  Result<bool> Next(Record* out) override {
    if (i_ >= records_->size()) return false;
    StatsScope scope(ctx_, stat_);
    out->data = (*records_)[i_];
    out->position = {0, 0, i_};
    ++i_;
    scope.Done(*out);
    return true;
  }
  Status Save(StateWriter& w) override {
    w.U64(i_);
    return Status();
  }
  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(i_, r.U64("memory position"));
    if (i_ > records_->size()) {
      return DataLossError("checkpoint: position " + std::to_string(i_) + " among " +
                           std::to_string(records_->size()) + " in-memory records");
    }
    return Status();
  }

 private:
  std::shared_ptr<const std::vector<std::string>> records_;
  StreamContext* ctx_;
  int stat_;
  uint64_t i_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Keeps records num_shards * k + index.
class ShardIterator final : public RecordIterator {
 public:
  ShardIterator(std::unique_ptr<RecordIterator> input, int n, int index)
      : input_(std::move(input)), n_(n), index_(index) {}
  Result<bool> Next(Record* out) override {
    while (true) {
      RF_ASSIGN_OR_RETURN(bool ok, input_->Next(out));
      if (!ok) return false;
      const uint64_t i = seen_++;
      if (i % static_cast<uint64_t>(n_) == static_cast<uint64_t>(index_)) return true;
    }
  }
  Status Save(StateWriter& w) override {
    w.U64(seen_);
    return input_->Save(w);
  }
  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(seen_, r.U64("shard count"));
    return input_->Restore(r);
  }

 private:
  std::unique_ptr<RecordIterator> input_;
  int n_, index_;
  uint64_t seen_ = 0;
};

// ---------------------------------------------------------------------------------------------
// cycle_length files at once, block_length records from each in turn; optionally read ahead on
// the thread pool. The saved state is where each open file's consumer stands, so records read
// ahead but not consumed are simply read again after a restore.
class InterleaveIterator final : public RecordIterator {
 public:
  InterleaveIterator(FileSource src, std::vector<uint32_t> order, const InterleaveOptions& o,
                     StreamContext* ctx, int stat)
      : src_(src), order_(std::move(order)), o_(o), ctx_(ctx), stat_(stat) {
    const int cores = ThreadPool::Default().num_threads();
    cycle_ = o_.cycle_length == kAutotune ? std::max(cores, 2) : std::max(o_.cycle_length, 1);
    parallel_ = o_.num_parallel == kAutotune ? std::min(cycle_, cores) : o_.num_parallel;
    block_ = std::max(o_.block_length, 1);
    slots_.resize(static_cast<size_t>(cycle_));
    for (auto& s : slots_) s = std::make_shared<Slot>();
  }

  ~InterleaveIterator() override {
    StopReadahead();
    for (auto& sp : slots_) {
      std::lock_guard lock(sp->mu);
      DropReady(*sp);
    }
  }

  Result<bool> Next(Record* out) override {
    StatsScope scope(ctx_, stat_);
    while (true) {
      RF_RETURN_IF_ERROR(OpenEmptySlots());
      bool any_open = false;
      for (auto& s : slots_) any_open |= s->open;
      if (!any_open) return false;
      if (!o_.deterministic && parallel_ > 1) {
        // Take from the current slot if it has records, else from any slot that has.
        for (size_t step = 0; step < slots_.size(); ++step) {
          const size_t i = (current_ + step) % slots_.size();
          Slot& s = *slots_[i];
          std::unique_lock lock(s.mu);
          if (s.open && !s.ready.empty()) {
            current_ = i;
            break;
          }
        }
      }
      Slot& s = *slots_[current_];
      if (!s.open) {
        Advance(/*slot_finished=*/true);
        continue;
      }
      RF_ASSIGN_OR_RETURN(bool got, Take(s, out));
      if (!got) {  // this file is done; its slot takes the next file
        s.open = false;
        s.reader.reset();  // its buffers leave the memory account now, not at the next open
        Advance(/*slot_finished=*/true);
        continue;
      }
      if (++taken_in_block_ >= block_) Advance(false);
      scope.Done(*out);
      return true;
    }
  }

  Status Save(StateWriter& w) override {
    StopReadahead();
    w.U64(next_file_);
    w.U64(current_);
    w.U64(taken_in_block_);
    w.U64(slots_.size());
    for (auto& sp : slots_) {
      Slot& s = *sp;
      w.Bool(s.open);
      w.U64(s.file);
      w.U64(s.consumed_offset);
      w.U64(s.consumed_index);
      // Records read ahead are dropped: the restored reader reads them again. Their offsets
      // go too: left behind, the next records taken would report stale (earlier) offsets, and
      // a later checkpoint would replay records already delivered.
      {
        std::lock_guard lock(s.mu);
        DropReady(s);
      }
      s.next_offsets.clear();
      s.reader.reset();
      s.eof = false;
    }
    stopped_ = false;
    return Status();
  }

  Status Restore(StateReader& r) override {
    StopReadahead();
    RF_ASSIGN_OR_RETURN(next_file_, r.U64("interleave next file"));
    RF_ASSIGN_OR_RETURN(uint64_t current, r.U64("interleave slot"));
    RF_ASSIGN_OR_RETURN(uint64_t taken, r.U64("interleave block"));
    RF_ASSIGN_OR_RETURN(uint64_t n, r.U64("interleave cycle"));
    if (n != slots_.size() || current >= n || next_file_ > order_.size() ||
        taken > static_cast<uint64_t>(block_)) {
      return DataLossError("checkpoint: interleave state does not match this pipeline");
    }
    current_ = current;
    taken_in_block_ = static_cast<int>(taken);
    for (auto& sp : slots_) {
      Slot& s = *sp;
      RF_ASSIGN_OR_RETURN(s.open, r.Bool("interleave slot open"));
      RF_ASSIGN_OR_RETURN(uint64_t file, r.U64("interleave slot file"));
      RF_ASSIGN_OR_RETURN(s.consumed_offset, r.U64("interleave slot offset"));
      RF_ASSIGN_OR_RETURN(s.consumed_index, r.U64("interleave slot record"));
      if (s.open && file >= src_.files->files.size()) return DataLossError("checkpoint: bad file");
      s.file = static_cast<uint32_t>(file);
      {
        std::lock_guard lock(s.mu);
        DropReady(s);
      }
      s.next_offsets.clear();
      s.reader.reset();
      s.eof = false;
      s.error = Status();
    }
    stopped_ = false;
    return Status();
  }

 private:
  struct Slot {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;  // consumer-owned
    uint32_t file = 0;
    uint64_t consumed_offset = 0;  // reader offset after the last record consumed
    uint64_t consumed_index = 0;
    CountedReader reader;  // owned by whoever fills
    std::deque<Record> ready RF_GUARDED_BY(mu);
    size_t ready_bytes RF_GUARDED_BY(mu) = 0;  // RecordBytes of `ready`, charged to the account
    bool eof RF_GUARDED_BY(mu) = false;
    bool filling RF_GUARDED_BY(mu) = false;
    Status error RF_GUARDED_BY(mu);
    std::vector<uint64_t> next_offsets;  // reader offsets after each ready record
  };

  static constexpr size_t kReadaheadBytes = 8 << 20;
  static constexpr size_t kReadaheadRecords = 256;

  Status OpenEmptySlots() {
    for (auto& sp : slots_) {
      Slot& s = *sp;
      if (s.open) {
        if (!s.reader && !Filling(s)) {
          RF_ASSIGN_OR_RETURN(s.reader, OpenAt(ctx_, src_, s.file, s.consumed_offset, s.consumed_index));
        }
        continue;
      }
      if (next_file_ >= order_.size()) continue;
      if (&s != slots_[current_].get() && !AllOpenBefore()) continue;
      s.file = order_[next_file_++];
      s.consumed_offset = s.consumed_index = 0;
      RF_ASSIGN_OR_RETURN(s.reader, OpenAt(ctx_, src_, s.file, 0, 0));
      std::lock_guard lock(s.mu);
      DropReady(s);
      s.eof = false;
      s.error = Status();
      s.open = true;
    }
    return Status();
  }

  // Empties a slot's read-ahead queue and releases its bytes. s.mu held.
  void DropReady(Slot& s) {
    s.ready.clear();
    ctx_->Release(MemoryAccount::kInterleave, s.ready_bytes);
    s.ready_bytes = 0;
  }

  // Read-ahead is elastic: it goes on only while the iterator's buffers fit the budget.
  bool RoomToReadAhead() const { return ctx_->memory == nullptr || ctx_->memory->Fits(1); }

  // Files fill the cycle in slot order at the start (tf.data's order).
  bool AllOpenBefore() const { return true; }

  bool Filling(Slot& s) {
    std::lock_guard lock(s.mu);
    return s.filling;
  }

  void Advance(bool slot_finished) {
    (void)slot_finished;
    taken_in_block_ = 0;
    current_ = (current_ + 1) % slots_.size();
  }

  // Next record of slot `s`, reading synchronously or from its read-ahead queue.
  Result<bool> Take(Slot& s, Record* out) {
    if (parallel_ <= 1) {
      RF_ASSIGN_OR_RETURN(bool ok, s.reader.ReadInto(s.file, out));
      if (!ok) return false;
      s.consumed_offset = s.reader->offset();
      s.consumed_index = s.reader->records_read();
      return true;
    }
    std::unique_lock lock(s.mu);
    while (true) {
      if (!s.ready.empty()) {
        *out = std::move(s.ready.front());
        s.ready.pop_front();
        const size_t cost = RecordBytes(*out);
        s.ready_bytes -= cost;
        ctx_->Release(MemoryAccount::kInterleave, cost);
        s.consumed_offset = s.next_offsets.front();
        s.next_offsets.erase(s.next_offsets.begin());
        s.consumed_index = out->position.index + 1;
        if (!s.filling && !s.eof && s.error.ok() && s.ready.size() < kReadaheadRecords / 2 &&
            RoomToReadAhead()) {
          StartFill(s, lock);
        }
        return true;
      }
      if (!s.error.ok()) return s.error;
      if (s.eof) return false;
      // An empty queue always gets a fill (it reads at least one record, budget or not):
      // read-ahead never blocks the only reader.
      if (!s.filling) StartFill(s, lock);
      s.cv.wait(lock);
    }
  }

  void StartFill(Slot& s, std::unique_lock<std::mutex>& held) {
    (void)held;
    s.filling = true;
    {
      std::lock_guard g(tasks_mu_);
      ++tasks_;
    }
    ThreadPool::Default().Schedule([this, &s] { Fill(s); });
  }

  // Runs on the pool: reads until the queue is full, the file ends or we are stopped.
  void Fill(Slot& s) {
    while (true) {
      {
        // Over budget: stop reading ahead (the consumer restarts the fill when it has room or
        // the queue runs dry), but never before the queue holds a record.
        std::lock_guard lock(s.mu);
        if (!s.ready.empty() && !RoomToReadAhead()) break;
      }
      Record r;
      Result<bool> got(false);
      if (!stop_.load()) {
        // Pool thread: no exception may leave it (a record too large to copy is an error).
        Status caught = CatchExceptions("reading ahead in '" + s.reader->path() + "'", [&] {
          got = s.reader.ReadInto(s.file, &r);
          return Status();
        });
        if (!caught.ok()) got = caught;
      }
      const uint64_t next_offset = s.reader->offset();
      std::unique_lock lock(s.mu);
      if (stop_.load()) break;
      if (!got.ok()) {
        s.error = got.status();
        break;
      }
      if (!*got) {
        s.eof = true;
        break;
      }
      const size_t cost = RecordBytes(r);
      s.ready_bytes += cost;
      ctx_->Charge(MemoryAccount::kInterleave, cost);
      s.ready.push_back(std::move(r));
      s.next_offsets.push_back(next_offset);
      s.cv.notify_all();
      if (s.ready.size() >= kReadaheadRecords || s.ready_bytes >= kReadaheadBytes) break;
    }
    {
      std::lock_guard lock(s.mu);
      s.filling = false;
      s.cv.notify_all();
    }
    std::lock_guard g(tasks_mu_);
    if (--tasks_ == 0) tasks_cv_.notify_all();
  }

  // Stops read-ahead tasks and waits for them (before saving, restoring or destruction).
  void StopReadahead() {
    stop_ = true;
    {
      std::unique_lock g(tasks_mu_);
      tasks_cv_.wait(g, [&] { return tasks_ == 0; });
    }
    stop_ = false;
    stopped_ = true;
    for (auto& sp : slots_) {
      std::lock_guard lock(sp->mu);
      sp->next_offsets.resize(sp->ready.size());
    }
  }

  FileSource src_;
  std::vector<uint32_t> order_;
  InterleaveOptions o_;
  StreamContext* ctx_;
  int stat_;
  int cycle_ = 1, parallel_ = 1, block_ = 1;
  std::vector<std::shared_ptr<Slot>> slots_;
  size_t next_file_ = 0;
  size_t current_ = 0;
  int taken_in_block_ = 0;
  bool stopped_ = false;
  std::atomic<bool> stop_{false};
  std::mutex tasks_mu_;
  std::condition_variable tasks_cv_;
  int tasks_ RF_GUARDED_BY(tasks_mu_) = 0;
};

// ---------------------------------------------------------------------------------------------
// A buffer of buffer_size records; each output is a uniformly random one of them.
class ShuffleIterator final : public RecordIterator {
 public:
  ShuffleIterator(std::unique_ptr<RecordIterator> input, size_t buffer_size, uint64_t seed,
                  StreamContext* ctx, int stat)
      : input_(std::move(input)), size_(std::max<size_t>(buffer_size, 1)), rng_(seed),
        ctx_(ctx), stat_(stat) {}

  Result<bool> Next(Record* out) override {
    StatsScope scope(ctx_, stat_);
    while (!input_done_ && buffer_.size() < size_) {
      Record r;
      RF_ASSIGN_OR_RETURN(bool ok, input_->Next(&r));
      if (!ok) {
        input_done_ = true;
        break;
      }
      RF_RETURN_IF_ERROR(Keep(std::move(r)));
    }
    if (buffer_.empty()) {
      // Drained: the vector's slots go too (a repeat builds a new buffer).
      buffer_.shrink_to_fit();
      ctx_->Release(MemoryAccount::kShuffle, held_);
      held_ = 0;
      return false;
    }
    const size_t i = static_cast<size_t>(rng_.Below(buffer_.size()));
    std::swap(buffer_[i], buffer_.back());
    *out = std::move(buffer_.back());
    buffer_.pop_back();
    // The record's bytes leave; its slot stays in the vector's capacity (charged in Keep).
    const size_t cost = out->data.capacity();
    held_ -= cost;
    ctx_->Release(MemoryAccount::kShuffle, cost);
    scope.Done(*out);
    return true;
  }

  ~ShuffleIterator() override { ctx_->Release(MemoryAccount::kShuffle, held_); }

  Status Save(StateWriter& w) override {
    w.RngState(rng_);
    w.Bool(input_done_);
    w.U64(buffer_.size());
    for (const Record& r : buffer_) ctx_->SaveRecord(w, r);
    return input_->Save(w);
  }

  Status Restore(StateReader& r) override {
    RF_RETURN_IF_ERROR(r.RngState(&rng_, "shuffle RNG"));
    RF_ASSIGN_OR_RETURN(input_done_, r.Bool("shuffle input end"));
    RF_ASSIGN_OR_RETURN(uint64_t n, r.U64("shuffle buffer size"));
    if (n > size_) return DataLossError("checkpoint: shuffle buffer larger than buffer_size");
    buffer_.clear();
    buffer_.shrink_to_fit();
    ctx_->Release(MemoryAccount::kShuffle, held_);
    held_ = 0;
    for (uint64_t i = 0; i < n; ++i) {
      RF_ASSIGN_OR_RETURN(Record rec, ctx_->RestoreRecord(r));
      RF_RETURN_IF_ERROR(Keep(std::move(rec)));
    }
    return input_->Restore(r);
  }

 private:
  // Adds a record to the buffer and charges it; the buffer is a fixed buffer of the memory
  // account: past the budget it fails rather than grow.
  // Charged: each record's payload capacity, and the vector's capacity in Record slots (it
  // grows by doubling, so up to twice the records' bookkeeping).
  Status Keep(Record&& r) {
    const size_t slots_before = buffer_.capacity();
    size_t cost = r.data.capacity();
    buffer_.push_back(std::move(r));
    cost += (buffer_.capacity() - slots_before) * sizeof(Record);
    held_ += cost;
    if (ctx_->memory == nullptr) return Status();
    ctx_->memory->Charge(MemoryAccount::kShuffle, cost);
    return ctx_->memory->CheckFixed(MemoryAccount::kShuffle,
                                    "buffer (buffer_size=" + std::to_string(size_) + ", " +
                                        std::to_string(buffer_.size()) + " records so far)");
  }

  std::unique_ptr<RecordIterator> input_;
  size_t size_;
  Rng rng_;
  StreamContext* ctx_;
  int stat_;
  bool input_done_ = false;
  std::vector<Record> buffer_;
  size_t held_ = 0;  // bytes charged to the memory account
};

// ---------------------------------------------------------------------------------------------
// Every record of every file exactly once per epoch, in a seeded random order, read by index.
class GlobalShuffleIterator final : public RecordIterator {
 public:
  static Result<std::unique_ptr<GlobalShuffleIterator>> Make(const FileSource& src, uint64_t seed,
                                                             StreamContext* ctx, int stat) {
    auto it = std::unique_ptr<GlobalShuffleIterator>(new GlobalShuffleIterator(ctx, stat));
    const std::vector<uint32_t> files = ShardFiles(src);
    uint64_t total = 0;
    for (uint32_t f : files) {
      const std::string& path = src.files->files[f];
      std::vector<format::IndexEntry> entries;
      // The .idx only saves a scan: one that is missing, malformed, or does not cover the file
      // exactly (stale, incomplete) is replaced by an index built in memory from the file.
      RF_ASSIGN_OR_RETURN(auto file, io::RandomAccessFile::Open(path));
      Result<std::vector<format::IndexEntry>> from_file = format::ReadIndexFile(path + ".idx");
      if (from_file.ok() &&
          format::CheckIndexCoversFile(*from_file, file->size(), path).ok()) {
        entries = std::move(from_file).value();
      } else {
        RF_ASSIGN_OR_RETURN(entries, format::BuildIndex(path, ReaderOptions(src.files->files_options)));
      }
      RF_ASSIGN_OR_RETURN(auto reader, format::IndexedRecordReader::Open(path, std::move(entries)));
      total += reader->size();
      it->readers_.push_back(std::move(reader));
      it->file_ids_.push_back(f);
      it->starts_.push_back(total);
    }
    it->perm_.resize(total);
    std::iota(it->perm_.begin(), it->perm_.end(), uint64_t{0});
    Rng rng(seed);
    for (uint64_t i = total; i > 1; --i) std::swap(it->perm_[i - 1], it->perm_[rng.Below(i)]);
    return it;
  }

  Result<bool> Next(Record* out) override {
    if (next_ >= perm_.size()) return false;
    StatsScope scope(ctx_, stat_);
    const uint64_t g = perm_[next_];
    const size_t f = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), g) - starts_.begin());
    const uint64_t local = g - (f == 0 ? 0 : starts_[f - 1]);
    RF_ASSIGN_OR_RETURN(auto data, readers_[f]->ReadRecord(local, &scratch_));
    out->data.assign(reinterpret_cast<const char*>(data.data()), data.size());
    out->position = {file_ids_[f], readers_[f]->entries()[local].offset, local};
    ++next_;
    scope.Done(*out);
    return true;
  }
  Status Save(StateWriter& w) override {
    w.U64(next_);
    w.U64(perm_.size());
    return Status();
  }
  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(next_, r.U64("global shuffle position"));
    RF_ASSIGN_OR_RETURN(uint64_t n, r.U64("global shuffle size"));
    if (n != perm_.size() || next_ > n) {
      return DataLossError("checkpoint: the files hold " + std::to_string(perm_.size()) +
                           " records now, " + std::to_string(n) + " when it was taken");
    }
    return Status();
  }

 private:
  GlobalShuffleIterator(StreamContext* ctx, int stat) : ctx_(ctx), stat_(stat) {}
  StreamContext* ctx_;
  int stat_;
  std::vector<std::unique_ptr<format::IndexedRecordReader>> readers_;
  std::vector<uint32_t> file_ids_;
  std::vector<uint64_t> starts_;  // cumulative record counts (exclusive ends)
  std::vector<uint64_t> perm_;
  uint64_t next_ = 0;
  std::vector<std::byte> scratch_;
};

// ---------------------------------------------------------------------------------------------
class RepeatIterator final : public RecordIterator {
 public:
  RepeatIterator(const Node* node, uint64_t outer_epoch, StreamContext* ctx, SeedTable* seeds)
      : node_(node), outer_(outer_epoch), ctx_(ctx), seeds_(seeds) {}

  Result<bool> Next(Record* out) override {
    while (node_->count < 0 || epoch_ < static_cast<uint64_t>(node_->count)) {
      if (!input_) {
        RF_ASSIGN_OR_RETURN(input_, Make());
      }
      RF_ASSIGN_OR_RETURN(bool ok, input_->Next(out));
      if (ok) {
        produced_in_epoch_ = true;
        // Which pass over the input this is (per-element augmentation seeds use it).
        out->position.epoch = out->position.epoch * 0x9E3779B97F4A7C15ull + epoch_;
        return true;
      }
      input_.reset();
      if (!produced_in_epoch_) return false;  // an empty input repeated forever is empty
      produced_in_epoch_ = false;
      ++epoch_;
    }
    return false;
  }

  Status Save(StateWriter& w) override {
    w.U64(epoch_);
    w.Bool(produced_in_epoch_);
    w.Bool(input_ != nullptr);
    if (input_) return input_->Save(w);
    return Status();
  }

  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(epoch_, r.U64("repeat epoch"));
    RF_ASSIGN_OR_RETURN(produced_in_epoch_, r.Bool("repeat progress"));
    RF_ASSIGN_OR_RETURN(bool has_input, r.Bool("repeat input"));
    input_.reset();
    if (has_input) {
      RF_ASSIGN_OR_RETURN(input_, Make());
      RF_RETURN_IF_ERROR(input_->Restore(r));
    }
    return Status();
  }

 private:
  Result<std::unique_ptr<RecordIterator>> Make() {
    const uint64_t e = outer_ == 0 ? epoch_ : MixSeed(outer_, epoch_);
    return MakeRecordIterator(node_->input.get(), e, ctx_, seeds_, -1);
  }
  const Node* node_;
  uint64_t outer_;
  StreamContext* ctx_;
  SeedTable* seeds_;
  uint64_t epoch_ = 0;
  bool produced_in_epoch_ = false;
  std::unique_ptr<RecordIterator> input_;
};

// ---------------------------------------------------------------------------------------------
class TakeSkipIterator final : public RecordIterator {
 public:
  TakeSkipIterator(std::unique_ptr<RecordIterator> input, bool take, int64_t count,
                   const StreamContext* ctx)
      : input_(std::move(input)), take_(take), count_(count), ctx_(ctx) {}
  Result<bool> Next(Record* out) override {
    if (take_) {
      if (count_ >= 0 && seen_ >= static_cast<uint64_t>(count_)) return false;
      RF_ASSIGN_OR_RETURN(bool ok, input_->Next(out));
      if (ok) ++seen_;
      return ok;
    }
    while (count_ < 0 || seen_ < static_cast<uint64_t>(count_)) {
      // A long skip is one call: it must notice that the iterator is being destroyed.
      if ((seen_ & 1023) == 0 && ctx_ != nullptr &&
          ctx_->cancelled.load(std::memory_order_relaxed)) {
        return CancelledError("skip: the iterator was closed");
      }
      RF_ASSIGN_OR_RETURN(bool ok, input_->Next(out));
      if (!ok) return false;
      ++seen_;
    }
    return input_->Next(out);
  }
  Status Save(StateWriter& w) override {
    w.U64(seen_);
    return input_->Save(w);
  }
  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(seen_, r.U64("take/skip count"));
    return input_->Restore(r);
  }

 private:
  std::unique_ptr<RecordIterator> input_;
  bool take_;
  int64_t count_;
  const StreamContext* ctx_;
  uint64_t seen_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// The records a Cache stage kept in its first epoch.
struct CacheStore {
  ~CacheStore() {
    if (memory != nullptr) memory->Release(MemoryAccount::kCache, held);
  }
  std::vector<Record> records;  // memory cache
  MemoryAccount* memory = nullptr;
  size_t held = 0;  // bytes of `records` charged to `memory`
  std::unique_ptr<format::RecordWriter> writer;  // file cache being written
  bool complete = false;
};

namespace {

class CacheIterator final : public RecordIterator {
 public:
  CacheIterator(const Node* node, std::shared_ptr<CacheStore> store,
                std::unique_ptr<RecordIterator> input, StreamContext* ctx, uint32_t cache_file_id)
      : node_(node), store_(std::move(store)), input_(std::move(input)), ctx_(ctx),
        cache_file_id_(cache_file_id) {
    replaying_ = store_->complete;
  }

  Result<bool> Next(Record* out) override {
    if (replaying_) return Replay(out);
    RF_ASSIGN_OR_RETURN(bool ok, input_->Next(out));
    if (!ok) {
      if (store_->writer) RF_RETURN_IF_ERROR(store_->writer->Close());
      store_->writer.reset();
      store_->complete = true;
      return false;
    }
    if (node_->cache_path.empty()) {
      RF_RETURN_IF_ERROR(Keep(Record(*out)));
    } else {
      if (!store_->writer) {
        RF_ASSIGN_OR_RETURN(store_->writer, format::RecordWriter::Open(node_->cache_path));
      }
      RF_RETURN_IF_ERROR(store_->writer->WriteRecord(std::as_bytes(std::span(out->data.data(), out->data.size()))));
    }
    return true;
  }

  Status Save(StateWriter& w) override {
    w.Bool(replaying_);
    if (!node_->cache_path.empty()) {
      if (replaying_) {
        w.U64(next_);
        return Status();
      }
      return UnimplementedError("checkpoint while cache('" + node_->cache_path +
                                "') is being written in the first epoch; checkpoint after it "
                                "completes or use an in-memory cache");
    }
    // A memory cache saves what it holds (as references where possible), then its place.
    w.U64(store_->records.size());
    for (const Record& r : store_->records) ctx_->SaveRecord(w, r);
    if (replaying_) {
      w.U64(next_);
      return Status();
    }
    return input_->Save(w);
  }

  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(replaying_, r.Bool("cache replay"));
    if (!node_->cache_path.empty()) {
      if (!replaying_ || !store_->complete) {
        return DataLossError("checkpoint replays cache file '" + node_->cache_path + "', which is missing");
      }
      RF_ASSIGN_OR_RETURN(next_, r.U64("cache position"));
      return Status();
    }
    RF_ASSIGN_OR_RETURN(uint64_t n, r.U64("cache count"));
    store_->records.clear();
    store_->records.shrink_to_fit();
    ctx_->Release(MemoryAccount::kCache, store_->held);
    store_->held = 0;
    for (uint64_t i = 0; i < n; ++i) {
      RF_ASSIGN_OR_RETURN(Record rec, ctx_->RestoreRecord(r));
      RF_RETURN_IF_ERROR(Keep(std::move(rec)));
    }
    if (replaying_) {
      store_->complete = true;
      input_.reset();
      RF_ASSIGN_OR_RETURN(next_, r.U64("cache position"));
      return Status();
    }
    if (!input_) return DataLossError("checkpoint: cache state does not match");
    return input_->Restore(r);
  }

 private:
  // A memory cache is a fixed buffer of the memory account: past the budget it fails.
  // Charged like a shuffle buffer: payload capacity and the vector's slots.
  Status Keep(Record&& r) {
    const size_t slots_before = store_->records.capacity();
    size_t cost = r.data.capacity();
    store_->records.push_back(std::move(r));
    cost += (store_->records.capacity() - slots_before) * sizeof(Record);
    if (ctx_->memory == nullptr) return Status();
    store_->memory = ctx_->memory;
    store_->held += cost;
    ctx_->memory->Charge(MemoryAccount::kCache, cost);
    return ctx_->memory->CheckFixed(
        MemoryAccount::kCache,
        "in memory (" + std::to_string(store_->records.size()) + " records so far)");
  }

  Result<bool> Replay(Record* out) {
    if (node_->cache_path.empty()) {
      if (next_ >= store_->records.size()) return false;
      *out = store_->records[next_++];
      return true;
    }
    if (!reader_) {
      format::RecordReaderOptions o;
      o.compression = format::Compression::kNone;
      RF_ASSIGN_OR_RETURN(reader_, OpenCounted(ctx_, node_->cache_path, o));
      // Replays resume by record count (the cache file is ours and uncompressed).
      for (uint64_t i = 0; i < next_; ++i) {
        RF_ASSIGN_OR_RETURN(bool ok, reader_.Skip());
        if (!ok) return DataLossError("cache file '" + node_->cache_path + "' is shorter than the checkpoint");
      }
    }
    RF_ASSIGN_OR_RETURN(bool ok, reader_.ReadInto(cache_file_id_, out));
    if (ok) {
      ++next_;
    } else {
      reader_.reset();
    }
    return ok;
  }

  const Node* node_;
  std::shared_ptr<CacheStore> store_;
  std::unique_ptr<RecordIterator> input_;
  StreamContext* ctx_;
  uint32_t cache_file_id_;
  bool replaying_ = false;
  uint64_t next_ = 0;
  CountedReader reader_;
};

Result<FileSource> FileSourceOf(const Node* node) {
  FileSource src;
  if (node->kind == Node::Kind::kShard && node->input && node->input->kind == Node::Kind::kFiles) {
    src.files = node->input.get();
    src.num_shards = node->num_shards;
    src.shard_index = node->shard_index;
  } else if (node->kind == Node::Kind::kFiles) {
    src.files = node;
  } else {
    return InvalidArgumentError("expects files as its input (Dataset::FromFiles, optionally shard)");
  }
  return src;
}

}  // namespace

bool IsRecordStage(Node::Kind kind) {
  switch (kind) {
    case Node::Kind::kFiles:
    case Node::Kind::kMemory:
    case Node::Kind::kShard:
    case Node::Kind::kInterleave:
    case Node::Kind::kShuffle:
    case Node::Kind::kGlobalShuffle:
    case Node::Kind::kRepeat:
    case Node::Kind::kTake:
    case Node::Kind::kSkip:
    case Node::Kind::kCache:
      return true;
    default:
      return false;
  }
}

std::shared_ptr<RecordFetcher> MakeFetcher(const Node* chain) {
  const Node* n = chain;
  std::vector<std::string> caches;
  while (n->input) {
    if (n->kind == Node::Kind::kCache && !n->cache_path.empty()) caches.push_back(n->cache_path);
    n = n->input.get();
  }
  if (n->kind == Node::Kind::kMemory) {
    return std::make_shared<RecordFetcher>(std::vector<std::string>{}, FilesOptions{}, n->memory);
  }
  std::vector<std::string> files = n->files;
  files.insert(files.end(), caches.begin(), caches.end());
  return std::make_shared<RecordFetcher>(std::move(files), n->files_options, nullptr);
}

Result<std::unique_ptr<RecordIterator>> MakeRecordIterator(const Node* node, uint64_t epoch,
                                                           StreamContext* ctx, SeedTable* seeds,
                                                           int stat) {
  using K = Node::Kind;
  switch (node->kind) {
    case K::kFiles: {
      FileSource src{node};
      return std::unique_ptr<RecordIterator>(
          new FilesIterator(src, FileOrder(src, epoch, seeds), ctx, stat));
    }
    case K::kMemory:
      return std::unique_ptr<RecordIterator>(new MemoryIterator(node->memory, ctx, stat));
    case K::kShard: {
      if (node->input->kind == K::kFiles) {  // by file
        RF_ASSIGN_OR_RETURN(FileSource src, FileSourceOf(node));
        return std::unique_ptr<RecordIterator>(
            new FilesIterator(src, FileOrder(src, epoch, seeds), ctx, stat));
      }
      RF_ASSIGN_OR_RETURN(auto input, MakeRecordIterator(node->input.get(), epoch, ctx, seeds, -1));
      return std::unique_ptr<RecordIterator>(
          new ShardIterator(std::move(input), node->num_shards, node->shard_index));
    }
    case K::kInterleave: {
      RF_ASSIGN_OR_RETURN(FileSource src, FileSourceOf(node->input.get()));
      return std::unique_ptr<RecordIterator>(
          new InterleaveIterator(src, FileOrder(src, epoch, seeds), node->interleave, ctx, stat));
    }
    case K::kShuffle: {
      RF_ASSIGN_OR_RETURN(auto input, MakeRecordIterator(node->input.get(), epoch, ctx, seeds, -1));
      const uint64_t base = seeds->For(node, node->shuffle.seed);
      const uint64_t seed = node->shuffle.reshuffle_each_iteration ? MixSeed(base, epoch) : base;
      return std::unique_ptr<RecordIterator>(
          new ShuffleIterator(std::move(input), node->shuffle.buffer_size, seed, ctx, stat));
    }
    case K::kGlobalShuffle: {
      RF_ASSIGN_OR_RETURN(FileSource src, FileSourceOf(node->input.get()));
      const uint64_t base = seeds->For(node, node->shuffle.seed);
      const uint64_t seed = node->shuffle.reshuffle_each_iteration ? MixSeed(base, epoch) : base;
      RF_ASSIGN_OR_RETURN(auto it, GlobalShuffleIterator::Make(src, seed, ctx, stat));
      return std::unique_ptr<RecordIterator>(std::move(it));
    }
    case K::kRepeat:
      return std::unique_ptr<RecordIterator>(new RepeatIterator(node, epoch, ctx, seeds));
    case K::kTake:
    case K::kSkip: {
      RF_ASSIGN_OR_RETURN(auto input, MakeRecordIterator(node->input.get(), epoch, ctx, seeds, -1));
      return std::unique_ptr<RecordIterator>(
          new TakeSkipIterator(std::move(input), node->kind == K::kTake, node->count, ctx));
    }
    case K::kCache: {
      std::shared_ptr<CacheStore> store;
      {
        std::lock_guard lock(ctx->cache_mu);
        auto& slot = ctx->caches[node];
        if (!slot) {
          slot = std::make_shared<CacheStore>();
          // A complete cache file from an earlier run replaces the input.
          if (!node->cache_path.empty()) {
            slot->complete = io::StatPath(node->cache_path).ok();  // local or URL
          }
        }
        store = slot;
      }
      std::unique_ptr<RecordIterator> input;
      if (!store->complete) {
        RF_ASSIGN_OR_RETURN(input, MakeRecordIterator(node->input.get(), epoch, ctx, seeds, -1));
      }
      uint32_t cache_file_id = 0;
      if (!node->cache_path.empty()) {
        const auto& files = ctx->fetcher->files();
        cache_file_id = static_cast<uint32_t>(
            std::find(files.begin(), files.end(), node->cache_path) - files.begin());
      }
      return std::unique_ptr<RecordIterator>(
          new CacheIterator(node, store, std::move(input), ctx, cache_file_id));
    }
    default:
      return InternalError("not a record stage: " + node->Describe());
  }
}

}  // namespace recordflow::pipeline::internal
