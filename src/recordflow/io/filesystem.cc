#include "recordflow/io/filesystem.h"

#include "recordflow/io/custom_filesystem.h"
#include "recordflow/io/glob.h"

#include <fnmatch.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <cmath>
#include <mutex>

#include "filesystem_internal.h"
#include "gcs_internal.h"
#include "local_file_internal.h"
#include "remote_file_internal.h"

namespace recordflow::io {
namespace {

std::mutex options_mu;

struct Fallback {
  std::function<bool(const std::string&)> handles;
  FileSystem* fs = nullptr;
};
std::mutex fallback_mu;
Fallback& FallbackSlot() {
  static Fallback* f = new Fallback();
  return *f;
}
// Every fallback ever set: FileSystemForPath hands out plain pointers, so none is freed.
std::vector<std::shared_ptr<FileSystem>>& KeptFileSystems() {
  static auto* v = new std::vector<std::shared_ptr<FileSystem>>();
  return *v;
}
RemoteOptions& Options() {
  static RemoteOptions* o = new RemoteOptions();
  return *o;
}

class LocalFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) override {
    return OpenLocalRandomAccessFile(path);
  }
  Result<std::unique_ptr<AtomicFileWriter>> OpenWritable(const std::string& path,
                                                         AtomicFileOptions options) override {
    return CreateLocalAtomicFileWriter(path, options);
  }
  Result<FileInfo> Stat(const std::string& path) override {
    const std::string p = ParseUrl(path).key;
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return ErrnoToStatus(errno, "cannot stat", path);
    FileInfo info;
    info.size = static_cast<uint64_t>(st.st_size);
    info.is_directory = S_ISDIR(st.st_mode);
    return info;
  }
  Result<std::vector<std::string>> ListPrefix(const std::string& prefix) override {
    return GlobPaths(prefix + "*");
  }
  Status Delete(const std::string& path) override {
    if (::unlink(ParseUrl(path).key.c_str()) != 0 && errno != ENOENT) {
      return ErrnoToStatus(errno, "cannot delete", path);
    }
    return Status::OK();
  }
};

}  // namespace

std::chrono::milliseconds BackoffDelay(const RetryOptions& options, int attempt, double u) {
  double d =
      static_cast<double>(options.initial_backoff.count()) * std::pow(2.0, std::min(attempt, 30));
  d = std::min(d, static_cast<double>(options.max_backoff.count()));
  u = std::clamp(u, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(d * (0.5 + 0.5 * u)));
}

void SetRemoteOptions(const RemoteOptions& options) {
  std::lock_guard lock(options_mu);
  Options() = options;
}

RemoteOptions GetRemoteOptions() {
  std::lock_guard lock(options_mu);
  return Options();
}

void SetS3Credentials(std::string access_key, std::string secret_key, std::string session_token) {
  internal::SetExplicitS3Credentials(
      {std::move(access_key), std::move(secret_key), std::move(session_token)});
}

Url ParseUrl(std::string_view path) {
  Url u;
  const size_t sep = path.find("://");
  if (sep == std::string_view::npos || sep == 0 ||
      path.substr(0, sep).find_first_of("/.") != std::string_view::npos) {
    u.key = std::string(path);
    return u;
  }
  u.scheme = std::string(path.substr(0, sep));
  for (char& c : u.scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view rest = path.substr(sep + 3);
  if (u.scheme == "file") {
    u.key = std::string(rest);
    return u;
  }
  const size_t slash = rest.find('/');
  u.authority = std::string(rest.substr(0, slash));
  u.key = slash == std::string_view::npos ? "" : std::string(rest.substr(slash + 1));
  return u;
}

bool IsRemotePath(std::string_view path) {
  const Url u = ParseUrl(path);
  return !u.scheme.empty() && u.scheme != "file";
}

Result<FileSystem*> FileSystemForPath(std::string_view path) {
  const Url u = ParseUrl(path);
  if (u.scheme.empty() || u.scheme == "file") return internal::LocalFileSystemInstance();
  if (u.scheme == "s3") return internal::S3FileSystemInstance();
  if (u.scheme == "http" || u.scheme == "https") return internal::HttpFileSystemInstance();
  if (u.scheme == "gs") return internal::GcsFileSystemForEnvironment();
  Fallback fallback;
  {
    std::lock_guard lock(fallback_mu);
    fallback = FallbackSlot();
  }
  // Outside the lock: the predicate may take the GIL (Python's fsspec bridge).
  if (fallback.fs != nullptr && fallback.handles(u.scheme)) return fallback.fs;
  return InvalidArgumentError("unsupported URL scheme '" + u.scheme + "://' in '" +
                              std::string(path) +
                              "' (supported: s3://, gs://, http://, https://, "
                              "local paths, and from Python any scheme fsspec knows)");
}

void SetFallbackFileSystem(std::function<bool(const std::string& scheme)> handles,
                           std::shared_ptr<FileSystem> fs) {
  std::lock_guard lock(fallback_mu);
  FallbackSlot().fs = fs.get();
  FallbackSlot().handles = fs == nullptr ? nullptr : std::move(handles);
  if (fs != nullptr) KeptFileSystems().push_back(std::move(fs));
}

std::unique_ptr<RandomAccessFile> NewRangedRandomAccessFile(std::string url, uint64_t size,
                                                            ByteRangeReader read) {
  return std::make_unique<internal::RemoteRandomAccessFile>(std::move(url), size, std::move(read),
                                                            GetRemoteOptions());
}

Result<FileInfo> StatPath(const std::string& path) {
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(path));
  return fs->Stat(path);
}

Status FileSystem::CompleteUpload(const PendingUpload& upload) {
  return UnimplementedError("'" + upload.url +
                            "': this store has no multipart uploads to complete");
}

Status FileSystem::AbortUpload(const std::string& url, const std::string&) {
  return UnimplementedError("'" + url + "': this store has no multipart uploads to abort");
}

Result<std::vector<PendingUpload>> FileSystem::ListUploads(const std::string& prefix) {
  return UnimplementedError("'" + prefix + "': this store has no multipart uploads to list");
}

Status CompletePendingUpload(const PendingUpload& upload) {
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(upload.url));
  return fs->CompleteUpload(upload);
}

Status AbortPendingUpload(const std::string& url, const std::string& upload_id) {
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(url));
  return fs->AbortUpload(url, upload_id);
}

Result<std::vector<PendingUpload>> ListPendingUploads(const std::string& prefix) {
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(prefix));
  return fs->ListUploads(prefix);
}

Status DeletePath(const std::string& path) {
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(path));
  return fs->Delete(path);
}

Result<std::vector<std::string>> ListPath(const std::string& prefix) {
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(prefix));
  return fs->ListPrefix(prefix);
}

Result<std::vector<std::string>> GlobPaths(const std::string& pattern) {
  if (!IsGlobPattern(pattern)) {
    RF_ASSIGN_OR_RETURN(FileInfo info, StatPath(pattern));
    (void)info;
    return std::vector<std::string>{pattern};
  }
  return ExpandGlob(pattern);
}

namespace internal {
FileSystem* LocalFileSystemInstance() {
  static FileSystem* fs = new LocalFileSystem();
  return fs;
}
}  // namespace internal

}  // namespace recordflow::io
