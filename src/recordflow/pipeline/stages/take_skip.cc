// Take and skip of records (before the batch; after it the executor counts outputs).
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

class TakeSkipIterator final : public CountingRecordIterator {
 public:
  TakeSkipIterator(std::unique_ptr<RecordIterator> input, bool take, int64_t count,
                   const StreamContext* ctx)
      : CountingRecordIterator(std::move(input), "take/skip count"),
        take_(take),
        count_(count),
        ctx_(ctx) {}
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

 private:
  bool take_;
  int64_t count_;
  const StreamContext* ctx_;
};

}  // namespace

std::unique_ptr<RecordIterator> MakeTakeSkipStream(std::unique_ptr<RecordIterator> input, bool take,
                                                   int64_t count, const StreamContext* ctx) {
  return std::make_unique<TakeSkipIterator>(std::move(input), take, count, ctx);
}

}  // namespace recordflow::pipeline::internal
