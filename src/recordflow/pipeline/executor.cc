// The batch executor: pulls records from the record stream on one producer thread, groups them
// into units (a batch, or a run of unbatched records), runs parse/map on the shared thread
// pool with several units in flight, and hands results to the consumer in order.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>
#include <utility>

#include "executor_internal.h"
#include "recordflow/core/thread_pool.h"
#include "stages/stage.h"

namespace recordflow::pipeline::internal {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

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

}  // namespace

size_t UnitBytes(const std::vector<Record>& records, const std::vector<Element>& outputs) {
  size_t n = 0;
  for (const Record& r : records) n += RecordBytes(r);
  for (const Element& e : outputs) n += ElementBytes(e);
  return n;
}

PipelineIterator::PipelineIterator(Plan plan, IteratorOptions options)
    : plan_(std::move(plan)),
      options_(options),
      start_(Clock::now()),
      memory_(options.memory_budget),
      iteration_(options.iteration) {
  ctx_.fetcher = MakeFetcher(plan_.stream_end);
  ctx_.memory = &memory_;
  const int pool_threads = ThreadPool::Default().num_threads();
  const int cores = EffectiveThreads(options, pool_threads);
  if (cores < pool_threads) {
    own_pool_ = std::make_unique<ThreadPool>(cores, "rf-cap");
    ctx_.pool = own_pool_.get();
  }
  parallelism_ = plan_.num_parallel == kAutotune ? cores : std::max(plan_.num_parallel, 1);
  autotune_buffer_ = plan_.prefetch == kAutotune;
  MutexLock lock(mu_);  // no other thread yet; the analysis wants the guarded members locked
  stream_stats_.resize(1);
  stream_stats_[0].name = plan_.stream_description;
  buffer_ = autotune_buffer_ ? 2 : static_cast<size_t>(std::max(plan_.prefetch, 0));
  // Content mode keeps payloads until delivery so a checkpoint can save them.
  keep_payloads_ = !ctx_.fetcher->can_fetch();
}

PipelineIterator::~PipelineIterator() { Stop(); }

Status PipelineIterator::Start(SeedTable seeds, StateReader* restore_from) {
  seeds_ = std::move(seeds);
  if (restore_from != nullptr) {
    RF_RETURN_IF_ERROR(RestoreState(*restore_from));
  } else {
    RF_ASSIGN_OR_RETURN(stream_,
                        MakeRecordIterator(plan_.stream_end, SeedEpoch(epoch_), &ctx_, &seeds_));
  }
  producer_ = std::thread([this] {
    SetCurrentThreadName("rf-producer");
    ProduceLoop();
  });
  return Status();
}

void PipelineIterator::Stop() {
  {
    MutexLock lock(mu_);
    cancelled_ = true;
    ctx_.cancelled = true;
  }
  cv_.NotifyAll();
  if (producer_.joinable()) producer_.join();
  MutexLock lock(mu_);
  while (running_ != 0) cv_.Wait(mu_);
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
    MutexLock lock(mu_);
    const auto wait_start = Clock::now();
    // Executor units are elastic buffers: a new one only while the budget has room, except
    // that with none queued there is always one (progress whatever the budget).
    while (!cancelled_ &&
           (paused_ || units_.size() >= Capacity() || (!units_.empty() && !memory_.Fits(1)))) {
      cv_.Wait(mu_);
    }
    stream_stats_[0].wait_output_seconds += Seconds(wait_start);
    if (cancelled_) return;
    producing_ = true;
    lock.Unlock();

    auto unit = std::make_shared<Unit>();
    bool end = false;
    const auto t0 = Clock::now();
    // A std::bad_alloc (a huge record, an exhausted machine) becomes the unit's error.
    Status s = CatchExceptions("reading records for the pipeline",
                               [&] { return PullUnit(unit.get(), &end); });
    const double busy = Seconds(t0);

    lock.Lock();
    producing_ = false;
    stream_stats_[0].busy_seconds += busy;
    stream_stats_[0].elements += unit->records.size();
    for (const Record& r : unit->records) stream_stats_[0].bytes += r.data.size();
    cv_.NotifyAll();
    if (!s.ok()) {
      unit->status = std::move(s);
      unit->done = true;
      unit->records.clear();
      units_.push_back(std::move(unit));
      stream_done_ = true;
      cv_.NotifyAll();
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
        cv_.NotifyAll();
        return;
      }
      ++epoch_;
      produced_in_epoch_ = false;
      producing_ = true;  // Checkpoint waits: the stream and seed table change
      lock.Unlock();
      Result<std::unique_ptr<RecordIterator>> next =
          MakeRecordIterator(plan_.stream_end, SeedEpoch(epoch_), &ctx_, &seeds_);
      lock.Lock();
      producing_ = false;
      cv_.NotifyAll();
      if (!next.ok()) {
        auto failed = std::make_shared<Unit>();
        failed->status = next.status();
        failed->done = true;
        units_.push_back(std::move(failed));
        stream_done_ = true;
        cv_.NotifyAll();
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
  ctx_.Pool().Schedule([this, unit] {
    const auto t0 = Clock::now();
    Status s = CatchExceptions("processing a pipeline batch", [&] { return Process(*unit); });
    const double busy = Seconds(t0);
    MutexLock g(mu_);
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
    cv_.NotifyAll();
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
      e.positions.back().epoch =
          e.positions.back().epoch * 0x9E3779B97F4A7C15ull + SeedEpoch(u.epoch);
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
  if (const auto* parse = op->get_if<stage::Parse>(); parse != nullptr) {
    ParseCall call;
    call.max_parallelism = parallelism_ > 1 ? 1 : 0;
    // Views need the records kept, and concatenating single-record columns copies anyway.
    call.views = parse->bytes_as_views && (e.batched || plan_.batch_size == 0);
    call.keep_payloads = keep_payloads_;
    call.files = &ctx_.fetcher->files();
    call.epoch = u.epoch;
    return ParseElement(*parse, e, call);
  }
  if (const auto* map = op->get_if<stage::Map>(); map != nullptr) {
    const bool whole_batch = map->options.splits_batches && e.batched && plan_.one_batch_at_a_time;
    return MapElement(*map, e, whole_batch ? parallelism_ : 1, &ctx_.cancelled);
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
  MutexLock lock(mu_);
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
        cv_.WaitUntil(mu_, *deadline);
      } else {
        cv_.Wait(mu_);
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
      cv_.NotifyAll();
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
  cv_.NotifyAll();
}

PipelineStats PipelineIterator::stats() const {
  MutexLock lock(mu_);
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
  pf.buffer_fill =
      ready_samples_ > 0 ? ready_sum_ / ready_samples_ / std::max<size_t>(Capacity(), 1) : 0;
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
                consumer_wait_seconds,
                100.0 * consumer_wait_seconds / std::max(wall_seconds, 1e-9));
  out += line;
  if (memory_budget > 0) {
    std::snprintf(line, sizeof(line), "memory: held %.1f MiB, peak %.1f MiB of a %.1f MiB budget (",
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
