// The batch executor: pulls records from the record stream on one producer thread, groups them
// into units (a batch, or a run of unbatched records), runs parse/map on the shared thread
// pool with several units in flight, and hands results to the consumer in order.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>
#include <utility>

#include "executor_internal.h"
#include "recordflow/core/thread_pool.h"

namespace recordflow::pipeline::internal {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Version 2 carries the iteration (IteratorOptions::iteration) and ends with a CRC32C of the
// whole state (StateWriter::AppendChecksum).
constexpr char kMagic[] = "RFCKPT02";
constexpr char kMagicV1[] = "RFCKPT01";
constexpr size_t kUnbatchedRun = 32;  // records per unit when there is no batch

size_t ElementBytes(const Element& e) {
  size_t n = 0;
  for (const auto& r : e.records) n += r.size();
  for (const auto& t : e.tensors) n += t.size_bytes;
  for (const auto& c : e.columns) {
    n += c.int64s.size() * 8 + c.floats.size() * 4 + c.bytes_data.size() +
         c.bytes_offsets.size() * 8 + c.row_splits.size() * 8;
  }
  return n;
}

// Sets what MapThreads() and MapCancelled() answer on this thread for one map call.
class MapCallScope {
 public:
  MapCallScope(int threads, const std::atomic<bool>* cancelled)
      : threads_(std::exchange(map_threads_on_this_thread, threads)),
        cancelled_(std::exchange(map_cancelled_on_this_thread, cancelled)) {}
  ~MapCallScope() {
    map_threads_on_this_thread = threads_;
    map_cancelled_on_this_thread = cancelled_;
  }
  MapCallScope(const MapCallScope&) = delete;
  MapCallScope& operator=(const MapCallScope&) = delete;

 private:
  int threads_;
  const std::atomic<bool>* cancelled_;
};

}  // namespace

struct PipelineIterator::Unit {
  uint64_t epoch = 0;
  std::vector<Record> records;  // inputs; payloads dropped after processing when refs suffice
  std::vector<Element> outputs;
  size_t delivered = 0;  // outputs handed to the consumer
  Status status;
  bool done = false;
  size_t bytes = 0;
  size_t charged = 0;  // bytes charged to the memory account (records, then outputs)
  bool scheduled = false;  // handed to the pool (or done without it)
};

namespace {
// What a unit holds now: its input records (payloads may have moved into outputs) and outputs.
size_t UnitBytes(const std::vector<Record>& records, const std::vector<Element>& outputs) {
  size_t n = 0;
  for (const Record& r : records) n += RecordBytes(r);
  for (const Element& e : outputs) n += ElementBytes(e);
  return n;
}
}  // namespace

PipelineIterator::PipelineIterator(Plan plan, IteratorOptions options)
    : plan_(std::move(plan)), options_(options), start_(Clock::now()),
      memory_(options.memory_budget), iteration_(options.iteration) {
  ctx_.fetcher = MakeFetcher(plan_.stream_end);
  ctx_.memory = &memory_;
  stream_stats_.resize(1);
  stream_stats_[0].name = plan_.stream_description;
  const int cores = ThreadPool::Default().num_threads();
  parallelism_ = plan_.num_parallel == kAutotune ? cores : std::max(plan_.num_parallel, 1);
  autotune_buffer_ = plan_.prefetch == kAutotune;
  buffer_ = autotune_buffer_ ? 2 : std::max(plan_.prefetch, 0);
  // Content mode keeps payloads until delivery so a checkpoint can save them.
  keep_payloads_ = !ctx_.fetcher->can_fetch();
}

PipelineIterator::~PipelineIterator() { Stop(); }

Status PipelineIterator::Start(SeedTable seeds, StateReader* restore_from) {
  seeds_ = std::move(seeds);
  if (restore_from != nullptr) {
    RF_RETURN_IF_ERROR(RestoreState(*restore_from));
  } else {
    RF_ASSIGN_OR_RETURN(stream_, MakeRecordIterator(plan_.stream_end, SeedEpoch(epoch_), &ctx_, &seeds_, 0));
  }
  producer_ = std::thread([this] { ProduceLoop(); });
  return Status();
}

void PipelineIterator::Stop() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    ctx_.cancelled = true;
  }
  cv_.notify_all();
  if (producer_.joinable()) producer_.join();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return running_ == 0; });
  stream_.reset();
}

uint64_t PipelineIterator::SeedEpoch(uint64_t epoch) const {
  // Iteration 0 keeps the plain epoch, so a first iteration's orders are what they always were.
  return iteration_ == 0 ? epoch : MixSeed(MixSeed(0x6974657261746521ull, iteration_), epoch);
}

