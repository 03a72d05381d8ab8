// Interleave: cycle_length files at once, block_length records from each in turn; optionally
// read ahead on the thread pool. With read-ahead, a slot's file is opened, read and closed by
// its fill task on the pool, starting as soon as the slot takes the file: many small shards
// then open concurrently and ahead of need instead of one at a time on the consumer's thread.
#include <algorithm>
#include <atomic>
#include <deque>

#include "recordflow/core/mutex.h"
#include "recordflow/core/thread_pool.h"
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

// The saved state is where each open file's consumer stands, so records read ahead but not
// consumed are simply read again after a restore.
class InterleaveIterator final : public RecordIterator {
 public:
  InterleaveIterator(FileSource src, std::vector<uint32_t> order, const InterleaveOptions& o,
                     StreamContext* ctx)
      : src_(src), order_(std::move(order)), o_(o), ctx_(ctx) {
    const int cores =
        ctx_ != nullptr ? ctx_->Pool().num_threads() : ThreadPool::Default().num_threads();
    cycle_ = o_.cycle_length == kAutotune ? std::max(cores, 2) : std::max(o_.cycle_length, 1);
    parallel_ = o_.num_parallel == kAutotune ? std::min(cycle_, cores) : o_.num_parallel;
    block_ = std::max(o_.block_length, 1);
    slots_.resize(static_cast<size_t>(cycle_));
    for (auto& s : slots_) s = std::make_shared<Slot>();
  }

  ~InterleaveIterator() override {
    StopReadahead();
    for (auto& sp : slots_) {
      Slot& s = *sp;
      MutexLock lock(s.mu);
      DropReady(s);
    }
    DropPending();
  }

  Result<bool> Next(Record* out) override {
    while (true) {
      if (rescan_) RF_RETURN_IF_ERROR(OpenEmptySlots());
      if (!any_open_) return false;
      if (!o_.deterministic && parallel_ > 1) {
        // Take from the current slot if it has records, else from any slot that has.
        for (size_t step = 0; step < slots_.size(); ++step) {
          const size_t i = (current_ + step) % slots_.size();
          Slot& s = *slots_[i];
          MutexLock lock(s.mu);
          if (s.open && !s.ready.empty()) {
            current_ = i;
            break;
          }
        }
      }
      Slot& s = *slots_[current_];
      if (!s.open) {
        Advance();
        continue;
      }
      RF_ASSIGN_OR_RETURN(bool got, Take(s, out));
      if (!got) {  // this file is done; its slot takes the next file
        s.open = false;
        s.reader.reset();  // its buffers leave the memory account now, not at the next open
        rescan_ = true;
        // Files open ahead only while they are small (many tiny shards): a large file's
        // reader buffer would add to the fixed memory for no gain.
        if (parallel_ > 1) {
          pending_max_ =
              s.consumed_offset <= kOpenAheadMaxFileBytes ? static_cast<size_t>(cycle_) : 0;
        }
        Advance();
        continue;
      }
      if (++taken_in_block_ >= block_) Advance();
      return true;
    }
  }

  Status Save(StateWriter& w) override {
    StopReadahead();
    rescan_ = true;  // the slots' readers are dropped below
    w.U64(next_file_);
    w.U64(current_);
    w.U64(taken_in_block_);
    w.U64(slots_.size());
    DropPending();  // files opened ahead are not consumed: they are opened again
    for (auto& sp : slots_) {
      Slot& s = *sp;
      w.Bool(s.open);
      w.U64(s.file);
      w.U64(s.consumed_offset);
      w.U64(s.consumed_index);
      // Records read ahead are dropped: the restored reader reads them again. Their offsets
      // go too: left behind, the next records taken would report stale (earlier) offsets, and
      // a later checkpoint would replay records already delivered.
      s.reader.reset();
      MutexLock lock(s.mu);
      DropReady(s);
      s.eof = false;
    }
    return Status();
  }

