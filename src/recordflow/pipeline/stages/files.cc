// Source stages: files read one after the other, and records held in memory.
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

class FilesIterator final : public RecordIterator {
 public:
  FilesIterator(FileSource src, std::vector<uint32_t> order, StreamContext* ctx)
      : src_(src), order_(std::move(order)), ctx_(ctx) {}

  Result<bool> Next(Record* out) override {
    while (k_ < order_.size()) {
      if (!reader_) {
        RF_ASSIGN_OR_RETURN(reader_, OpenAt(ctx_, src_, order_[k_], offset_, index_));
      }
      RF_ASSIGN_OR_RETURN(bool ok, reader_.ReadInto(order_[k_], out));
      if (ok) {
        offset_ = reader_->offset();
        index_ = reader_->records_read();
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
  size_t k_ = 0;  // position in order_
  uint64_t offset_ = 0;
  uint64_t index_ = 0;
  CountedReader reader_;
};

class MemoryIterator final : public RecordIterator {
 public:
  explicit MemoryIterator(std::shared_ptr<const std::vector<std::string>> records)
      : records_(std::move(records)) {}
  Result<bool> Next(Record* out) override {
    if (i_ >= records_->size()) return false;
    out->data = (*records_)[i_];
    out->position = {0, 0, i_};
    ++i_;
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
  uint64_t i_ = 0;
};

}  // namespace

std::unique_ptr<RecordIterator> MakeFilesStream(FileSource src, std::vector<uint32_t> order,
                                                StreamContext* ctx) {
  return std::make_unique<FilesIterator>(src, std::move(order), ctx);
}

std::unique_ptr<RecordIterator> MakeMemoryStream(
    std::shared_ptr<const std::vector<std::string>> records) {
  return std::make_unique<MemoryIterator>(std::move(records));
}

}  // namespace recordflow::pipeline::internal
