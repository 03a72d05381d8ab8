// Shared by the stage files: reading files charged to the memory account, the file source of
// file-level stages, and the constructors of every stage.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../record_stream.h"
#include "recordflow/format/record_reader.h"

namespace recordflow::pipeline::internal {

format::RecordReaderOptions ReaderOptions(const FilesOptions& o);

// The file source under a chain of record-stage nodes, and the file sharding applied to it.
struct FileSource {
  const Node* node = nullptr;  // the files node (seeds are kept by node)
  const stage::Files* files = nullptr;
  int num_shards = 1;
  int shard_index = 0;
};

// The file source of `node`: files, or shard directly on files. Errors: kInvalidArgument.
Result<FileSource> FileSourceOf(const Node* node);
// The files of `src`'s shard, in the source's (sorted) order.
std::vector<uint32_t> ShardFiles(const FileSource& src);
// The files of `src` read in `epoch`, as indexes into the source's file list.
std::vector<uint32_t> FileOrder(const FileSource& src, uint64_t epoch, SeedTable* seeds);

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
                 uint64_t record_index) override;
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
    Result<bool> ok = reader_->ReadRecord(&out->data);
    if (ok.ok() && *ok) {
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
                                  format::RecordReaderOptions options);

// Opens file `file` of `src` at a saved position.
Result<CountedReader> OpenAt(const StreamContext* ctx, const FileSource& src, uint32_t file,
                             uint64_t offset, uint64_t index);

// The record-stream stages (one file each).
std::unique_ptr<RecordIterator> MakeFilesStream(FileSource src, std::vector<uint32_t> order,
                                                StreamContext* ctx);
std::unique_ptr<RecordIterator> MakeMemoryStream(
    std::shared_ptr<const std::vector<std::string>> records);
std::unique_ptr<RecordIterator> MakeShardStream(std::unique_ptr<RecordIterator> input,
                                                const stage::Shard& params);
std::unique_ptr<RecordIterator> MakeInterleaveStream(FileSource src, std::vector<uint32_t> order,
                                                     const InterleaveOptions& options,
                                                     StreamContext* ctx);
std::unique_ptr<RecordIterator> MakeShuffleStream(std::unique_ptr<RecordIterator> input,
                                                  size_t buffer_size, uint64_t seed,
                                                  StreamContext* ctx);
Result<std::unique_ptr<RecordIterator>> MakeGlobalShuffleStream(const FileSource& src,
                                                                uint64_t seed);
std::unique_ptr<RecordIterator> MakeRepeatStream(const Node* node, uint64_t outer_epoch,
                                                 StreamContext* ctx, SeedTable* seeds);
std::unique_ptr<RecordIterator> MakeTakeSkipStream(std::unique_ptr<RecordIterator> input, bool take,
                                                   int64_t count, const StreamContext* ctx);
Result<std::unique_ptr<RecordIterator>> MakeCacheStream(const Node* node, uint64_t epoch,
                                                        StreamContext* ctx, SeedTable* seeds);

// The executor's element stages.
struct ParseCall {
  int max_parallelism = 0;     // example::ParseOptions::max_parallelism
  bool views = false;          // bytes as views into the element's records
  bool keep_payloads = false;  // keep the records (a checkpoint saves their bytes)
  const std::vector<std::string>* files = nullptr;  // the pipeline's files, to name a record's
  uint64_t epoch = 0;                               // executor epoch, for error messages
};
// Parses `e`'s records into columns. Errors name the failing record's file, index and offset.
Status ParseElement(const stage::Parse& p, Element& e, const ParseCall& call);
// Runs a map on `e` with the MapContext of `threads` and `cancelled`. Errors carry the map's
// name.
Status MapElement(const stage::Map& m, Element& e, int threads, const std::atomic<bool>* cancelled);
// Appends `from` (a batch of parsed rows) to `to`: dense columns grow along dimension 0,
// ragged ones get shifted row_splits. Errors: kInvalidArgument when shapes differ.
Status ConcatColumns(std::vector<example::Column>& to, std::vector<example::Column>&& from);
// Batches the dense tensors of native maps: part j holds element j's tensors; the result
// concatenates them along the first dimension (one copy).
Status StackTensors(std::vector<std::vector<Tensor>>&& parts, std::vector<Tensor>* out);

}  // namespace recordflow::pipeline::internal
