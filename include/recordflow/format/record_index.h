// Index files and random access to records by number.
//
// An index file has one line per record, `offset size`, both decimal: the byte offset of the
// record's header and its framed size (16 + payload). This is DALI's `tfrecord2idx` format, so
// DALI's readers and the `tfrecord` pip package can use recordflow's index files and back.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/format/record_reader.h"

namespace recordflow::io {
class RandomAccessFile;
}

namespace recordflow::format {

struct IndexEntry {
  uint64_t offset = 0;  // of the record's 12-byte header
  uint64_t size = 0;    // framed size: 16 + payload length
  bool operator==(const IndexEntry&) const = default;
};

// Parses an index file. Errors: kNotFound etc. from the file; kDataLoss naming the line for a
// malformed line, a size under 16, or overlapping / decreasing offsets.
Result<std::vector<IndexEntry>> ReadIndexFile(const std::string& index_path);
Result<std::vector<IndexEntry>> ParseIndex(std::string_view text, const std::string& name);

// Writes `entries` to `index_path` atomically.
Status WriteIndexFile(const std::string& index_path, std::span<const IndexEntry> entries);

// Scans an uncompressed TFRecord file and returns one entry per record, checking CRCs as
// `options` says. Errors: kInvalidArgument for a compressed file; those of RecordReader.
Result<std::vector<IndexEntry>> BuildIndex(const std::string& record_path,
                                           RecordReaderOptions options = {});

// OK when `entries` describe a file of `file_size` bytes exactly: the first record at 0, each
// next one where the previous ends, the last ending at the end of the file. Errors: kDataLoss
// naming `record_path`, the first mismatch and the sizes (a stale or incomplete index).
Status CheckIndexCoversFile(std::span<const IndexEntry> entries, uint64_t file_size,
                            const std::string& record_path);

// Reads records by number from an uncompressed TFRecord file and its index.
//
// Every read checks that the header at the indexed offset carries the indexed length and valid
// CRCs, so a stale or wrong index is reported rather than returning bad bytes.
//
// Thread safety: thread-safe (positional reads; each caller passes its own scratch buffer).
// Views: a returned record lives in `scratch` until the caller reuses it.
class IndexedRecordReader {
 public:
  // Opens `record_path` with the entries from `index_path` (empty: `<record_path>.idx`).
  // Errors: those of ReadIndexFile and file opening; kDataLoss when the index points past the
  // end of the file or does not cover it exactly (CheckIndexCoversFile: a stale or
  // incomplete index is refused, not trusted).
  static Result<std::unique_ptr<IndexedRecordReader>> Open(const std::string& record_path,
                                                           const std::string& index_path = "");
  static Result<std::unique_ptr<IndexedRecordReader>> Open(const std::string& record_path,
                                                           std::vector<IndexEntry> entries);
  // Over an already open file (a caller that needed its size first opens it only once).
  static Result<std::unique_ptr<IndexedRecordReader>> Open(
      std::unique_ptr<io::RandomAccessFile> file, std::vector<IndexEntry> entries);
  ~IndexedRecordReader();

  uint64_t size() const { return entries_.size(); }
  const std::vector<IndexEntry>& entries() const { return entries_; }

  // Reads record `index`. Errors: kOutOfRange for index >= size(); kDataLoss for a mismatch
  // between index and file, or a bad CRC; kIOError.
  Result<std::span<const std::byte>> ReadRecord(uint64_t index,
                                                std::vector<std::byte>* scratch) const;
  // The payload of record `index` from its framed bytes (entries()[index].size of them, read
  // by the caller, e.g. within one larger ranged read), checked as ReadRecord checks them.
  Result<std::span<const std::byte>> CheckRecord(uint64_t index,
                                                 std::span<const std::byte> framed) const;
  const io::RandomAccessFile& file() const { return *file_; }

 private:
  IndexedRecordReader(std::unique_ptr<io::RandomAccessFile> file, std::vector<IndexEntry> entries);
  // Record `index`'s entry, or kOutOfRange naming the file and its record count.
  Result<const IndexEntry*> Entry(uint64_t index) const;
  // "'<path>' at byte offset <offset> (record index <index>)", for errors about record `index`.
  std::string Where(uint64_t index) const;

  std::unique_ptr<io::RandomAccessFile> file_;
  std::vector<IndexEntry> entries_;
};

}  // namespace recordflow::format
