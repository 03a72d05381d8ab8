// TFRecord writer: framing, compression, index files, atomic publication.
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

struct RecordWriterOptions {
  // nullopt: from the file name (".gz" -> GZIP, ".zz" -> ZLIB, else none).
  std::optional<Compression> compression;
  // zlib level for GZIP/ZLIB: -1 (zlib's default, as TensorFlow), 0..9.
  int compression_level = -1;
  // Also write an index file (`offset size` per record, DALI's tfrecord2idx format).
  // Uncompressed files only: offsets into a compressed stream allow no random access.
  bool write_index = false;
  // Where the index goes; empty means `<path>.idx`.
  std::string index_path;
  // fsync data before publishing the file under its final name.
  bool sync = true;
  // Records are framed into a buffer of this size and written in large blocks.
  size_t buffer_size = 1 << 20;
  // Object stores: Close() leaves the records file (and index) as open multipart uploads
  // instead of publishing them (io::AtomicFileOptions::defer_completion); pending_uploads()
  // names them. Local paths: Open() fails with kUnimplemented.
  bool defer_completion = false;
};

// Writes records to one TFRecord file, byte-identical to TensorFlow's TFRecordWriter for
// uncompressed files.
//
// The file is written under a temporary name in the same folder and renamed to `path` only
// when Close() succeeds: a writer destroyed without Close() (an exception, a crash, a kill)
// leaves nothing under `path`. The index file, if any, is published the same way, after the
// records file.
//
// Thread safety: thread-compatible.
// Lifetime: Close() (or destruction, which discards) ends it.
class RecordWriter {
 public:
  // Errors: kInvalidArgument (bad options, index with compression), kNotFound (missing
  // folder), kPermissionDenied, kIOError.
  static Result<std::unique_ptr<RecordWriter>> Open(const std::string& path,
                                                    RecordWriterOptions options = {});
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Appends one record. Errors: kResourceExhausted (disk full), kIOError,
  // kFailedPrecondition after Close() or after an earlier write error.
  Status WriteRecord(std::span<const std::byte> payload);
  // Pushes buffered records to the OS. The file keeps its temporary name until Close().
  Status Flush();
  // Finishes the file and publishes it (and its index) under the final names. Closing a
  // closed writer is OK and does nothing.
  Status Close();
  // Discards everything written.
  void Abort();

  // After a successful Close() with RecordWriterOptions::defer_completion: the records file's
  // open upload, then the index's when there is one. Empty otherwise.
  std::vector<io::PendingUpload> pending_uploads() const;

  uint64_t records_written() const { return records_written_; }
  // Framed bytes written (before compression).
  uint64_t bytes_written() const { return offset_; }
  const std::string& path() const { return path_; }
  bool closed() const { return closed_; }

 private:
  RecordWriter(std::string path, RecordWriterOptions options, std::unique_ptr<OutputStream> stream);
  Status FlushBuffer();
  Status Fail(Status s);

  std::string path_;
  RecordWriterOptions options_;
  std::unique_ptr<OutputStream> stream_;
  std::unique_ptr<OutputStream> index_stream_;
  std::vector<std::byte> buffer_;
  size_t buffered_ = 0;
  std::string index_buffer_;
  uint64_t offset_ = 0;
  uint64_t records_written_ = 0;
  bool closed_ = false;
  Status error_;
};

}  // namespace recordflow::format