size_t PipelineIterator::Capacity() const { return static_cast<size_t>(parallelism_) + buffer_; }

// Pulls one unit's records (or the next saved unit of a restored checkpoint).
Status PipelineIterator::PullUnit(Unit* u, bool* end_of_stream) {
  *end_of_stream = false;
  if (!replay_.empty()) {
    *u = std::move(replay_.front());
    replay_.pop_front();
    // Charged again as a unit by the caller.
    memory_.Release(MemoryAccount::kExecutor, UnitBytes(u->records, u->outputs));
    return Status();
  }
  if (!pending_error_.ok()) return pending_error_;
  const size_t want = plan_.batch_size > 0 ? plan_.batch_size : kUnbatchedRun;
  u->epoch = epoch_;
  while (u->records.size() < want) {
    Record r;
    Result<bool> got = stream_->Next(&r);
    if (!got.ok()) {
      // Unbatched records read before the error still reach the consumer, then the error.
      if (plan_.batch_size == 0 && !u->records.empty()) {
        pending_error_ = got.status();
        return Status();
      }
      return got.status();
    }
    if (!*got) {
      *end_of_stream = true;
      break;
    }
    produced_in_epoch_ = true;
    u->records.push_back(std::move(r));
  }
  if (*end_of_stream && plan_.batch_size > 0 && plan_.drop_remainder &&
      u->records.size() < plan_.batch_size) {
    u->records.clear();
  }
  return Status();
}

void PipelineIterator::ProduceLoop() {
  while (true) {
    std::unique_lock lock(mu_);
    const auto wait_start = Clock::now();
    // Executor units are elastic buffers: a new one only while the budget has room, except
    // that with none queued there is always one (progress whatever the budget).
    cv_.wait(lock, [&] {
      return cancelled_ ||
             (!paused_ && units_.size() < Capacity() && (units_.empty() || memory_.Fits(1)));
    });
    stream_stats_[0].wait_output_seconds += Seconds(wait_start);
    if (cancelled_) return;
    producing_ = true;
    lock.unlock();

    auto unit = std::make_shared<Unit>();
    bool end = false;
    const auto t0 = Clock::now();
    // A std::bad_alloc (a huge record, an exhausted machine) becomes the unit's error.
    Status s = CatchExceptions("reading records for the pipeline",
                               [&] { return PullUnit(unit.get(), &end); });
    const double busy = Seconds(t0);

    lock.lock();
    producing_ = false;
    stream_stats_[0].busy_seconds += busy;
    stream_stats_[0].elements += unit->records.size();
    for (const Record& r : unit->records) stream_stats_[0].bytes += r.data.size();
    cv_.notify_all();
    if (!s.ok()) {
      unit->status = std::move(s);
      unit->done = true;
      unit->records.clear();
      units_.push_back(std::move(unit));
      stream_done_ = true;
      cv_.notify_all();
      return;
    }
    if (!unit->records.empty()) {
      unit->charged = UnitBytes(unit->records, unit->outputs);
      memory_.Charge(MemoryAccount::kExecutor, unit->charged);
      units_.push_back(unit);
      ScheduleQueued();
    }
    if (end) {
      // A repeat after batch: a new epoch of the stream, batches restart.
      ++tail_epochs_done_;
      const bool again = plan_.tail_repeat != 0 && produced_in_epoch_ &&
                         (plan_.tail_repeat < 0 || tail_epochs_done_ < plan_.tail_repeat);
      if (!again) {
        stream_done_ = true;
        cv_.notify_all();
        return;
      }
      ++epoch_;
      produced_in_epoch_ = false;
      producing_ = true;  // Checkpoint waits: the stream and seed table change
      lock.unlock();
      Result<std::unique_ptr<RecordIterator>> next =
          MakeRecordIterator(plan_.stream_end, SeedEpoch(epoch_), &ctx_, &seeds_, 0);
      lock.lock();
      producing_ = false;
      cv_.notify_all();
      if (!next.ok()) {
        auto failed = std::make_shared<Unit>();
        failed->status = next.status();
        failed->done = true;
        units_.push_back(std::move(failed));
        stream_done_ = true;
        cv_.notify_all();
        return;
      }
      stream_ = std::move(next).value();
    }
  }
}

void PipelineIterator::ScheduleQueued() {
  if (cancelled_) return;
  for (const auto& u : units_) {
    if (plan_.one_batch_at_a_time && running_ > 0) return;
    if (!u->scheduled && !u->done) Schedule(u);
  }
}

