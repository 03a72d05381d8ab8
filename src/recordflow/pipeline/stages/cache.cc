// Cache: the records of the first epoch kept (in memory, or in a TFRecord file) and replayed on
// later epochs.
#include <algorithm>
#include <filesystem>

#include "recordflow/format/record_writer.h"
#include "recordflow/io/filesystem.h"
#include "stage.h"

namespace recordflow::pipeline::internal {

// The records a Cache stage kept in its first epoch.
struct CacheStore {
  ~CacheStore() {
    if (memory != nullptr) memory->Release(MemoryAccount::kCache, held);
  }
  std::vector<Record> records;  // memory cache
  MemoryAccount* memory = nullptr;
  size_t held = 0;                               // bytes of `records` charged to `memory`
  std::unique_ptr<format::RecordWriter> writer;  // file cache being written
  bool complete = false;
};

namespace {

class CacheIterator final : public RecordIterator {
 public:
  CacheIterator(const Node* node, std::shared_ptr<CacheStore> store,
                std::unique_ptr<RecordIterator> input, StreamContext* ctx, uint32_t cache_file_id)
      : path_(node->as<stage::Cache>().path),
        store_(std::move(store)),
        input_(std::move(input)),
        ctx_(ctx),
        cache_file_id_(cache_file_id) {
    replaying_ = store_->complete;
  }

  Result<bool> Next(Record* out) override {
    if (replaying_) return Replay(out);
    RF_ASSIGN_OR_RETURN(bool ok, input_->Next(out));
    if (!ok) {
      if (store_->writer) RF_RETURN_IF_ERROR(store_->writer->Close());
      store_->writer.reset();
      store_->complete = true;
      return false;
    }
    if (path_.empty()) {
      RF_RETURN_IF_ERROR(Keep(Record(*out)));
    } else {
      if (!store_->writer) {
        RF_ASSIGN_OR_RETURN(store_->writer, format::RecordWriter::Open(path_));
      }
      RF_RETURN_IF_ERROR(store_->writer->WriteRecord(
          std::as_bytes(std::span(out->data.data(), out->data.size()))));
    }
    return true;
  }

  Status Save(StateWriter& w) override {
    w.Bool(replaying_);
    if (!path_.empty()) {
      if (replaying_) {
        w.U64(next_);
        return Status();
      }
      return UnimplementedError("checkpoint while cache('" + path_ +
                                "') is being written in the first epoch; checkpoint after it "
                                "completes or use an in-memory cache");
    }
    // A memory cache saves what it holds (as references where possible), then its place.
    w.U64(store_->records.size());
    for (const Record& r : store_->records) ctx_->SaveRecord(w, r);
    if (replaying_) {
      w.U64(next_);
      return Status();
    }
    return input_->Save(w);
  }

  Status Restore(StateReader& r) override {
    RF_ASSIGN_OR_RETURN(replaying_, r.Bool("cache replay"));
    if (!path_.empty()) {
      if (!replaying_ || !store_->complete) {
        return DataLossError("checkpoint replays cache file '" + path_ + "', which is missing");
      }
      RF_ASSIGN_OR_RETURN(next_, r.U64("cache position"));
      return Status();
    }
    RF_ASSIGN_OR_RETURN(uint64_t n, r.U64("cache count"));
    store_->records.clear();
    store_->records.shrink_to_fit();
    ctx_->Release(MemoryAccount::kCache, store_->held);
    store_->held = 0;
    for (uint64_t i = 0; i < n; ++i) {
      RF_ASSIGN_OR_RETURN(Record rec, ctx_->RestoreRecord(r));
      RF_RETURN_IF_ERROR(Keep(std::move(rec)));
    }
    if (replaying_) {
      store_->complete = true;
      input_.reset();
      RF_ASSIGN_OR_RETURN(next_, r.U64("cache position"));
      return Status();
    }
    if (!input_) return DataLossError("checkpoint: cache state does not match");
    return input_->Restore(r);
  }

 private:
  // A memory cache is a fixed buffer of the memory account: past the budget it fails.
  // Charged like a shuffle buffer: payload capacity and the vector's slots.
  Status Keep(Record&& r) {
    const size_t slots_before = store_->records.capacity();
    size_t cost = r.data.capacity();
    store_->records.push_back(std::move(r));
    cost += (store_->records.capacity() - slots_before) * sizeof(Record);
    if (ctx_->memory == nullptr) return Status();
    store_->memory = ctx_->memory;
    store_->held += cost;
    ctx_->memory->Charge(MemoryAccount::kCache, cost);
    return ctx_->memory->CheckFixed(
        MemoryAccount::kCache,
        "in memory (" + std::to_string(store_->records.size()) + " records so far)");
  }

  Result<bool> Replay(Record* out) {
    if (path_.empty()) {
      if (next_ >= store_->records.size()) return false;
      *out = store_->records[next_++];
      return true;
    }
    if (!reader_) {
      format::RecordReaderOptions o;
      o.compression = format::Compression::kNone;
      RF_ASSIGN_OR_RETURN(reader_, OpenCounted(ctx_, path_, o));
      // Replays resume by record count (the cache file is ours and uncompressed).
      for (uint64_t i = 0; i < next_; ++i) {
        RF_ASSIGN_OR_RETURN(bool ok, reader_.Skip());
        if (!ok) return DataLossError("cache file '" + path_ + "' is shorter than the checkpoint");
      }
    }
    RF_ASSIGN_OR_RETURN(bool ok, reader_.ReadInto(cache_file_id_, out));
    if (ok) {
      ++next_;
    } else {
      reader_.reset();
    }
    return ok;
  }

  const std::string& path_;  // of the Node, which outlives the iterator
  std::shared_ptr<CacheStore> store_;
  std::unique_ptr<RecordIterator> input_;
  StreamContext* ctx_;
  uint32_t cache_file_id_;
  bool replaying_ = false;
  uint64_t next_ = 0;
  CountedReader reader_;
};

}  // namespace

Result<std::unique_ptr<RecordIterator>> MakeCacheStream(const Node* node, uint64_t epoch,
                                                        StreamContext* ctx, SeedTable* seeds) {
  const std::string& path = node->as<stage::Cache>().path;
  std::shared_ptr<CacheStore> store;
  {
    MutexLock lock(ctx->cache_mu);
    auto& slot = ctx->caches[node];
    if (!slot) {
      slot = std::make_shared<CacheStore>();
      // A complete cache file from an earlier run replaces the input.
      if (!path.empty()) slot->complete = io::StatPath(path).ok();  // local or URL
    }
    store = slot;
  }
  std::unique_ptr<RecordIterator> input;
  if (!store->complete) {
    RF_ASSIGN_OR_RETURN(input, MakeRecordIterator(node->input.get(), epoch, ctx, seeds));
  }
  uint32_t cache_file_id = 0;
  if (!path.empty()) {
    const auto& files = ctx->fetcher->files();
    cache_file_id =
        static_cast<uint32_t>(std::find(files.begin(), files.end(), path) - files.begin());
  }
  return std::unique_ptr<RecordIterator>(
      new CacheIterator(node, store, std::move(input), ctx, cache_file_id));
}

}  // namespace recordflow::pipeline::internal
