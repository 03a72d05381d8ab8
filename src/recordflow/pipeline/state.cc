// Checkpoint encoding, the RNG, record references and column concatenation.
#include <cstring>
#include <random>

#include "pipeline_internal.h"
#include "recordflow/format/record_format.h"
#include "recordflow/format/crc32c.h"
#include "recordflow/io/file.h"

namespace recordflow::pipeline::internal {
namespace {

uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

const char* MemoryAccount::StageName(int stage) {
  switch (stage) {
    case kShuffle: return "shuffle";
    case kInterleave: return "interleave read-ahead";
    case kCache: return "cache";
    case kExecutor: return "executor";
    case kReaders: return "record readers";
    default: return "?";
  }
}

namespace {
void RaiseTo(std::atomic<size_t>& peak, size_t value) {
  size_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}
}  // namespace

void MemoryAccount::Charge(int stage, size_t bytes) {
  if (bytes == 0) return;
  RaiseTo(peak_[stage], held_[stage].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  RaiseTo(total_peak_, total_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryAccount::Release(int stage, size_t bytes) {
  if (bytes == 0) return;
  held_[stage].fetch_sub(bytes, std::memory_order_relaxed);
  total_.fetch_sub(bytes, std::memory_order_relaxed);
}

Status MemoryAccount::CheckFixed(int stage, const std::string& what) const {
  // The record readers count here too: the open files need them whatever the budget says.
  const size_t fixed = held(kShuffle) + held(kCache) + held(kReaders);
  if (fixed <= budget_) return Status();
  std::string others;
  auto with = [&](int other, const char* what) {
    if (other == stage || held(other) == 0) return;
    others += (others.empty() ? " (with " : ", ") + std::string(what) + " holding " +
              std::to_string(held(other)) + " bytes";
  };
  with(kShuffle, "shuffle buffers");
  with(kCache, "memory caches");
  with(kReaders, "record readers");
  if (!others.empty()) others += ")";
  const char* fix = stage == kShuffle
                        ? "lower the shuffle's buffer_size, or raise the iterator's memory_budget"
                        : "cache to a file (Cache(path)), or raise the iterator's memory_budget";
  return ResourceExhaustedError(std::string(StageName(stage)) + " " + what + ": holds " +
                                std::to_string(held(stage)) + " bytes" + others +
                                ", over the iterator's memory_budget of " +
                                std::to_string(budget_) + " bytes; " + fix);
}

void Rng::Seed(uint64_t seed) {
  for (uint64_t& s : state) s = SplitMix(seed);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(state[1] * 5, 7) * 9;
  const uint64_t t = state[1] << 17;
  state[2] ^= state[0];
  state[3] ^= state[1];
  state[1] ^= state[2];
  state[0] ^= state[3];
  state[2] ^= t;
  state[3] = Rotl(state[3], 45);
  return result;
}

uint64_t Rng::Below(uint64_t n) {
  // Rejects the lowest (2^64 mod n) values so that every residue is equally likely.
  const uint64_t threshold = (0 - n) % n;
  while (true) {
    const uint64_t r = Next();
    if (r >= threshold) return r % n;
  }
}

uint64_t MixSeed(uint64_t seed, uint64_t salt) {
  uint64_t x = seed ^ (salt * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);
  return SplitMix(x);
}

uint64_t RandomSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

void StateWriter::U64(uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out_.append(b, 8);
}

void StateWriter::Str(std::string_view s) {
  U64(s.size());
  out_.append(s);
}

void StateWriter::RngState(const Rng& rng) {
  for (uint64_t s : rng.state) U64(s);
}

void StateWriter::AppendChecksum() {
  const uint32_t crc = format::MaskCrc(format::Crc32c(std::as_bytes(std::span(out_))));
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(crc >> (8 * i));
  out_.append(b, 4);
}

Status StateReader::VerifyChecksum() {
  if (in_.size() < 4 || in_.size() - 4 < pos_) {
    return DataLossError("checkpoint state is too short to hold its checksum (" +
                         std::to_string(in_.size()) + " bytes)");
  }
  const std::string_view body = in_.substr(0, in_.size() - 4);
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) {
    stored |= static_cast<uint32_t>(static_cast<uint8_t>(in_[body.size() + i])) << (8 * i);
  }
  const uint32_t actual = format::MaskCrc(format::Crc32c(std::as_bytes(std::span(body))));
  if (stored != actual) {
    return DataLossError("checkpoint state is damaged: CRC32C mismatch over its " +
                         std::to_string(body.size()) + " bytes (stored " + std::to_string(stored) +
                         ", computed " + std::to_string(actual) + ")");
  }
  in_ = body;
  return Status();
}

Result<uint64_t> StateReader::U64(const char* what) {
  if (in_.size() - pos_ < 8) {
    return DataLossError(std::string("checkpoint state ends while reading ") + what);
  }
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
  pos_ += 8;
  return v;
}

Result<int64_t> StateReader::I64(const char* what) {
  RF_ASSIGN_OR_RETURN(uint64_t v, U64(what));
  return static_cast<int64_t>(v);
}

Result<bool> StateReader::Bool(const char* what) {
  RF_ASSIGN_OR_RETURN(uint64_t v, U64(what));
  if (v > 1) return DataLossError(std::string("checkpoint state: bad flag for ") + what);
  return v == 1;
}

Result<std::string> StateReader::Str(const char* what) {
  RF_ASSIGN_OR_RETURN(uint64_t n, U64(what));
  if (in_.size() - pos_ < n) {
    return DataLossError(std::string("checkpoint state ends inside ") + what);
  }
  std::string s(in_.substr(pos_, n));
  pos_ += n;
  return s;
}

Status StateReader::RngState(Rng* rng, const char* what) {
  for (uint64_t& s : rng->state) {
    RF_ASSIGN_OR_RETURN(s, U64(what));
  }
  if ((rng->state[0] | rng->state[1] | rng->state[2] | rng->state[3]) == 0) {
    return DataLossError(std::string("checkpoint state: all-zero RNG state for ") + what);
  }
  return Status();
}

uint64_t SeedTable::For(const Node* node, const std::optional<uint64_t>& fixed) {
  if (fixed) return *fixed;
  auto it = seeds.find(node);
  if (it != seeds.end()) return it->second;
  const uint64_t s = RandomSeed();
  seeds[node] = s;
  return s;
}

RecordFetcher::RecordFetcher(std::vector<std::string> files, FilesOptions options,
                             std::shared_ptr<const std::vector<std::string>> memory)
    : files_(std::move(files)), options_(options), memory_(std::move(memory)) {
  can_fetch_ = true;
  if (!memory_) {
    for (const std::string& f : files_) {
      const format::Compression c = options_.compression.value_or(format::CompressionFromPath(f));
      if (c != format::Compression::kNone) can_fetch_ = false;
    }
  }
}

Result<std::string> RecordFetcher::Fetch(const RecordPosition& p) const {
  if (memory_) {
    if (p.index >= memory_->size()) {
      return DataLossError("checkpoint refers to in-memory record " + std::to_string(p.index) +
                           " of " + std::to_string(memory_->size()));
    }
    return (*memory_)[p.index];
  }
  if (p.file >= files_.size()) {
    return DataLossError("checkpoint refers to file " + std::to_string(p.file) + " of " +
                         std::to_string(files_.size()));
  }
  const std::string& path = files_[p.file];
  RF_ASSIGN_OR_RETURN(auto file, io::RandomAccessFile::Open(path));
  std::byte header[format::kHeaderSize];
  RF_ASSIGN_OR_RETURN(size_t got, file->ReadAt(p.offset, header));
  const std::string where = "'" + path + "' at byte offset " + std::to_string(p.offset) +
                            " (record index " + std::to_string(p.index) + ")";
  if (got != format::kHeaderSize) {
    return DataLossError("record from checkpoint missing: " + where + " is past the end");
  }
  uint64_t length = 0;
  std::memcpy(&length, header, 8);
  uint32_t stored = 0;
  std::memcpy(&stored, header + 8, 4);
  if (format::MaskCrc(format::Crc32c(std::span(header, 8))) != stored) {
    return DataLossError("record from checkpoint: bad length CRC at " + where +
                         " (was the file changed?)");
  }
  if (length > file->size()) {
    return DataLossError("record from checkpoint: length past the end at " + where);
  }
  std::string data(length, '\0');
  std::byte footer[format::kFooterSize];
  RF_ASSIGN_OR_RETURN(got, file->ReadAt(p.offset + format::kHeaderSize,
                                        std::as_writable_bytes(std::span(data.data(), data.size()))));
  if (got != length) return DataLossError("record from checkpoint truncated at " + where);
  RF_ASSIGN_OR_RETURN(got, file->ReadAt(p.offset + format::kHeaderSize + length, footer));
  uint32_t data_crc = 0;
  std::memcpy(&data_crc, footer, 4);
  if (got != format::kFooterSize ||
      (options_.verify_checksums &&
       format::MaskCrc(format::Crc32c(std::as_bytes(std::span(data.data(), data.size())))) != data_crc)) {
    return DataLossError("record from checkpoint: bad data CRC at " + where);
  }
  return data;
}

void StreamContext::SaveRecord(StateWriter& w, const Record& r) const {
  w.U64(r.position.file);
  w.U64(r.position.offset);
  w.U64(r.position.index);
  w.U64(r.position.epoch);
  const bool by_reference = fetcher && fetcher->can_fetch();
  w.Bool(by_reference);
  if (!by_reference) w.Str(r.data);
}

Result<Record> StreamContext::RestoreRecord(StateReader& r) const {
  Record out;
  RF_ASSIGN_OR_RETURN(uint64_t file, r.U64("record file"));
  out.position.file = static_cast<uint32_t>(file);
  RF_ASSIGN_OR_RETURN(out.position.offset, r.U64("record offset"));
  RF_ASSIGN_OR_RETURN(out.position.index, r.U64("record index"));
  RF_ASSIGN_OR_RETURN(out.position.epoch, r.U64("record epoch"));
  RF_ASSIGN_OR_RETURN(bool by_reference, r.Bool("record reference flag"));
  if (by_reference) {
    if (!fetcher || !fetcher->can_fetch()) {
      return DataLossError("checkpoint holds record references but the source cannot be re-read");
    }
    RF_ASSIGN_OR_RETURN(out.data, fetcher->Fetch(out.position));
  } else {
    RF_ASSIGN_OR_RETURN(out.data, r.Str("record bytes"));
  }
  return out;
}

Status StackTensors(std::vector<std::vector<Tensor>>&& parts, std::vector<Tensor>* out) {
  out->clear();
  if (parts.empty() || parts[0].empty()) return Status();
  const size_t n = parts[0].size();
  for (size_t i = 0; i < n; ++i) {
    Tensor joined = parts[0][i];
    size_t bytes = 0;
    int64_t rows = 0;
    for (const auto& p : parts) {
      if (p.size() != n) return InvalidArgumentError("cannot batch elements of different tensors");
      const Tensor& t = p[i];
      if (t.dtype != joined.dtype || t.shape.size() != joined.shape.size() || t.shape.empty() ||
          !std::equal(t.shape.begin() + 1, t.shape.end(), joined.shape.begin() + 1)) {
        return InvalidArgumentError("cannot batch tensor '" + joined.key +
                                    "': elements differ in type or shape");
      }
      bytes += t.size_bytes;
      rows += t.shape[0];
    }
    joined.data = std::shared_ptr<std::byte[]>(new std::byte[bytes]);
    joined.size_bytes = bytes;
    joined.shape[0] = rows;
    size_t at = 0;
    for (auto& p : parts) {
      std::memcpy(joined.data.get() + at, p[i].data.get(), p[i].size_bytes);
      at += p[i].size_bytes;
      p[i].data.reset();
    }
    out->push_back(std::move(joined));
  }
  return Status();
}

Status ConcatColumns(std::vector<example::Column>& to, std::vector<example::Column>&& from) {
  if (to.empty()) {
    to = std::move(from);
    return Status();
  }
  if (to.size() != from.size()) return InvalidArgumentError("cannot batch elements of different features");
  for (size_t i = 0; i < to.size(); ++i) {
    example::Column& a = to[i];
    example::Column& b = from[i];
    if (a.dtype != b.dtype || a.ragged != b.ragged || a.shape.size() != b.shape.size() ||
        !std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1)) {
      return InvalidArgumentError("cannot batch feature '" + a.key +
                                  "': elements differ in type or shape (use padded batching or VarLen)");
    }
    if (a.ragged) {
      const int64_t base = a.row_splits.back();
      for (size_t j = 1; j < b.row_splits.size(); ++j) a.row_splits.push_back(base + b.row_splits[j]);
      a.shape[0] += b.shape.empty() ? 0 : b.shape[0];
    } else if (!a.shape.empty()) {
      a.shape[0] += b.shape[0];
    }
    a.int64s.insert(a.int64s.end(), b.int64s.begin(), b.int64s.end());
    a.floats.insert(a.floats.end(), b.floats.begin(), b.floats.end());
    if (!b.bytes_offsets.empty()) {
      if (a.bytes_offsets.empty()) a.bytes_offsets.push_back(0);
      const int64_t base = a.bytes_offsets.back();
      for (size_t j = 1; j < b.bytes_offsets.size(); ++j) a.bytes_offsets.push_back(base + b.bytes_offsets[j]);
      a.bytes_data += b.bytes_data;
    }
  }
  return Status();
}

}  // namespace recordflow::pipeline::internal
