// Sequential TFRecord reader: framing, CRC checks, corruption policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/format/compression.h"

namespace recordflow::format {

enum class CorruptionPolicy {
  kRaise,  // stop at the first corrupt or truncated record with kDataLoss
  kSkip,   // skip it, count it, report it, and continue
};

// Parses "raise" / "skip". Errors: kInvalidArgument.
Result<CorruptionPolicy> ParseCorruptionPolicy(std::string_view name);

// One corrupt region the reader stepped over (kSkip) or stopped at (kRaise).
struct CorruptionEvent {
  std::string path;
  uint64_t offset = 0;        // byte offset of the bad record (decompressed stream offset
                              // for GZIP/ZLIB files)
  uint64_t record_index = 0;  // 0-based index of the bad record among all records so far
  uint64_t bytes_skipped = 0;
  std::string reason;
};

// Receives every corruption event as it happens (LevelDB's Reporter).
//
// Thread safety: called on the reading thread.
class CorruptionReporter {
 public:
  virtual ~CorruptionReporter() = default;
  virtual void Report(const CorruptionEvent& event) = 0;
};

struct CorruptionStats {
  uint64_t records_skipped = 0;  // corrupt regions skipped; one per event
  uint64_t bytes_skipped = 0;
  std::vector<CorruptionEvent> events;  // the first kMaxEvents events
  static constexpr size_t kMaxEvents = 100;
};

// Asked before a reader's record buffer grows (a record larger than the buffer), so that an
// owner with a memory budget can refuse the growth before the memory is taken.
//
// Thread safety: called on the reading thread.
class ReadBufferBudget {
 public:
  virtual ~ReadBufferBudget() = default;
  // Returns OK to let the buffer grow by `bytes` (the owner counts them from now on), or an
  // error (kResourceExhausted) that the read returns instead. `record_offset` and
  // `record_index` name the record being read, for the message.
  virtual Status Reserve(const std::string& path, size_t bytes, uint64_t record_offset,
                         uint64_t record_index) = 0;
};

inline constexpr uint64_t kMaxRecordSizeLimit = uint64_t{1} << 48;

struct RecordReaderOptions {
  // nullopt: from the file name (".gz" -> GZIP, ".zz" -> ZLIB, else none).
  std::optional<Compression> compression;
  // Checks both CRCs of every record. Turning this off trades safety for ~nothing on CPUs
  // with hardware CRC32C; it exists for measurement.
  bool verify_checksums = true;
  CorruptionPolicy on_corruption = CorruptionPolicy::kRaise;
  // Optional; must outlive the reader.
  CorruptionReporter* reporter = nullptr;
  // Size of each read from the file. Records larger than this grow the buffer.
  size_t buffer_size = 1 << 20;
  // ReadRecord(std::string*) reads a payload of at least this many bytes (and at most
  // buffer_size) that is not yet buffered straight into the string; 0: never.
  size_t direct_read_bytes = 32 * 1024;
  // Optional; must outlive the reader. Consulted before the record buffer grows.
  ReadBufferBudget* buffer_budget = nullptr;
  // DEFLATE decoder for GZIP/ZLIB files (see Inflater).
  Inflater inflater = Inflater::kAuto;
  // Safety limit: a length field above this is kResourceExhausted, never allocated. Values
  // above kMaxRecordSizeLimit (2^48) are lowered to it.
  uint64_t max_record_size = uint64_t{1} << 30;
  // Safety limit on the bytes a GZIP/ZLIB file may inflate to (see InputStreamOptions);
  // kResourceExhausted past it. Applies to Open(); FromStream takes the stream as given.
  uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes;
};

// Reads records front to back from one TFRecord file.
//
// Reads the file in large blocks (one read per `buffer_size` bytes, not one per record) and
// returns each payload as a view into its buffer, without copying (or, into a string, with one
// copy: see ReadRecord(std::string*)).
//
// Errors: kDataLoss for a bad CRC, a truncated record, or a length larger than what is left of
// the file, a file that shrinks below its size at open while it is read, or a damaged or
// truncated GZIP/ZLIB stream; kResourceExhausted when a record is over max_record_size, its
// buffer cannot be allocated, or `buffer_budget` refuses the growth; the message names the path,
// byte offset and record index, with a hint when offset 0 is bad. Under CorruptionPolicy::kSkip
// those are skipped and counted instead: a bad payload CRC skips one record; a bad length CRC
// resynchronises at the next offset whose 12 header bytes carry a valid CRC; a truncated tail,
// or everything after damage in a compressed stream, is dropped. Once an error is returned, every
// later call returns it again.
//
// Thread safety: thread-compatible (use one reader per thread).
// Views: a returned record is valid until the next call on the reader or its destruction.
class RecordReader {
 public:
  // Opens `path`. Errors: kNotFound, kPermissionDenied, kInvalidArgument, kIOError.
  static Result<std::unique_ptr<RecordReader>> Open(const std::string& path,
                                                    RecordReaderOptions options = {});
  // Reads from an already opened stream (memory, tests, fuzzers).
  static std::unique_ptr<RecordReader> FromStream(std::unique_ptr<InputStream> stream,
                                                  RecordReaderOptions options = {},
                                                  Compression compression = Compression::kNone);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Sets `*record` to the next payload and returns true; returns false at the end of the
  // file (end of sequence is not an error). Errors: see the class comment.
  Result<bool> ReadRecord(std::span<const std::byte>* record);
  // The same, with the payload copied into `*out` (its old bytes replaced; on false or an
  // error its content is unspecified). A payload of at least options.direct_read_bytes (and
  // at most buffer_size) that is not already in the buffer is read from the stream straight
  // into `*out`, with the framing after it, instead of through the buffer and a second copy:
  // a run of large records then costs one read each and no copy but the read's own.
  Result<bool> ReadRecord(std::string* out);

