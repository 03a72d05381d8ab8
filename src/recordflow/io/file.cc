#include "recordflow/io/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace

RandomAccessFile::RandomAccessFile(std::string path, int fd, uint64_t size)
    : path_(std::move(path)), fd_(fd), size_(size) {}

RandomAccessFile::~RandomAccessFile() { ::close(fd_); }

Result<std::unique_ptr<RandomAccessFile>> RandomAccessFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  return std::unique_ptr<RandomAccessFile>(
      new RandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

Result<size_t> RandomAccessFile::ReadAt(uint64_t offset, std::span<std::byte> dst) const {
  size_t done = 0;
  while (done < dst.size()) {
    ssize_t n = ::pread(fd_, dst.data() + done, dst.size() - done,
                        static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "read failed at offset " + std::to_string(offset + done) + " of",
                           path_);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void RandomAccessFile::AdviseSequential() const {
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

AtomicFileWriter::AtomicFileWriter(std::string path, std::string temp_path, int fd,
                                   AtomicFileOptions options)
    : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd), options_(options) {}

AtomicFileWriter::~AtomicFileWriter() { Abort(); }

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(const std::string& path,
                                                                   AtomicFileOptions options) {
  if (path.empty() || path.back() == '/') {
    return InvalidArgumentError("not a file path: '" + path + "'");
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgumentError("'" + path + "' is a directory, not a file");
  }
  std::string temp = TempNameFor(path);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, "cannot create", path);
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(path, temp, fd, options));
}

Status AtomicFileWriter::Append(std::span<const std::byte> data) {
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

Status AtomicFileWriter::Commit() {
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

void AtomicFileWriter::Abort() {
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
