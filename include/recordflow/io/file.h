// Local files: positional reads, and writes that become visible only when committed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "recordflow/core/status.h"

namespace recordflow::io {

// A read-only file: a local file read with pread(2), or a remote object (s3://, gs://,
// http(s)://) read with ranged GETs (filesystem.h). One object serves many threads.
//
// Thread safety: thread-safe (ReadAt has no shared cursor).
// Lifetime: owns the descriptor or connection state; releases it on destruction.
class RandomAccessFile {
 public:
  // Opens `path` (a local path or a URL, see FileSystemForPath) for reading; never blocks on
  // a FIFO (refused, not waited on). Errors: kNotFound, kPermissionDenied, kInvalidArgument (a
  // directory, FIFO, device, socket, a /proc-style file that reports size 0 but holds data,
  // or an unsupported URL scheme), kIOError (for URLs: after the retry budget is spent).
  static Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  virtual ~RandomAccessFile() = default;
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  // Reads up to dst.size() bytes at `offset`; returns the number read, which is less than
  // dst.size() only at end of file. Retries short reads and EINTR (remote: transient
  // failures, resuming at the byte where a dropped transfer stopped). An offset past the
  // end (even past what off_t holds) reads 0 bytes. Errors: kIOError, kPermissionDenied.
  virtual Result<size_t> ReadAt(uint64_t offset, std::span<std::byte> dst) const = 0;

  // Size at open time.
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Tells the implementation the file will be read front to back: bigger kernel readahead
  // locally; concurrent ranged GETs of large parts ahead of the reader for remote objects.
  virtual void AdviseSequential() const {}

  // Bytes this file holds in memory on its own (remote: read-ahead parts, scheduled or filled,
  // and the head of the open request), for the pipeline's memory account. Local files: 0.
  virtual size_t buffered_bytes() const { return 0; }

 protected:
  RandomAccessFile(std::string path, uint64_t size) : path_(std::move(path)), size_(size) {}

 private:
  std::string path_;
  uint64_t size_;
};

struct AtomicFileOptions {
  // fsync the data before the rename, and the directory after it, so that a crash never
  // leaves a file under the final name whose contents are not on disk.
  bool sync = true;
  // Object stores only (s3://, and gs:// through HMAC keys): Commit() uploads every byte as
  // parts of a multipart upload and leaves the upload open instead of completing it, so no
  // object appears under `path`; pending_upload() then names the upload, which a commit
  // protocol completes or aborts later, possibly in another process (CompletePendingUpload,
  // AbortPendingUpload in filesystem.h). Other destinations fail Create() with
  // kUnimplemented.
  bool defer_completion = false;
};

// A multipart upload whose parts are all uploaded and which nobody has completed yet.
struct PendingUpload {
  std::string url;                 // the object it becomes: s3://bucket/key
  std::string upload_id;           // the store's id for the upload
  std::vector<std::string> etags;  // of parts 1, 2, ... in order (as the store returned them)
  uint64_t size = 0;               // bytes in all parts: the object's size once completed
};

// Writes a file under a temporary name in the destination folder and renames it to its final
// name in Commit(). An object destroyed (or Abort()ed) before a successful Commit() removes the
// temporary file, so an interrupted writer never leaves a partial file that looks complete.
// For object stores (s3://, gs://) the same contract holds through a multipart upload that is
// completed only in Commit() and aborted otherwise: no object ever appears half-written.
//
// Thread safety: thread-compatible (one writer thread at a time).
// Lifetime: owns the descriptor and the temporary file (or upload) until Commit() or
// destruction.
class AtomicFileWriter {
 public:
  // Creates the temporary file next to `path` (or prepares an upload to the URL `path`).
  // Errors: kNotFound (missing folder), kInvalidArgument (`path` exists and is not a regular
  // file: a directory, FIFO, device or socket is never replaced; or an unsupported URL),
  // kPermissionDenied, kIOError.
  static Result<std::unique_ptr<AtomicFileWriter>> Create(const std::string& path,
                                                          AtomicFileOptions options = {});
  virtual ~AtomicFileWriter() = default;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Writes all of `data` (local: unbuffered, callers buffer). Errors: kResourceExhausted
  // (disk full, file size limit), kIOError, kPermissionDenied, kFailedPrecondition after
  // Commit/Abort.
  virtual Status Append(std::span<const std::byte> data) = 0;
  // Optionally syncs, closes, and renames to the final name (remote: completes the upload).
  // Errors as Append.
  virtual Status Commit() = 0;
  // Removes the temporary file (remote: aborts the upload). Idempotent.
  virtual void Abort() = 0;

  const std::string& path() const { return path_; }
  // The local temporary file; empty for remote objects.
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }
  // After a successful Commit() with AtomicFileOptions::defer_completion: the open upload.
  // nullopt otherwise.
  virtual std::optional<PendingUpload> pending_upload() const { return std::nullopt; }

 protected:
  AtomicFileWriter(std::string path, std::string temp_path)
      : path_(std::move(path)), temp_path_(std::move(temp_path)) {}
  std::string path_;
  std::string temp_path_;
  uint64_t bytes_written_ = 0;
};

// Reads a whole (small) file. Errors as RandomAccessFile::Open, and kResourceExhausted when
// the file is larger than `max_size`.
Result<std::string> ReadFileToString(const std::string& path, uint64_t max_size = 1ull << 30);

// Writes `contents` to `path` atomically (AtomicFileWriter).
Status WriteStringToFileAtomic(const std::string& path, std::string_view contents,
                               AtomicFileOptions options = {});

}  // namespace recordflow::io
