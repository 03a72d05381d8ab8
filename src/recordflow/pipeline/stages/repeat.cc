// Repeat of the record stream: its input made again for every epoch.
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

class RepeatIterator final : public RecordIterator {
 public:
  RepeatIterator(const Node* node, uint64_t outer_epoch, StreamContext* ctx, SeedTable* seeds)
      : node_(node),
        count_(node->as<stage::Repeat>().count),
        outer_(outer_epoch),
        ctx_(ctx),
        seeds_(seeds) {}

  Result<bool> Next(Record* out) override {
    while (count_ < 0 || epoch_ < static_cast<uint64_t>(count_)) {
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
    return MakeRecordIterator(node_->input.get(), e, ctx_, seeds_);
  }
  const Node* node_;
  int64_t count_;
  uint64_t outer_;
  StreamContext* ctx_;
  SeedTable* seeds_;
  uint64_t epoch_ = 0;
  bool produced_in_epoch_ = false;
  std::unique_ptr<RecordIterator> input_;
};

}  // namespace

std::unique_ptr<RecordIterator> MakeRepeatStream(const Node* node, uint64_t outer_epoch,
                                                 StreamContext* ctx, SeedTable* seeds) {
  return std::make_unique<RepeatIterator>(node, outer_epoch, ctx, seeds);
}

}  // namespace recordflow::pipeline::internal