void PipelineIterator::Schedule(const std::shared_ptr<Unit>& unit) {
  unit->scheduled = true;
  ++running_;
  ThreadPool::Default().Schedule([this, unit] {
    const auto t0 = Clock::now();
    Status s = CatchExceptions("processing a pipeline batch", [&] { return Process(*unit); });
    const double busy = Seconds(t0);
    std::lock_guard g(mu_);
    unit->status = std::move(s);
    unit->done = true;
    for (const Element& e : unit->outputs) unit->bytes += ElementBytes(e);
    // Outputs replace (parse) or join (payloads kept for checkpoints) the input records.
    const size_t now = UnitBytes(unit->records, unit->outputs);
    if (now > unit->charged) {
      memory_.Charge(MemoryAccount::kExecutor, now - unit->charged);
    } else {
      memory_.Release(MemoryAccount::kExecutor, unit->charged - now);
    }
    unit->charged = now;
    // Thread-seconds: a unit mapped one at a time has every thread on it (the last image's
    // tail, when the others have nothing left, is counted as busy).
    process_busy_ += plan_.one_batch_at_a_time ? busy * parallelism_ : busy;
    processed_elements_ += unit->outputs.size();
    --running_;
    ScheduleQueued();
    cv_.notify_all();
  });
}

// Runs the per-record ops, batching and per-batch ops of one unit. Pool thread, no lock held.
Status PipelineIterator::Process(Unit& u) {
  std::vector<Element> singles;
  auto make_element = [&](size_t begin, size_t end, bool batched) {
    Element e;
    e.batched = batched;
    e.positions.reserve(end - begin);
    e.records.reserve(end - begin);
    for (size_t i = begin; i < end; ++i) {
      e.records.push_back(keep_payloads_ ? u.records[i].data : std::move(u.records[i].data));
      e.positions.push_back(u.records[i].position);
      // The stream's repeat passes, then the executor's (a repeat after batch).
      e.positions.back().epoch = e.positions.back().epoch * 0x9E3779B97F4A7C15ull + SeedEpoch(u.epoch);
    }
    return e;
  };
  if (plan_.batch_size == 0) {
    for (size_t i = 0; i < u.records.size(); ++i) {
      Element e = make_element(i, i + 1, false);
      for (const Node* op : plan_.pre_batch) RF_RETURN_IF_ERROR(Apply(op, e, u));
      u.outputs.push_back(std::move(e));
    }
    return Status();
  }
  Element batch;
  if (plan_.pre_batch.empty()) {
    batch = make_element(0, u.records.size(), true);
  } else {
    batch.batched = true;
    std::vector<std::vector<Tensor>> tensor_parts;
    for (size_t i = 0; i < u.records.size(); ++i) {
      Element e = make_element(i, i + 1, false);
      for (const Node* op : plan_.pre_batch) RF_RETURN_IF_ERROR(Apply(op, e, u));
      batch.positions.push_back(e.positions[0]);
      if (e.parsed) {
        batch.parsed = true;
        RF_RETURN_IF_ERROR(ConcatColumns(batch.columns, std::move(e.columns)));
        if (!e.tensors.empty()) tensor_parts.push_back(std::move(e.tensors));
      } else {
        for (auto& r : e.records) batch.records.push_back(std::move(r));
      }
    }
    RF_RETURN_IF_ERROR(StackTensors(std::move(tensor_parts), &batch.tensors));
  }
  for (const Node* op : plan_.post_batch) RF_RETURN_IF_ERROR(Apply(op, batch, u));
  u.outputs.push_back(std::move(batch));
  return Status();
}

