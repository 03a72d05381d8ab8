#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"
#include "recordflow/io/local_file_internal.h"
#include "shard_cache_internal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string_view>

namespace recordflow::io {
namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string TempNameFor(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::random_device rd;
  char suffix[32];
  std::snprintf(suffix, sizeof(suffix), ".tmp-%d-%08x", static_cast<int>(getpid()), rd());
  return dir + "." + base + suffix;
}

// What a non-regular file is, for messages.
const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe or pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

// A local file read with pread(2).
class LocalRandomAccessFile final : public RandomAccessFile {
 public:
  LocalRandomAccessFile(std::string path, int fd, uint64_t size)
      : RandomAccessFile(std::move(path), size), fd_(fd) {}
  ~LocalRandomAccessFile() override { ::close(fd_); }
  Result<size_t> ReadAt(uint64_t offset, std::span<std::byte> dst) const override;
  void AdviseSequential() const override { ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL); }

 private:
  int fd_;
};

// A local file written under a temporary name and renamed on Commit().
class LocalAtomicFileWriter final : public AtomicFileWriter {
 public:
  LocalAtomicFileWriter(std::string path, std::string temp_path, int fd, AtomicFileOptions options)
      : AtomicFileWriter(std::move(path), std::move(temp_path)), fd_(fd), options_(options) {}
  ~LocalAtomicFileWriter() override { LocalAtomicFileWriter::Abort(); }
  Status Append(std::span<const std::byte> data) override;
  Status Commit() override;
  void Abort() override;

 private:
  int fd_;
  AtomicFileOptions options_;
};

Result<std::unique_ptr<RandomAccessFile>> RandomAccessFile::Open(const std::string& path) {
  if (!IsRemotePath(path)) return OpenLocalRandomAccessFile(path);
  if (internal::ShardCacheEnabled()) return internal::OpenThroughShardCache(path);
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(path));
  return fs->OpenRandomAccess(path);
}

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(const std::string& path,
                                                                   AtomicFileOptions options) {
  if (!IsRemotePath(path)) {
    if (options.defer_completion) {
      return UnimplementedError("'" + path +
                                "': deferred completion (an open multipart upload) exists only "
                                "for object stores; local files commit by rename");
    }
    return CreateLocalAtomicFileWriter(path, options);
  }
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(path));
  return fs->OpenWritable(path, options);
}

Result<std::unique_ptr<RandomAccessFile>> OpenLocalRandomAccessFile(std::string path) {
  if (path.starts_with("file://")) path = path.substr(7);
  // O_NONBLOCK: opening a FIFO for reading blocks until a writer appears; with it the open
  // returns at once and fstat below refuses the FIFO. It has no effect on regular files.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoToStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoToStatus(e, "cannot stat", path);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError("'" + path + "' is a directory, not a file");
  }
  // Reads are positional and bounded by the size seen here, which only a regular file has:
  // a pipe or device would read as an empty (or endless) file.
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError("'" + path + "' is " + FileKind(st.st_mode) +
                                ", not a regular file; recordflow reads regular files only "
                                "(copy the stream to a file first)");
  }
  if (st.st_size == 0) {
    // procfs and sysfs files report size 0 but hold data: they would read as empty files.
    std::byte probe;
    ssize_t n;
    do {
      n = ::pread(fd, &probe, 1, 0);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      ::close(fd);
      return InvalidArgumentError("'" + path +
                                  "' reports a size of 0 bytes but holds data (a /proc or /sys "
                                  "file?); recordflow reads regular files only");
    }
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return std::unique_ptr<RandomAccessFile>(
      std::make_unique<LocalRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size)));
}

Result<size_t> LocalRandomAccessFile::ReadAt(uint64_t offset, std::span<std::byte> dst) const {
  // An offset off_t cannot hold (a damaged checkpoint or index) is past the end of any file:
  // report end of file, not pread's EINVAL as an I/O error.
  constexpr uint64_t kMaxOffset = static_cast<uint64_t>(INT64_MAX);
  if (offset > kMaxOffset) return size_t{0};
  if (dst.size() > kMaxOffset - offset) dst = dst.first(static_cast<size_t>(kMaxOffset - offset));
  size_t done = 0;
  while (done < dst.size()) {
    ssize_t n =
        ::pread(fd_, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "read failed at offset " + std::to_string(offset + done) + " of",
                           path());
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

Result<std::unique_ptr<AtomicFileWriter>> CreateLocalAtomicFileWriter(std::string path,
                                                                      AtomicFileOptions options) {
  if (path.starts_with("file://")) path = path.substr(7);
  if (path.empty() || path.back() == '/') {
    return InvalidArgumentError("not a file path: '" + path + "'");
  }
  // The rename in Commit() would replace whatever is at `path`: a FIFO, a device node (as
  // root, /dev/null or /dev/full) or a socket would be swapped for a regular file.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      return InvalidArgumentError("'" + path + "' is a directory, not a file");
    }
    return InvalidArgumentError("cannot write '" + path + "': it is " + FileKind(st.st_mode) +
                                ", not a regular file (recordflow replaces only regular files)");
  }
  std::string temp = TempNameFor(path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, "cannot create", path);
  return std::unique_ptr<AtomicFileWriter>(
      std::make_unique<LocalAtomicFileWriter>(path, temp, fd, options));
}

Status LocalAtomicFileWriter::Append(std::span<const std::byte> data) {
  if (fd_ < 0) return FailedPreconditionError("write to closed file '" + path_ + "'");
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "write failed for", path_);
    }
    done += static_cast<size_t>(n);
  }
  bytes_written_ += done;
  return Status::OK();
}

Status LocalAtomicFileWriter::Commit() {
  if (fd_ < 0) return FailedPreconditionError("commit of closed file '" + path_ + "'");
  if (options_.sync && ::fsync(fd_) != 0) {
    Status s = ErrnoToStatus(errno, "fsync failed for", path_);
    Abort();
    return s;
  }
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    Status s = ErrnoToStatus(errno, "close failed for", path_);
    ::unlink(temp_path_.c_str());
    return s;
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    Status s = ErrnoToStatus(errno, "cannot rename temporary file to", path_);
    ::unlink(temp_path_.c_str());
    return s;
  }
  temp_path_.clear();
  if (options_.sync) {
    int dfd = ::open(DirName(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);  // Best effort: some filesystems refuse fsync on directories.
      ::close(dfd);
    }
  }
  return Status::OK();
}

void LocalAtomicFileWriter::Abort() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!temp_path_.empty()) {
    ::unlink(temp_path_.c_str());
    temp_path_.clear();
  }
}

Result<std::string> ReadFileToString(const std::string& path, uint64_t max_size) {
  RF_ASSIGN_OR_RETURN(auto file, RandomAccessFile::Open(path));
  if (file->size() > max_size) {
    return ResourceExhaustedError("'" + path + "' is " + std::to_string(file->size()) +
                                  " bytes, over the limit of " + std::to_string(max_size));
  }
  std::string out(file->size(), '\0');
  RF_ASSIGN_OR_RETURN(size_t n, file->ReadAt(0, std::as_writable_bytes(std::span(out))));
  out.resize(n);
  return out;
}

Status WriteStringToFileAtomic(const std::string& path, std::string_view contents,
                               AtomicFileOptions options) {
  RF_ASSIGN_OR_RETURN(auto writer, AtomicFileWriter::Create(path, options));
  RF_RETURN_IF_ERROR(writer->Append(std::as_bytes(std::span(contents))));
  return writer->Commit();
}

}  // namespace recordflow::io
