#include "recordflow/format/record_index.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "recordflow/format/record_format.h"
#include "recordflow/io/file.h"

namespace recordflow::format {
namespace {

bool ParseUint(std::string_view& s, uint64_t* out) {
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  auto [ptr, ec] = std::from_chars(s.data() + i, s.data() + s.size(), *out);
  if (ec != std::errc() || ptr == s.data() + i) return false;
  s.remove_prefix(static_cast<size_t>(ptr - s.data()));
  return true;
}

}  // namespace

Result<std::vector<IndexEntry>> ParseIndex(std::string_view text, const std::string& name) {
  std::vector<IndexEntry> entries;
  uint64_t line_no = 0;
  uint64_t next_min_offset = 0;
  // One entry a line: reserved up front, so the index holds 16 bytes a record, not up to twice
  // that in a grown vector's spare capacity (the global shuffle keeps every file's index).
  entries.reserve(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    IndexEntry e;
    std::string_view rest = line;
    bool ok = ParseUint(rest, &e.offset) && ParseUint(rest, &e.size) &&
              rest.find_first_not_of(" \t") == std::string_view::npos;
    auto bad = [&](const std::string& why) {
      return DataLossError("index file '" + name + "' line " + std::to_string(line_no) + " ('" +
                           std::string(line.substr(0, 80)) + "'): " + why);
    };
    if (!ok) return bad("expected two decimal numbers, `offset size`");
    if (e.size < kFramingOverhead) return bad("a record is at least 16 bytes");
    if (e.offset < next_min_offset) return bad("offset overlaps the previous record");
    if (e.size > UINT64_MAX - e.offset) return bad("offset + size overflows 64 bits");
    next_min_offset = e.offset + e.size;
    entries.push_back(e);
  }
  return entries;
}

Result<std::vector<IndexEntry>> ReadIndexFile(const std::string& index_path) {
  RF_ASSIGN_OR_RETURN(std::string text, io::ReadFileToString(index_path));
  return ParseIndex(text, index_path);
}

Status WriteIndexFile(const std::string& index_path, std::span<const IndexEntry> entries) {
  std::string text;
  text.reserve(entries.size() * 16);
  for (const auto& e : entries) {
    text += std::to_string(e.offset);
    text += ' ';
    text += std::to_string(e.size);
    text += '\n';
  }
  return io::WriteStringToFileAtomic(index_path, text);
}

Result<std::vector<IndexEntry>> BuildIndex(const std::string& record_path,
                                           RecordReaderOptions options) {
  Compression compression = options.compression.value_or(CompressionFromPath(record_path));
  if (compression != Compression::kNone) {
    return InvalidArgumentError("cannot index '" + record_path +
                                "': index files need uncompressed TFRecord files");
  }
  options.compression = Compression::kNone;
  RF_ASSIGN_OR_RETURN(auto reader, RecordReader::Open(record_path, options));
  std::vector<IndexEntry> entries;
  std::span<const std::byte> record;
  while (true) {
    RF_ASSIGN_OR_RETURN(bool more, reader->ReadRecord(&record));
    if (!more) break;
    entries.push_back({reader->last_record_offset(), record.size() + kFramingOverhead});
  }
  return entries;
}

Status CheckIndexCoversFile(std::span<const IndexEntry> entries, uint64_t file_size,
                            const std::string& record_path) {
  // A TFRecord file is records back to back: an index that describes the file has its first
  // record at 0, each next one where the previous ends, and the last ending at the file's end.
  // Anything else is an index of another (older, partial, longer) version of the file, whose
  // records would be read as missing, extra or shifted without any CRC noticing.
  auto stale = [&](const std::string& why) {
    return DataLossError("index for '" + record_path +
                         "' does not match the file (stale or "
                         "incomplete index?): " +
                         why + "; rebuild it with `recordflow index`");
  };
  uint64_t expected = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].offset != expected) {
      return stale("record " + std::to_string(i) + " is at byte offset " +
                   std::to_string(entries[i].offset) + " but the previous record ends at " +
                   std::to_string(expected));
    }
    if (entries[i].size > UINT64_MAX - expected) return stale("offsets overflow 64 bits");
    expected += entries[i].size;
  }
  if (expected != file_size) {
    return stale("its " + std::to_string(entries.size()) + " records end at byte " +
                 std::to_string(expected) + " but the file is " + std::to_string(file_size) +
                 " bytes");
  }
  return Status();
}

