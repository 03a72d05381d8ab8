// Pipeline checkpoints (format RFCKPT02): the magic, the chain's fingerprint, the seeds of
// unseeded stages, the executor's counters, the records of every undelivered unit, then the
// record stream's own state (each stage's Save), and a CRC32C of it all. Written and read
// with the checkpoint codec (checkpoint_codec.h).
#include "executor_internal.h"

namespace recordflow::pipeline::internal {
namespace {

// Version 2 carries the iteration (IteratorOptions::iteration) and ends with a CRC32C of the
// whole state (StateWriter::AppendChecksum).
constexpr char kMagic[] = "RFCKPT02";
constexpr char kMagicV1[] = "RFCKPT01";

}  // namespace

Result<std::string> PipelineIterator::Checkpoint() {
  MutexLock lock(mu_);
  if (failed_) return FailedPreconditionError("cannot checkpoint an iterator that failed");
  paused_ = true;
  while (producing_) cv_.Wait(mu_);
  StateWriter w;
  w.Str(std::string_view(kMagic, 8));
  w.U64(plan_.fingerprint);
  w.U64(seeds_.seeds.size());
  for (const auto& [node, seed] : seeds_.seeds) {
    w.U64(plan_.NodeOrdinal(node));
    w.U64(seed);
  }
  w.U64(epoch_);
  w.U64(iteration_);
  w.U64(tail_epochs_done_);
  w.Bool(produced_in_epoch_);
  w.U64(delivered_);
  w.U64(skipped_);
  w.Bool(stream_done_);
  // Undelivered units, as their records, from the first output not yet consumed.
  std::vector<std::shared_ptr<Unit>> pending(units_.begin(), units_.end());
  size_t count = pending.size() + replay_.size();
  w.U64(count);
  auto save_unit = [&](const Unit& u, size_t from_output) -> Status {
    if (!u.status.ok())
      return FailedPreconditionError("checkpoint with an error pending: " + u.status.ToString());
    w.U64(u.epoch);
    const size_t first = plan_.batch_size == 0 ? from_output : 0;
    w.U64(u.records.size() - first);
    for (size_t i = first; i < u.records.size(); ++i) ctx_.SaveRecord(w, u.records[i]);
    return Status();
  };
  Status s;
  for (const auto& u : pending) {
    if (!s.ok()) break;
    // Workers may still be filling outputs; the records (inputs) are what we save, and a
    // unit's delivered count only moves under mu_.
    s = save_unit(*u, u->delivered);
  }
  for (const Unit& u : replay_) {
    if (!s.ok()) break;
    s = save_unit(u, 0);
  }
  if (s.ok() && !stream_done_) {
    // Without mu_: saving an interleave waits for its read-ahead tasks, which run on the pool
    // behind workers that finish units under mu_; holding it here deadlocked once every pool
    // thread waited for it (found by SoakTest). paused_ keeps the producer off stream_, and
    // only this (consumer) thread calls GetNext/Checkpoint.
    lock.Unlock();
    s = stream_->Save(w);
    lock.Lock();
  }
  paused_ = false;
  cv_.NotifyAll();
  if (!s.ok()) return s;
  w.AppendChecksum();
  return std::move(w.bytes());
}

Status PipelineIterator::RestoreState(StateReader& r) {
  RF_ASSIGN_OR_RETURN(std::string magic, r.Str("magic"));
  if (magic == std::string_view(kMagicV1, 8)) {
    return InvalidArgumentError(
        "checkpoint of format version 1, which has no integrity check and is no longer read; "
        "take a new checkpoint");
  }
  if (magic != std::string_view(kMagic, 8)) {
    return InvalidArgumentError("not a recordflow pipeline checkpoint (bad magic)");
  }
  RF_RETURN_IF_ERROR(r.VerifyChecksum());
  RF_ASSIGN_OR_RETURN(uint64_t fp, r.U64("fingerprint"));
  if (fp != plan_.fingerprint) {
    return InvalidArgumentError(
        "checkpoint was taken from a different pipeline (fingerprint mismatch)");
  }
  RF_ASSIGN_OR_RETURN(uint64_t nseeds, r.U64("seed count"));
  seeds_.seeds.clear();
  for (uint64_t i = 0; i < nseeds; ++i) {
    RF_ASSIGN_OR_RETURN(uint64_t ord, r.U64("seed stage"));
    RF_ASSIGN_OR_RETURN(uint64_t seed, r.U64("seed"));
    const Node* node = plan_.NodeAt(ord);
    if (node == nullptr) return DataLossError("checkpoint: seed for unknown stage");
    seeds_.seeds[node] = seed;
  }
  RF_ASSIGN_OR_RETURN(epoch_, r.U64("epoch"));
  RF_ASSIGN_OR_RETURN(iteration_, r.U64("iteration"));
  RF_ASSIGN_OR_RETURN(uint64_t tail_epochs, r.U64("tail epochs"));
  tail_epochs_done_ = static_cast<int64_t>(tail_epochs);
  RF_ASSIGN_OR_RETURN(produced_in_epoch_, r.Bool("epoch progress"));
  RF_ASSIGN_OR_RETURN(uint64_t delivered, r.U64("delivered"));
  RF_ASSIGN_OR_RETURN(uint64_t skipped, r.U64("skipped"));
  {
    MutexLock lock(mu_);  // no other thread yet (the producer starts after this)
    delivered_ = delivered;
    skipped_ = static_cast<int64_t>(skipped);
  }
  RF_ASSIGN_OR_RETURN(bool done, r.Bool("stream done"));
  RF_ASSIGN_OR_RETURN(uint64_t units, r.U64("pending units"));
  for (uint64_t i = 0; i < units; ++i) {
    Unit u;
    RF_ASSIGN_OR_RETURN(u.epoch, r.U64("unit epoch"));
    RF_ASSIGN_OR_RETURN(uint64_t n, r.U64("unit size"));
    for (uint64_t j = 0; j < n; ++j) {
      RF_ASSIGN_OR_RETURN(Record rec, ctx_.RestoreRecord(r));
      u.records.push_back(std::move(rec));
    }
    // Saved units wait in memory until the producer takes them: counted from now.
    memory_.Charge(MemoryAccount::kExecutor, UnitBytes(u.records, u.outputs));
    replay_.push_back(std::move(u));
  }
  // The stream of the saved epoch, at its saved place.
  RF_ASSIGN_OR_RETURN(stream_,
                      MakeRecordIterator(plan_.stream_end, SeedEpoch(epoch_), &ctx_, &seeds_));
  if (done) {
    replay_done_ = true;
  } else {
    RF_RETURN_IF_ERROR(stream_->Restore(r));
  }
  if (!r.done()) return DataLossError("checkpoint has trailing bytes");
  if (replay_done_) {
    // Only the saved units remain: an empty stream after them.
    stream_ = std::make_unique<EmptyStream>();
  }
  return Status();
}

}  // namespace recordflow::pipeline::internal