Status PipelineIterator::Apply(const Node* op, Element& e, const Unit& u) {
  if (op->kind == Node::Kind::kParse) {
    if (e.parsed) return InvalidArgumentError("parse: element is already parsed");
    std::vector<std::span<const std::byte>> spans;
    spans.reserve(e.records.size());
    for (const auto& r : e.records) spans.push_back(std::as_bytes(std::span(r.data(), r.size())));
    example::ParseOptions po;
    po.max_parallelism = parallelism_ > 1 ? 1 : 0;
    po.first_record_index = 0;  // positions in the batch; mapped to files below
    // Views need the records kept, and concatenating single-record columns copies anyway.
    po.bytes_as_views = op->bytes_as_views && (e.batched || plan_.batch_size == 0);
    Status s = op->parser->Parse(spans, &e.columns, po);
    if (!s.ok()) {
      // The parser names the record by its place in the batch; add where that record came from.
      std::string where;
      const std::string& m = s.message();
      const size_t at = m.find("record ");
      if (at != std::string::npos) {
        const size_t k = std::strtoull(m.c_str() + at + 7, nullptr, 10);
        if (k < e.positions.size()) {
          const RecordPosition& p = e.positions[k];
          const auto& files = ctx_.fetcher->files();
          where = " [record " + std::to_string(k) + " of the batch is " +
                  (p.file < files.size() && !files.empty() ? "'" + files[p.file] + "' record "
                                                           : "in-memory record ") +
                  std::to_string(p.index) + " at byte offset " + std::to_string(p.offset) +
                  ", epoch " + std::to_string(u.epoch) + "]";
        }
      }
      return Status(s.code(), "parse: " + s.message() + where);
    }
    e.parsed = true;
    if (!keep_payloads_ && !po.bytes_as_views) e.records.clear();
    return Status();
  }
  if (op->kind == Node::Kind::kMap) {
    const MapCallScope call(
        op->splits_batches && e.batched && plan_.one_batch_at_a_time ? parallelism_ : 1,
        &ctx_.cancelled);
    Status s = op->map_fn(e);
    if (!s.ok()) return Status(s.code(), "map '" + op->map_name + "': " + s.message());
    return Status();
  }
  return InternalError("not an element op: " + op->Describe());
}

Result<bool> PipelineIterator::GetNext(Element* out) {
  bool timed_out = false;
  return NextElement(out, std::nullopt, &timed_out);
}

Result<bool> PipelineIterator::GetNextFor(Element* out, std::chrono::nanoseconds timeout,
                                          bool* timed_out) {
  return NextElement(out, Clock::now() + timeout, timed_out);
}

Result<bool> PipelineIterator::NextElement(Element* out, std::optional<Clock::time_point> deadline,
                                           bool* timed_out) {
  *timed_out = false;
  std::unique_lock lock(mu_);
  if (failed_) return FailedPreconditionError("iterator stopped after an error");
  while (true) {
    if (plan_.take >= 0 && delivered_ >= static_cast<uint64_t>(plan_.take)) return false;
    const auto wait_start = Clock::now();
    bool waited = false;
    std::shared_ptr<Unit> unit;
    while (true) {
      if (!units_.empty()) {
        if (units_.front()->done) {
          unit = units_.front();
          break;
        }
        if (!plan_.deterministic) {
          for (auto& u : units_) {
            if (u->done && !u->outputs.empty() && u->status.ok()) {
              unit = u;
              break;
            }
          }
          if (unit) break;
        }
      } else if (stream_done_) {
        if (!ended_) {
          ended_ = true;
          end_ = Clock::now();
        }
        return false;
      }
      if (deadline && Clock::now() >= *deadline) {
        consumer_wait_ += Seconds(wait_start);
        waited_in_earlier_slice_ = true;
        *timed_out = true;
        return false;
      }
      waited = true;
      if (deadline) {
        cv_.wait_until(lock, *deadline);
      } else {
        cv_.wait(lock);
      }
    }
    const double w = Seconds(wait_start);
    consumer_wait_ += w;
    if (std::exchange(waited_in_earlier_slice_, false)) waited = true;
    if (waited && autotune_buffer_) Autotune();
    if (!unit->status.ok()) {
      failed_ = true;
      Status s = unit->status;
      for (auto& u : units_) {
        if (u->done) memory_.Release(MemoryAccount::kExecutor, std::exchange(u->charged, 0));
      }
      units_.clear();
      return s;
    }
    Element e = std::move(unit->outputs[unit->delivered++]);
    if (unit->delivered == unit->outputs.size()) {
      memory_.Release(MemoryAccount::kExecutor, std::exchange(unit->charged, 0));
      units_.erase(std::find(units_.begin(), units_.end(), unit));
      cv_.notify_all();
    }
    if (skipped_ < plan_.skip) {
      ++skipped_;
      continue;
    }
    ++delivered_;
    delivered_bytes_ += ElementBytes(e);
    ready_sum_ += static_cast<double>(CountReady());
    ++ready_samples_;
    *out = std::move(e);
    return true;
  }
}

size_t PipelineIterator::CountReady() const {
  size_t n = 0;
  for (const auto& u : units_) n += u->done ? 1 : 0;
  return n;
}

// The consumer had to wait: more units in flight, while the bytes they hold fit the budget.
void PipelineIterator::Autotune() {
  const size_t max_units = static_cast<size_t>(parallelism_) * 4 + 16;
  if (Capacity() >= max_units) return;
  const size_t avg = delivered_ > 0 ? delivered_bytes_ / delivered_ : 0;
  // What the record stream's buffers (shuffle, read-ahead, cache) leave of the budget.
  const size_t stream = memory_.held() - memory_.held(MemoryAccount::kExecutor);
  const size_t left = memory_.budget() > stream ? memory_.budget() - stream : 0;
  if (avg > 0 && (Capacity() + 1) * avg > left) return;
  ++buffer_;
  cv_.notify_all();
}