IndexedRecordReader::IndexedRecordReader(std::unique_ptr<io::RandomAccessFile> file,
                                         std::vector<IndexEntry> entries)
    : file_(std::move(file)), entries_(std::move(entries)) {}

IndexedRecordReader::~IndexedRecordReader() = default;

Result<std::unique_ptr<IndexedRecordReader>> IndexedRecordReader::Open(
    const std::string& record_path, const std::string& index_path) {
  RF_ASSIGN_OR_RETURN(auto entries,
                      ReadIndexFile(index_path.empty() ? record_path + ".idx" : index_path));
  return Open(record_path, std::move(entries));
}

Result<std::unique_ptr<IndexedRecordReader>> IndexedRecordReader::Open(
    const std::string& record_path, std::vector<IndexEntry> entries) {
  RF_ASSIGN_OR_RETURN(auto file, io::RandomAccessFile::Open(record_path));
  return Open(std::move(file), std::move(entries));
}

Result<std::unique_ptr<IndexedRecordReader>> IndexedRecordReader::Open(
    std::unique_ptr<io::RandomAccessFile> file, std::vector<IndexEntry> entries) {
  const std::string record_path = file->path();
  // Every entry, not only the last: entries may come from a caller rather than ParseIndex, so
  // neither their order nor the absence of overflow in offset + size can be assumed.
  const uint64_t file_size = file->size();
  for (size_t i = 0; i < entries.size(); ++i) {
    const IndexEntry& e = entries[i];
    if (e.size < kFramingOverhead) {
      return DataLossError("index for '" + record_path + "' has record " + std::to_string(i) +
                           " of " + std::to_string(e.size) + " bytes; a record is at least 16");
    }
    if (e.size > file_size || e.offset > file_size - e.size) {
      return DataLossError("index for '" + record_path + "' has record " + std::to_string(i) +
                           " at byte offset " + std::to_string(e.offset) + " of " +
                           std::to_string(e.size) + " bytes but the file is " +
                           std::to_string(file_size) + " bytes (stale index?)");
    }
  }
  RF_RETURN_IF_ERROR(CheckIndexCoversFile(entries, file_size, record_path));
  return std::unique_ptr<IndexedRecordReader>(
      new IndexedRecordReader(std::move(file), std::move(entries)));
}

Result<const IndexEntry*> IndexedRecordReader::Entry(uint64_t index) const {
  if (index >= entries_.size()) {
    return OutOfRangeError("record " + std::to_string(index) + " requested from '" + file_->path() +
                           "', which has " + std::to_string(entries_.size()) + " records");
  }
  return &entries_[index];
}

std::string IndexedRecordReader::Where(uint64_t index) const {
  return "'" + file_->path() + "' at byte offset " + std::to_string(entries_[index].offset) +
         " (record index " + std::to_string(index) + ")";
}

Result<std::span<const std::byte>> IndexedRecordReader::ReadRecord(
    uint64_t index, std::vector<std::byte>* scratch) const {
  RF_ASSIGN_OR_RETURN(const IndexEntry* entry, Entry(index));
  const IndexEntry& e = *entry;
  if (scratch->size() < e.size) scratch->resize(e.size);
  RF_ASSIGN_OR_RETURN(size_t n, file_->ReadAt(e.offset, std::span(scratch->data(), e.size)));
  if (n < e.size) return DataLossError("truncated record in " + Where(index));
  return CheckRecord(index, std::span<const std::byte>(scratch->data(), e.size));
}

Result<std::span<const std::byte>> IndexedRecordReader::CheckRecord(
    uint64_t index, std::span<const std::byte> framed) const {
  RF_ASSIGN_OR_RETURN(const IndexEntry* entry, Entry(index));
  const IndexEntry& e = *entry;
  if (framed.size() < e.size || e.size < kFramingOverhead) {
    return DataLossError("truncated record in " + Where(index));
  }
  const std::byte* header = framed.data();
  if (!HeaderCrcMatches(header)) return DataLossError("length CRC mismatch in " + Where(index));
  uint64_t length = DecodeFixed64(header);
  if (length + kFramingOverhead != e.size) {
    return DataLossError("index says " + std::to_string(e.size) + " bytes but the record in " +
                         Where(index) + " is " + std::to_string(length + kFramingOverhead) +
                         " bytes framed (stale index?)");
  }
  std::span<const std::byte> payload(header + kHeaderSize, length);
  if (UnmaskCrc(DecodeFixed32(header + kHeaderSize + length)) != Crc32c(payload)) {
    return DataLossError("payload CRC mismatch in " + Where(index));
  }
  return payload;
}

}  // namespace recordflow::format
