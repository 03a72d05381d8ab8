// Shuffle: a buffer of records, each output a uniformly random one of them.
#include <algorithm>

#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

// A buffer of buffer_size records; each output is a uniformly random one of them.
class ShuffleIterator final : public RecordIterator {
 public:
  ShuffleIterator(std::unique_ptr<RecordIterator> input, size_t buffer_size, uint64_t seed,
                  StreamContext* ctx)
      : input_(std::move(input)), size_(std::max<size_t>(buffer_size, 1)), rng_(seed), ctx_(ctx) {}

  Result<bool> Next(Record* out) override {
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
  bool input_done_ = false;
  std::vector<Record> buffer_;
  size_t held_ = 0;  // bytes charged to the memory account
};

}  // namespace

std::unique_ptr<RecordIterator> MakeShuffleStream(std::unique_ptr<RecordIterator> input,
                                                  size_t buffer_size, uint64_t seed,
                                                  StreamContext* ctx) {
  return std::make_unique<ShuffleIterator>(std::move(input), buffer_size, seed, ctx);
}

}  // namespace recordflow::pipeline::internal
