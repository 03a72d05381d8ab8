// Global shuffle: every record of every file exactly once per epoch, in a seeded random order,
// read by index (the files' .idx indexes, built in memory when missing).
//
// Remote files: one GET per record would make the read as slow as the store's latency times the
// record count. The records of the next window of the permutation are instead grouped by file,
// sorted by offset, and their byte ranges merged when the hole between two is small enough
// that reading it costs less than a new request (Arrow's read coalescing): few large GETs,
// fetched concurrently, bring the window; records then leave in exactly the permuted order.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <numeric>
#include <thread>
#include <type_traits>

#include "recordflow/core/thread_pool.h"
#include "recordflow/format/record_index.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

// Read coalescing of remote files: a hole up to kHoleLimit bytes between two wanted records is
// read rather than paying a new request (at ~20 ms first-byte latency and ~50 MB/s, 1 MiB
// costs what one more request costs); a merged range stops at kRangeLimit bytes so that
// ranges still spread over concurrent GETs. A window holds the next records of the permutation
// up to kWindowBytes of record data (and kWindowRecords records).
constexpr uint64_t kHoleLimit = 1ull << 20;
constexpr uint64_t kRangeLimit = 16ull << 20;
constexpr uint64_t kWindowBytes = 64ull << 20;
constexpr size_t kWindowRecords = 1 << 16;
constexpr size_t kFetchThreads = 8;

// The file opened once, with its .idx. The .idx only saves a scan: one that is missing,
// malformed, or does not cover the file exactly (stale, incomplete) is replaced by an index
// built in memory from the file.
Result<std::unique_ptr<format::IndexedRecordReader>> OpenIndexed(
    const std::string& path, const format::RecordReaderOptions& options) {
  RF_ASSIGN_OR_RETURN(auto file, io::RandomAccessFile::Open(path));
  Result<std::vector<format::IndexEntry>> from_file = format::ReadIndexFile(path + ".idx");
  if (from_file.ok() && format::CheckIndexCoversFile(*from_file, file->size(), path).ok()) {
    return format::IndexedRecordReader::Open(std::move(file), std::move(from_file).value());
  }
  RF_ASSIGN_OR_RETURN(auto entries, format::BuildIndex(path, options));
  return format::IndexedRecordReader::Open(std::move(file), std::move(entries));
}