  // Continues reading at `offset` (a record boundary from offset() of an earlier reader of the
  // same file), counting records from `record_index`. Only before the first ReadRecord.
  // Errors: kFailedPrecondition after reading; kDataLoss when the file is shorter than offset.
  Status SkipTo(uint64_t offset, uint64_t record_index);

  // Byte offset (in the decompressed stream) of the record last returned.
  uint64_t last_record_offset() const { return last_record_offset_; }
  // Byte offset just past the last record returned (or skipped).
  uint64_t offset() const { return buffer_offset_ + pos_; }
  // Records returned so far.
  uint64_t records_read() const { return records_read_; }
  const CorruptionStats& corruption_stats() const { return stats_; }
  const std::string& path() const;
  bool compressed() const { return compressed_; }
  // The compression in use (explicit, or chosen from the file name).
  Compression compression() const { return compression_; }
  // Bytes of memory held for reading: the record buffer (grown to the largest record, shrunk
  // back after) and the decompressor's buffers and state, for memory accounting.
  size_t buffer_bytes() const { return buffer_.capacity() + stream_->buffer_bytes(); }

 private:
  RecordReader(std::unique_ptr<InputStream> stream, RecordReaderOptions options,
               Compression compression);
  Result<bool> Next(std::span<const std::byte>* record, std::string* out);
  Result<std::optional<bool>> ReadDirect(uint64_t offset, uint64_t length, std::string* out);
  Result<size_t> Fill(size_t n);
  Status GrowBuffer(size_t size);
  Status Corruption(uint64_t offset, uint64_t bytes, std::string reason);
  Result<bool> Resynchronize(uint64_t bad_offset);
  Result<bool> StreamFailure(uint64_t offset, const Status& status);
  Result<bool> StreamFailure(uint64_t offset, uint64_t bytes, const Status& status);
  std::string Where(uint64_t offset) const;

  std::unique_ptr<InputStream> stream_;
  RecordReaderOptions options_;
  Compression compression_;
  bool compressed_;
  std::vector<std::byte> buffer_;
  size_t pos_ = 0;              // next unread byte in buffer_
  size_t end_ = 0;              // end of valid bytes in buffer_
  uint64_t buffer_offset_ = 0;  // stream offset of buffer_[0]
  bool eof_ = false;
  uint64_t record_index_ = 0;  // records seen, returned or skipped
  uint64_t records_read_ = 0;
  uint64_t last_record_offset_ = 0;
  CorruptionStats stats_;
  Status error_;
};

}  // namespace recordflow::format
