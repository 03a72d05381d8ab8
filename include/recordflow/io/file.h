// Local files: positional reads, and writes that become visible only when committed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "recordflow/core/status.h"

namespace recordflow::io {

// A read-only local file read with pread(2), so one object serves many threads.
//
// Thread safety: thread-safe (ReadAt has no shared cursor).
// Lifetime: owns the file descriptor; closes it on destruction.
class RandomAccessFile {
 public:
  // Opens `path` for reading; never blocks (a FIFO is refused, not waited on). Errors:
  // kNotFound, kPermissionDenied, kInvalidArgument (a directory, FIFO, device, socket, or a
  // /proc-style file that reports size 0 but holds data), kIOError.
  static Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  // Reads up to dst.size() bytes at `offset`; returns the number read, which is less than
  // dst.size() only at end of file. Retries short reads and EINTR. An offset past the
  // end (even past what off_t holds) reads 0 bytes. Errors: kIOError.
  Result<size_t> ReadAt(uint64_t offset, std::span<std::byte> dst) const;

  // Size at open time.
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Tells the kernel the file will be read front to back (bigger readahead).
  void AdviseSequential() const;

 private:
  RandomAccessFile(std::string path, int fd, uint64_t size);
  std::string path_;
  int fd_;
  uint64_t size_;
};

struct AtomicFileOptions {
  // fsync the data before the rename, and the directory after it, so that a crash never
  // leaves a file under the final name whose contents are not on disk.
  bool sync = true;
};

// Writes a file under a temporary name in the destination folder and renames it to its final
// name in Commit(). An object destroyed (or Abort()ed) before a successful Commit() removes the
// temporary file, so an interrupted writer never leaves a partial file that looks complete.
//
// Thread safety: thread-compatible (one writer thread at a time).
// Lifetime: owns the descriptor and the temporary file until Commit() or destruction.
class AtomicFileWriter {
 public:
  // Creates the temporary file next to `path`. Errors: kNotFound (missing folder),
  // kInvalidArgument (`path` exists and is not a regular file: a directory, FIFO, device or
  // socket is never replaced), kPermissionDenied, kIOError.
  static Result<std::unique_ptr<AtomicFileWriter>> Create(const std::string& path,
                                                          AtomicFileOptions options = {});
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Writes all of `data` (unbuffered: callers buffer). Errors: kResourceExhausted (disk
  // full, file size limit), kIOError, kFailedPrecondition after Commit/Abort.
  Status Append(std::span<const std::byte> data);
  // Optionally syncs, closes, and renames to the final name. Errors as Append.
  Status Commit();
  // Removes the temporary file. Idempotent.
  void Abort();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  AtomicFileWriter(std::string path, std::string temp_path, int fd, AtomicFileOptions options);
  std::string path_;
  std::string temp_path_;
  int fd_;
  AtomicFileOptions options_;
  uint64_t bytes_written_ = 0;
};

// Reads a whole (small) file. Errors as RandomAccessFile::Open, and kResourceExhausted when
// the file is larger than `max_size`.
Result<std::string> ReadFileToString(const std::string& path, uint64_t max_size = 1ull << 30);

// Writes `contents` to `path` atomically (AtomicFileWriter).
Status WriteStringToFileAtomic(const std::string& path, std::string_view contents,
                               AtomicFileOptions options = {});

}  // namespace recordflow::io
