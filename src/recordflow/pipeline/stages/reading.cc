// Reading files for the record stream: readers charged to the memory account, file sources.
#include "stage.h"

namespace recordflow::pipeline::internal {

format::RecordReaderOptions ReaderOptions(const FilesOptions& o) {
  format::RecordReaderOptions r;
  r.compression = o.compression;
  r.on_corruption = o.on_corruption;
  r.verify_checksums = o.verify_checksums;
  return r;
}

Result<FileSource> FileSourceOf(const Node* node) {
  FileSource src;
  if (const auto* shard = node->get_if<stage::Shard>();
      shard != nullptr && node->input && node->input->kind() == Node::Kind::kFiles) {
    src.node = node->input.get();
    src.files = &src.node->as<stage::Files>();
    src.num_shards = shard->num_shards;
    src.shard_index = shard->index;
  } else if (const auto* files = node->get_if<stage::Files>(); files != nullptr) {
    src.node = node;
    src.files = files;
  } else {
    return InvalidArgumentError(
        "expects files as its input (Dataset::FromFiles, optionally shard)");
  }
  return src;
}

std::vector<uint32_t> ShardFiles(const FileSource& src) {
  std::vector<uint32_t> files;
  for (size_t i = static_cast<size_t>(src.shard_index); i < src.files->files.size();
       i += static_cast<size_t>(src.num_shards)) {
    files.push_back(static_cast<uint32_t>(i));
  }
  return files;
}

std::vector<uint32_t> FileOrder(const FileSource& src, uint64_t epoch, SeedTable* seeds) {
  std::vector<uint32_t> order = ShardFiles(src);
  if (src.files->options.shuffle_files) {
    Rng rng(MixSeed(seeds->For(src.node, src.files->options.seed), epoch));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Below(i)]);
  }
  return order;
}

Status ReaderCharge::Reserve(const std::string& path, size_t bytes, uint64_t record_offset,
                             uint64_t record_index) {
  MemoryAccount* m = ctx_ != nullptr ? ctx_->memory : nullptr;
  if (m == nullptr) return Status();
  const size_t fixed = m->held(MemoryAccount::kShuffle) + m->held(MemoryAccount::kCache) +
                       m->held(MemoryAccount::kReaders);
  if (fixed + bytes > m->budget()) {
    return ResourceExhaustedError("record readers: the record in '" + path + "' at byte offset " +
                                  std::to_string(record_offset) + " (record index " +
                                  std::to_string(record_index) +
                                  ") needs its read buffer to grow by " + std::to_string(bytes) +
                                  " bytes, with " + std::to_string(fixed) +
                                  " bytes already held by readers, shuffle buffers and caches: "
                                  "over the iterator's memory_budget of " +
                                  std::to_string(m->budget()) + " bytes; raise memory_budget");
  }
  m->Charge(MemoryAccount::kReaders, bytes);
  charged_ += bytes;
  return Status();
}

Result<CountedReader> OpenCounted(const StreamContext* ctx, const std::string& path,
                                  format::RecordReaderOptions options) {
  auto charge = std::make_unique<ReaderCharge>(ctx);
  options.buffer_budget = charge.get();
  RF_ASSIGN_OR_RETURN(auto reader, format::RecordReader::Open(path, options));
  return CountedReader(std::move(charge), std::move(reader));
}

Result<CountedReader> OpenAt(const StreamContext* ctx, const FileSource& src, uint32_t file,
                             uint64_t offset, uint64_t index) {
  RF_ASSIGN_OR_RETURN(CountedReader reader,
                      OpenCounted(ctx, src.files->files[file], ReaderOptions(src.files->options)));
  if (offset > 0 || index > 0) RF_RETURN_IF_ERROR(reader->SkipTo(offset, index));
  return reader;
}

}  // namespace recordflow::pipeline::internal