// Every record of every file exactly once per epoch, in a seeded random order, read by index.
class GlobalShuffleIterator final : public RecordIterator {
 public:
  static Result<std::unique_ptr<GlobalShuffleIterator>> Make(const FileSource& src, uint64_t seed) {
    auto it = std::unique_ptr<GlobalShuffleIterator>(new GlobalShuffleIterator());
    const std::vector<uint32_t> files = ShardFiles(src);
    // Indexes load in parallel: with many small shards (10^4 files of a few records) opening
    // and reading each .idx one after another dominated the time to the first batch, and a
    // remote shard costs a request's latency. The first error in file order is reported.
    std::vector<Result<std::unique_ptr<format::IndexedRecordReader>>> opened;
    opened.reserve(files.size());
    for (size_t i = 0; i < files.size(); ++i) opened.emplace_back(InternalError("not opened"));
    ParallelFor(files.size(), 16, 0, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        opened[i] = OpenIndexed(src.files->files[files[i]], ReaderOptions(src.files->options));
      }
    });
    uint64_t total = 0;
    for (size_t i = 0; i < files.size(); ++i) {
      RF_ASSIGN_OR_RETURN(auto reader, std::move(opened[i]));
      total += reader->size();
      it->remote_.push_back(io::IsRemotePath(reader->file().path()));
      it->readers_.push_back(std::move(reader));
      it->file_ids_.push_back(files[i]);
      it->starts_.push_back(total);
    }
    // The permutation is half the index state: 4 bytes a record while the records fit 32 bits
    // (with the 16-byte index entries, 20 bytes a record; 10^7 records: 200 MB).
    it->size_ = total;
    auto shuffle = [&](auto& perm) {
      using T = typename std::decay_t<decltype(perm)>::value_type;
      perm.resize(total);
      std::iota(perm.begin(), perm.end(), T{0});
      Rng rng(seed);
      for (uint64_t i = total; i > 1; --i) std::swap(perm[i - 1], perm[rng.Below(i)]);
    };
    if (total <= std::numeric_limits<uint32_t>::max()) {
      shuffle(it->perm32_);
    } else {
      shuffle(it->perm64_);
    }
    return it;
  }

  Result<bool> Next(Record* out) override {
    if (next_ >= size_) return false;
    const uint64_t g = PermAt(next_);
    const size_t f =
        static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), g) - starts_.begin());
    const uint64_t local = g - (f == 0 ? 0 : starts_[f - 1]);
    std::span<const std::byte> data;
    if (remote_[f]) {
      if (next_ < window_begin_ || next_ >= window_end_) RF_RETURN_IF_ERROR(FillWindow());
      const Slot& slot = slots_[next_ - window_begin_];
      RF_ASSIGN_OR_RETURN(
          data, readers_[f]->CheckRecord(
                    local, std::span<const std::byte>(ranges_[slot.range].data.data() + slot.offset,
                                                      readers_[f]->entries()[local].size)));
    } else {
      RF_ASSIGN_OR_RETURN(data, readers_[f]->ReadRecord(local, &scratch_));
    }
    out->data.assign(reinterpret_cast<const char*>(data.data()), data.size());
    out->position = {file_ids_[f], readers_[f]->entries()[local].offset, local};
    ++next_;
    return true;
  }
  Status Save(StateWriter& w) override {
    w.U64(next_);
    w.U64(size_);
    return Status();
  }
  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(next_, r.U64("global shuffle position"));
    RF_ASSIGN_OR_RETURN(uint64_t n, r.U64("global shuffle size"));
    window_begin_ = window_end_ = 0;  // the next read fills a window from the new position
    if (n != size_ || next_ > n) {
      return DataLossError("checkpoint: the files hold " + std::to_string(size_) +
                           " records now, " + std::to_string(n) + " when it was taken");
    }
    return Status();
  }

 private:
  GlobalShuffleIterator() = default;

  // One merged byte range of one file and, once fetched, its bytes.
  struct Range {
    size_t file = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
    std::vector<std::byte> data;
    Status status;
  };
  // Where the record at permutation position window_begin_ + i lies in the fetched ranges.
  struct Slot {
    size_t range = 0;
    uint64_t offset = 0;  // within the range
  };

  // Fetches the records of the permutation [next_, window_end_) that live in remote files,
  // coalesced.
  Status FillWindow() {
    window_begin_ = next_;
    window_end_ = next_;
    ranges_.clear();
    slots_.clear();
    struct Want {
      size_t file;
      uint64_t offset, size;
      size_t slot;
    };
    std::vector<Want> wants;
    uint64_t bytes = 0;
    while (window_end_ < size_ && wants.size() < kWindowRecords &&
           (wants.empty() || bytes < kWindowBytes)) {
      const uint64_t g = PermAt(window_end_);
      const size_t f = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), g) -
                                           starts_.begin());
      const uint64_t local = g - (f == 0 ? 0 : starts_[f - 1]);
      const format::IndexEntry& e = readers_[f]->entries()[local];
      if (remote_[f]) {
        wants.push_back({f, e.offset, e.size, slots_.size()});
        bytes += e.size;
      }
      slots_.push_back({});
      ++window_end_;
    }
    std::sort(wants.begin(), wants.end(), [](const Want& a, const Want& b) {
      return a.file != b.file ? a.file < b.file : a.offset < b.offset;
    });
    for (const Want& w : wants) {
      Range* last = ranges_.empty() ? nullptr : &ranges_.back();
      const bool merge = last != nullptr && last->file == w.file &&
                         w.offset >= last->offset + last->size &&
                         w.offset - (last->offset + last->size) <= kHoleLimit &&
                         w.offset + w.size - last->offset <= kRangeLimit;
      if (merge) {
        last->size = w.offset + w.size - last->offset;
      } else {
        ranges_.push_back({w.file, w.offset, w.size, {}, {}});
      }
      slots_[w.slot] = {ranges_.size() - 1, w.offset - ranges_.back().offset};
    }
    // Concurrent GETs, each thread taking the next range.
    std::atomic<size_t> next_range{0};
    auto work = [&] {
      for (size_t i = next_range++; i < ranges_.size(); i = next_range++) {
        Range& r = ranges_[i];
        try {
          r.data.resize(r.size);
        } catch (const std::bad_alloc&) {
          r.status = ResourceExhaustedError("global shuffle: cannot allocate " +
                                            std::to_string(r.size) + " bytes for a read of '" +
                                            readers_[r.file]->file().path() + "'");
          continue;
        }
        Result<size_t> got = readers_[r.file]->file().ReadAt(r.offset, std::span(r.data));
        if (!got.ok()) {
          r.status = got.status();
        } else if (*got < r.size) {
          r.status = DataLossError("global shuffle: '" + readers_[r.file]->file().path() +
                                   "' ends at byte " + std::to_string(r.offset + *got) +
                                   " but its index has records up to byte " +
                                   std::to_string(r.offset + r.size) + " (truncated?)");
        }
      }
    };
    const size_t threads = std::min(kFetchThreads, ranges_.size());
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) {
      pool.emplace_back([&work, t] {
        SetCurrentThreadName("rf-shuffle-" + std::to_string(t));
        work();
      });
    }
    work();
    for (std::thread& t : pool) t.join();
    for (const Range& r : ranges_) {
      if (!r.status.ok()) {
        window_end_ = window_begin_;  // retried from here on the next call
        return r.status;
      }
    }
    return Status();
  }

  std::vector<bool> remote_;  // per file: read through coalesced windows
  std::vector<Range> ranges_;
  std::vector<Slot> slots_;
  uint64_t window_begin_ = 0;
  uint64_t window_end_ = 0;
  std::vector<std::unique_ptr<format::IndexedRecordReader>> readers_;
  std::vector<uint32_t> file_ids_;
  std::vector<uint64_t> starts_;  // cumulative record counts (exclusive ends)
  uint64_t PermAt(uint64_t i) const { return perm32_.empty() ? perm64_[i] : perm32_[i]; }

  uint64_t size_ = 0;
  std::vector<uint32_t> perm32_;  // the permutation when size_ fits 32 bits,
  std::vector<uint64_t> perm64_;  // else this one
  uint64_t next_ = 0;
  std::vector<std::byte> scratch_;
};

}  // namespace

Result<std::unique_ptr<RecordIterator>> MakeGlobalShuffleStream(const FileSource& src,
                                                                uint64_t seed) {
  RF_ASSIGN_OR_RETURN(auto it, GlobalShuffleIterator::Make(src, seed));
  return std::unique_ptr<RecordIterator>(std::move(it));
}

}  // namespace recordflow::pipeline::internal
