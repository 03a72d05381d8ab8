// Shard of records (a shard directly on files keeps files instead: see MakeRecordIterator).
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

// Keeps records num_shards * k + index.
class ShardIterator final : public CountingRecordIterator {
 public:
  ShardIterator(std::unique_ptr<RecordIterator> input, int n, int index)
      : CountingRecordIterator(std::move(input), "shard count"), n_(n), index_(index) {}
  Result<bool> Next(Record* out) override {
    while (true) {
      RF_ASSIGN_OR_RETURN(bool ok, input_->Next(out));
      if (!ok) return false;
      const uint64_t i = seen_++;
      if (i % static_cast<uint64_t>(n_) == static_cast<uint64_t>(index_)) return true;
    }
  }

 private:
  int n_, index_;
};

}  // namespace

std::unique_ptr<RecordIterator> MakeShardStream(std::unique_ptr<RecordIterator> input,
                                                const stage::Shard& params) {
  return std::make_unique<ShardIterator>(std::move(input), params.num_shards, params.index);
}

}  // namespace recordflow::pipeline::internal
