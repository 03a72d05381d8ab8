// Global shuffle: every record of every file exactly once per epoch, in a seeded random order,
// read by index (the files' .idx indexes, built in memory when missing).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <type_traits>

#include "recordflow/format/record_index.h"
#include "recordflow/io/file.h"
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

// Every record of every file exactly once per epoch, in a seeded random order, read by index.
class GlobalShuffleIterator final : public RecordIterator {
 public:
  static Result<std::unique_ptr<GlobalShuffleIterator>> Make(const FileSource& src, uint64_t seed) {
    auto it = std::unique_ptr<GlobalShuffleIterator>(new GlobalShuffleIterator());
    const std::vector<uint32_t> files = ShardFiles(src);
    uint64_t total = 0;
    for (uint32_t f : files) {
      const std::string& path = src.files->files[f];
      std::vector<format::IndexEntry> entries;
      // The .idx only saves a scan: one that is missing, malformed, or does not cover the file
      // exactly (stale, incomplete) is replaced by an index built in memory from the file.
      RF_ASSIGN_OR_RETURN(auto file, io::RandomAccessFile::Open(path));
      Result<std::vector<format::IndexEntry>> from_file = format::ReadIndexFile(path + ".idx");
      if (from_file.ok() && format::CheckIndexCoversFile(*from_file, file->size(), path).ok()) {
        entries = std::move(from_file).value();
      } else {
        RF_ASSIGN_OR_RETURN(entries, format::BuildIndex(path, ReaderOptions(src.files->options)));
      }
      RF_ASSIGN_OR_RETURN(auto reader, format::IndexedRecordReader::Open(path, std::move(entries)));
      total += reader->size();
      it->readers_.push_back(std::move(reader));
      it->file_ids_.push_back(f);
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
    const uint64_t g = perm32_.empty() ? perm64_[next_] : perm32_[next_];
    const size_t f =
        static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), g) - starts_.begin());
    const uint64_t local = g - (f == 0 ? 0 : starts_[f - 1]);
    RF_ASSIGN_OR_RETURN(auto data, readers_[f]->ReadRecord(local, &scratch_));
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
    if (n != size_ || next_ > n) {
      return DataLossError("checkpoint: the files hold " + std::to_string(size_) +
                           " records now, " + std::to_string(n) + " when it was taken");
    }
    return Status();
  }

 private:
  GlobalShuffleIterator() = default;
  std::vector<std::unique_ptr<format::IndexedRecordReader>> readers_;
  std::vector<uint32_t> file_ids_;
  std::vector<uint64_t> starts_;  // cumulative record counts (exclusive ends)
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
