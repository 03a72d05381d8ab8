// Reading records back by position, and saving records in checkpoints as references or bytes.
#include <cstring>

#include "record_stream.h"
#include "recordflow/format/crc32c.h"
#include "recordflow/format/record_format.h"
#include "recordflow/io/file.h"

namespace recordflow::pipeline::internal {

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
  RF_ASSIGN_OR_RETURN(got,
                      file->ReadAt(p.offset + format::kHeaderSize,
                                   std::as_writable_bytes(std::span(data.data(), data.size()))));
  if (got != length) return DataLossError("record from checkpoint truncated at " + where);
  RF_ASSIGN_OR_RETURN(got, file->ReadAt(p.offset + format::kHeaderSize + length, footer));
  uint32_t data_crc = 0;
  std::memcpy(&data_crc, footer, 4);
  if (got != format::kFooterSize ||
      (options_.verify_checksums && format::MaskCrc(format::Crc32c(std::as_bytes(
                                        std::span(data.data(), data.size())))) != data_crc)) {
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

}  // namespace recordflow::pipeline::internal