Result<std::string> PipelineIterator::Checkpoint() {
  std::unique_lock lock(mu_);
  if (failed_) return FailedPreconditionError("cannot checkpoint an iterator that failed");
  paused_ = true;
  cv_.wait(lock, [&] { return !producing_; });
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
    if (!u.status.ok()) return FailedPreconditionError("checkpoint with an error pending: " + u.status.ToString());
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
    lock.unlock();
    s = stream_->Save(w);
    lock.lock();
  }
  paused_ = false;
  cv_.notify_all();
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
    return InvalidArgumentError("checkpoint was taken from a different pipeline (fingerprint mismatch)");
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
  RF_ASSIGN_OR_RETURN(delivered_, r.U64("delivered"));
  RF_ASSIGN_OR_RETURN(uint64_t skipped, r.U64("skipped"));
  skipped_ = static_cast<int64_t>(skipped);
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
  RF_ASSIGN_OR_RETURN(stream_, MakeRecordIterator(plan_.stream_end, SeedEpoch(epoch_), &ctx_, &seeds_, 0));
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

PipelineStats PipelineIterator::stats() const {
  std::lock_guard lock(mu_);
  PipelineStats p;
  p.stages = stream_stats_;
  StageStats ex;
  ex.name = plan_.executor_description;
  ex.elements = processed_elements_;
  ex.busy_seconds = process_busy_;
  ex.parallelism = parallelism_;
  p.stages.push_back(ex);
  StageStats pf;
  pf.name = "prefetch";
  pf.elements = delivered_;
  pf.bytes = delivered_bytes_;
  pf.buffer_size = static_cast<int>(Capacity());
  pf.buffer_fill = ready_samples_ > 0 ? ready_sum_ / ready_samples_ / std::max<size_t>(Capacity(), 1) : 0;
  p.stages.push_back(pf);
  p.elements_delivered = delivered_;
  p.memory_budget = memory_.budget();
  p.memory_held = memory_.held();
  p.memory_peak = memory_.peak();
  for (int i = 0; i < MemoryAccount::kNumStages; ++i) {
    p.memory.push_back({MemoryAccount::StageName(i), memory_.held(i), memory_.peak(i)});
  }
  p.consumer_wait_seconds = consumer_wait_;
  p.wall_seconds = ended_ ? std::chrono::duration<double>(end_ - start_).count() : Seconds(start_);
  return p;
}

}  // namespace recordflow::pipeline::internal

namespace recordflow::pipeline {

int MapThreads() { return internal::map_threads_on_this_thread; }

const std::atomic<bool>& MapCancelled() { return *internal::map_cancelled_on_this_thread; }

std::string PipelineStats::Report() const {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "%12s %10s %10s %10s %8s  %s\n", "elements", "elem/s", "MB/s",
                "busy s", "threads", "stage");
  out += line;
  for (const StageStats& s : stages) {
    const double t = std::max(wall_seconds, 1e-9);
    std::snprintf(line, sizeof(line), "%12llu %10.0f %10.1f %10.3f %8d  ",
                  static_cast<unsigned long long>(s.elements), s.elements / t, s.bytes / t / 1e6,
                  s.busy_seconds, s.parallelism);
    out += line + s.name + "\n";  // the whole stage description, never cut
  }
  std::snprintf(line, sizeof(line),
                "delivered %llu elements in %.3f s; consumer waited %.3f s (%.0f%% of the time)\n",
                static_cast<unsigned long long>(elements_delivered), wall_seconds,
                consumer_wait_seconds, 100.0 * consumer_wait_seconds / std::max(wall_seconds, 1e-9));
  out += line;
  if (memory_budget > 0) {
    std::snprintf(line, sizeof(line),
                  "memory: held %.1f MiB, peak %.1f MiB of a %.1f MiB budget (",
                  memory_held / 1048576.0, memory_peak / 1048576.0, memory_budget / 1048576.0);
    out += line;
    for (size_t i = 0; i < memory.size(); ++i) {
      std::snprintf(line, sizeof(line), "%s%s %.1f/%.1f", i > 0 ? ", " : "",
                    memory[i].stage.c_str(), memory[i].held / 1048576.0,
                    memory[i].peak / 1048576.0);
      out += line;
    }
    out += " MiB held/peak)\n";
  }
  return out;
}

}  // namespace recordflow::pipeline