  Status Restore(StateReader& r) override {
    StopReadahead();
    DropPending();  // they follow the saved next file, which this restore replaces
    rescan_ = true;
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
      s.reader.reset();
      MutexLock lock(s.mu);
      DropReady(s);
      s.eof = false;
      s.error = Status();
    }
    return Status();
  }

 private:
  struct Slot {
    Mutex mu;
    CondVar cv;
    bool open = false;  // consumer-owned
    uint32_t file = 0;
    uint64_t consumed_offset = 0;  // reader offset after the last record consumed
    uint64_t consumed_index = 0;
    // Owned by the consumer, and by the fill task while `filling` (the consumer does not touch
    // it then): not guarded, since the read itself must not hold `mu`. With read-ahead, null
    // until the first fill opens the file at (consumed_offset, consumed_index).
    CountedReader reader;
    std::deque<Record> ready RF_GUARDED_BY(mu);
    size_t ready_bytes RF_GUARDED_BY(mu) = 0;  // RecordBytes of `ready`, charged to the account
    bool eof RF_GUARDED_BY(mu) = false;
    bool filling RF_GUARDED_BY(mu) = false;
    // Opened ahead, not yet in the cycle: its fill stops after one chunk.
    bool pending RF_GUARDED_BY(mu) = false;
    Status error RF_GUARDED_BY(mu);
    std::deque<uint64_t> next_offsets RF_GUARDED_BY(mu);  // reader offsets after each ready record
  };

  static constexpr size_t kReadaheadBytes = 8 << 20;
  static constexpr size_t kReadaheadRecords = 256;
  // A fill task reads records in chunks of at most this many records / bytes (the first record
  // always) and queues each chunk under one lock with one wake-up: a lock and a wake-up per
  // 100-byte record cost more than reading it.
  static constexpr size_t kChunkRecords = 64;
  static constexpr size_t kChunkBytes = 64 << 10;
  // Up to cycle_length files after the cycle's are opened ahead while the last file that
  // ended held at most this many bytes.
  static constexpr uint64_t kOpenAheadMaxFileBytes = 64 << 10;

  // Files fill the cycle in slot order at the start (tf.data's order).
  // Runs only when `rescan_` says a slot may need work (start, a file ended, Save, Restore):
  // a scan of every slot per record costs more than a 100-byte record.
  Status OpenEmptySlots() {
    for (auto& sp : slots_) {
      Slot& s = *sp;
      if (s.open) {
        if (parallel_ > 1) {
          // After a checkpoint or restore the slot has no reader: its fill reopens it.
          // `filling` first: while a fill runs it owns `reader`, which must not be read here.
          MutexLock lock(s.mu);
          if (!s.filling && !s.reader && !s.eof && s.error.ok()) StartFill(s);
        } else if (!s.reader) {
          RF_ASSIGN_OR_RETURN(s.reader,
                              OpenAt(ctx_, src_, s.file, s.consumed_offset, s.consumed_index));
        }
        continue;
      }
      if (parallel_ > 1) TopUpPending();
      if (!pending_.empty()) {
        // The next file in order comes from the files opened ahead (tiny shards: its open
        // and first chunk are done by the time the consumer reaches the slot).
        std::shared_ptr<Slot> next = std::move(pending_.front());
        pending_.pop_front();
        ++next_file_;
        {
          MutexLock lock(next->mu);
          next->pending = false;
          if (!next->filling && !next->eof && next->error.ok() && RoomToReadAhead()) {
            StartFill(*next);
          }
        }
        sp = std::move(next);  // the closed slot is empty and its fill has ended
        continue;
      }
      if (next_file_ >= order_.size()) continue;
      s.file = order_[next_file_++];
      s.consumed_offset = s.consumed_index = 0;
      if (parallel_ <= 1) {
        RF_ASSIGN_OR_RETURN(s.reader, OpenAt(ctx_, src_, s.file, 0, 0));
      }
      MutexLock lock(s.mu);
      DropReady(s);
      s.eof = false;
      s.error = Status();
      s.open = true;
      // Open and read ahead now, on the pool; an open error reaches the consumer when it
      // takes from this slot, like a read error.
      if (parallel_ > 1) StartFill(s);
    }
    any_open_ = false;
    for (auto& sp : slots_) any_open_ |= sp->open;
    TopUpPending();
    rescan_ = false;
    return Status();
  }

  // Opens the files after the cycle's ahead, on the pool (read-ahead only): pending_ holds
  // order_[next_file_, next_file_ + pending_.size()), at most pending_max_ of them.
  void TopUpPending() {
    while (pending_.size() < pending_max_ && next_file_ + pending_.size() < order_.size()) {
      auto p = std::make_shared<Slot>();
      p->file = order_[next_file_ + pending_.size()];
      p->open = true;
      MutexLock lock(p->mu);
      p->pending = true;
      StartFill(*p);
      pending_.push_back(std::move(p));
    }
  }

  // Drops the files opened ahead (after StopReadahead): their records leave the account.
  void DropPending() {
    for (auto& sp : pending_) {
      Slot& s = *sp;
      s.reader.reset();
      MutexLock lock(s.mu);
      DropReady(s);
    }
    pending_.clear();
  }

  // Empties a slot's read-ahead queue, with the offsets of its records, and releases its bytes.
  void DropReady(Slot& s) RF_REQUIRES(s.mu) {
    s.ready.clear();
    s.next_offsets.clear();
    ctx_->Release(MemoryAccount::kInterleave, s.ready_bytes);
    s.ready_bytes = 0;
  }

  // Read-ahead is elastic: it goes on only while the iterator's buffers fit the budget.
  bool RoomToReadAhead() const { return ctx_->memory == nullptr || ctx_->memory->Fits(1); }

  bool Filling(Slot& s) {
    MutexLock lock(s.mu);
    return s.filling;
  }

  void Advance() {
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
    MutexLock lock(s.mu);
    while (true) {
      if (!s.ready.empty()) {
        *out = std::move(s.ready.front());
        s.ready.pop_front();
        const size_t cost = RecordBytes(*out);
        s.ready_bytes -= cost;
        ctx_->Release(MemoryAccount::kInterleave, cost);
        s.consumed_offset = s.next_offsets.front();
        s.next_offsets.pop_front();
        s.consumed_index = out->position.index + 1;
        if (!s.filling && !s.eof && s.error.ok() && s.ready.size() < kReadaheadRecords / 2 &&
            RoomToReadAhead()) {
          StartFill(s);
        }
        return true;
      }
      if (!s.error.ok()) return s.error;
      if (s.eof) return false;
      // An empty queue always gets a fill (it reads at least one record, budget or not):
      // read-ahead never blocks the only reader.
      if (!s.filling) StartFill(s);
      s.cv.Wait(s.mu);
    }
  }

  void StartFill(Slot& s) RF_REQUIRES(s.mu) {
    s.filling = true;
    {
      MutexLock g(tasks_mu_);
      ++tasks_;
    }
    (ctx_ != nullptr ? ctx_->Pool() : ThreadPool::Default()).Schedule([this, &s] { Fill(s); });
  }

  // Runs on the pool: opens the slot's file if it has no reader, then reads until the queue is
  // full, the file ends (and closes it) or we are stopped. `filling` is cleared in the same
  // critical section that records why the task ends, so the consumer never sees eof while a
  // task still runs.
  void Fill(Slot& s) {
    Status open_error;
    if (!s.reader && !stop_.load()) {
      uint64_t offset = 0;
      uint64_t index = 0;
      {
        MutexLock lock(s.mu);  // the queue is empty: the consumed position is the file's
        offset = s.consumed_offset;
        index = s.consumed_index;
      }
      Result<CountedReader> opened = CountedReader();
      Status caught = CatchExceptions("opening '" + src_.files->files[s.file] + "'", [&] {
        opened = OpenAt(ctx_, src_, s.file, offset, index);
        return Status();
      });
      if (!caught.ok()) opened = caught;
      if (opened.ok()) {
        s.reader = std::move(*opened);
      } else {
        open_error = opened.status();
      }
    }
    std::vector<Record> chunk;
    std::vector<uint64_t> offsets;
    while (true) {
      if (open_error.ok()) {
        // Over budget: no read-ahead, but never before the queue holds a record.
        MutexLock lock(s.mu);
        if (!s.ready.empty() && !RoomToReadAhead()) {
          s.filling = false;
          s.cv.NotifyAll();
          break;
        }
      }
      chunk.clear();
      offsets.clear();
      size_t chunk_bytes = 0;
      Result<bool> got(false);
      bool ended = false;
      if (s.reader) {
        while (!stop_.load() && chunk.size() < kChunkRecords && chunk_bytes < kChunkBytes &&
               (chunk.empty() || RoomToReadAhead())) {
          Record r;
          // Pool thread: no exception may leave it (a record too large to copy is an error).
          Status caught = CatchExceptions("reading ahead in '" + s.reader->path() + "'", [&] {
            got = s.reader.ReadInto(s.file, &r);
            return Status();
          });
          if (!caught.ok()) got = caught;
          if (!got.ok() || !*got) break;
          chunk_bytes += RecordBytes(r);
          chunk.push_back(std::move(r));
          offsets.push_back(s.reader->offset());
        }
        ended = got.ok() && !*got && !stop_.load();
        if (ended) s.reader.reset();  // the file is done: closed here, off the consumer's thread
      }
      MutexLock lock(s.mu);
      if (!chunk.empty()) {
        s.ready_bytes += chunk_bytes;
        ctx_->Charge(MemoryAccount::kInterleave, chunk_bytes);
        for (size_t i = 0; i < chunk.size(); ++i) {
          s.ready.push_back(std::move(chunk[i]));
          s.next_offsets.push_back(offsets[i]);
        }
        s.cv.NotifyAll();
      }
      bool done = true;
      if (!open_error.ok()) {
        s.error = open_error;
      } else if (stop_.load() || (!s.reader && !ended)) {
        // stopped: Save/Restore/destruction drop the queue; a later fill reopens the file
      } else if (!got.ok()) {
        s.error = got.status();
      } else if (ended) {
        s.eof = true;
      } else if (!s.pending && s.ready.size() < kReadaheadRecords &&
                 s.ready_bytes < kReadaheadBytes) {
        done = false;  // the next chunk (the budget is checked at the top)
      }
      if (done) {
        s.filling = false;
        s.cv.NotifyAll();
        break;
      }
    }
    MutexLock g(tasks_mu_);
    if (--tasks_ == 0) tasks_cv_.NotifyAll();
  }

  // Stops read-ahead tasks and waits for them (before saving, restoring or destruction).
  void StopReadahead() {
    stop_ = true;
    {
      MutexLock g(tasks_mu_);
      while (tasks_ != 0) tasks_cv_.Wait(tasks_mu_);
    }
    stop_ = false;
  }

  FileSource src_;
  std::vector<uint32_t> order_;
  InterleaveOptions o_;
  StreamContext* ctx_;
  int cycle_ = 1, parallel_ = 1, block_ = 1;
  std::vector<std::shared_ptr<Slot>> slots_;
  std::deque<std::shared_ptr<Slot>> pending_;  // see TopUpPending
  size_t pending_max_ = 0;  // 0 until a small file has ended (kOpenAheadMaxFileBytes)
  size_t next_file_ = 0;
  size_t current_ = 0;
  int taken_in_block_ = 0;
  bool rescan_ = true;     // OpenEmptySlots has work: see there
  bool any_open_ = false;  // a slot is open (as of the last scan)
  std::atomic<bool> stop_{false};
  Mutex tasks_mu_;
  CondVar tasks_cv_;
  int tasks_ RF_GUARDED_BY(tasks_mu_) = 0;
};

}  // namespace

std::unique_ptr<RecordIterator> MakeInterleaveStream(FileSource src, std::vector<uint32_t> order,
                                                     const InterleaveOptions& options,
                                                     StreamContext* ctx) {
  return std::make_unique<InterleaveIterator>(src, std::move(order), options, ctx);
}

}  // namespace recordflow::pipeline::internal
