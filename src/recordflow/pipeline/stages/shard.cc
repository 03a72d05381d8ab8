// Shard of records (a shard directly on files keeps files instead: see MakeRecordIterator).
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

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

}  // namespace

std::unique_ptr<RecordIterator> MakeShardStream(std::unique_ptr<RecordIterator> input,
                                                const stage::Shard& params) {
  return std::make_unique<ShardIterator>(std::move(input), params.num_shards, params.index);
}

}  // namespace recordflow::pipeline::internal
