#include "recordflow/io/shard_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <vector>

#include "local_file_internal.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"
#include "shard_cache_internal.h"

namespace recordflow::io {
namespace {

constexpr const char* kEntrySuffix = ".shard";
constexpr int kFillAttempts = 3;  // an object that keeps changing while copied: give up

struct Counters {
  std::atomic<uint64_t> hits{0}, misses{0}, bytes_fetched{0}, evictions{0}, invalidated{0},
      bypassed{0};
};
Counters& Stats() {
  static auto* c = new Counters();
  return *c;
}

std::mutex cache_mu;
ShardCacheOptions& Current() {
  static auto* o = [] {
    auto* opts = new ShardCacheOptions();
    if (const char* dir = std::getenv("RECORDFLOW_CACHE_DIR"); dir != nullptr) opts->dir = dir;
    if (const char* size = std::getenv("RECORDFLOW_CACHE_SIZE"); size != nullptr && *size) {
      Result<uint64_t> bytes = ParseByteSize(size);
      // A bad value must not silently mean "unbounded": the cache stays off and opens say why.
      if (bytes.ok()) {
        opts->max_bytes = *bytes;
      } else {
        opts->max_bytes = 0;
      }
    }
    return opts;
  }();
  return *o;
}

std::string Hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// Closes a descriptor on scope exit; flock locks go with it.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// An exclusive flock on `path` (created when missing), held while the result lives. Blocks
// until the lock is free: the holder is another thread or process filling the same entry.
Result<std::unique_ptr<Fd>> LockFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, "cannot open the cache lock file", path);
  auto owned = std::make_unique<Fd>(fd);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, "cannot lock the cache lock file", path);
  }
  return owned;
}

Status MakeDirs(const std::string& dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, "cannot create the cache directory", partial);
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoToStatus(errno, "cannot stat", dir);
  if (!S_ISDIR(st.st_mode)) {
    return InvalidArgumentError("cache directory '" + dir + "' is not a directory");
  }
  return Status::OK();
}

// The local copy, read under the URL's name so that errors and the pipeline see the URL.
class CachedFile final : public RandomAccessFile {
 public:
  CachedFile(std::string url, std::unique_ptr<RandomAccessFile> local)
      : RandomAccessFile(std::move(url), local->size()), local_(std::move(local)) {}
  Result<size_t> ReadAt(uint64_t offset, std::span<std::byte> dst) const override {
    return local_->ReadAt(offset, dst);
  }
  void AdviseSequential() const override { local_->AdviseSequential(); }

 private:
  std::unique_ptr<RandomAccessFile> local_;
};

struct Entry {
  std::string name;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
};

bool IsEntryName(const std::string& name) {
  return name.size() > std::strlen(kEntrySuffix) && name.ends_with(kEntrySuffix) &&
         name.find(".tmp-") == std::string::npos;
}

// True for a temporary file whose writer process is gone (a crash mid-fill).
bool IsOrphanTemp(const std::string& name) {
  const size_t at = name.find(".tmp-");
  if (at == std::string::npos) return false;
  const int pid = std::atoi(name.c_str() + at + 5);
  return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
}

class ShardCache {
 public:
  explicit ShardCache(ShardCacheOptions options) : options_(std::move(options)) {}

  Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& url) {
    RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(url));
    Status last;
    for (int attempt = 0; attempt < kFillAttempts; ++attempt) {
      RF_ASSIGN_OR_RETURN(FileInfo info, fs->Stat(url));
      if (info.is_directory) return fs->OpenRandomAccess(url);  // its error names the prefix
      if (info.etag.empty() || info.size > options_.max_bytes) {
        Stats().bypassed++;
        return fs->OpenRandomAccess(url);
      }
      const std::string key = Hex64(Fnv1a(url));
      const std::string entry = options_.dir + "/" + key + "-" + Hex64(Fnv1a(info.etag)) + "-" +
                                std::to_string(info.size) + kEntrySuffix;
      RF_ASSIGN_OR_RETURN(auto hit, TryHit(url, entry, info.size));
      if (hit) return hit;
      RF_ASSIGN_OR_RETURN(auto lock, LockFile(options_.dir + "/" + key + ".lock"));
      // Another process (or thread) may have filled it while this one waited for the lock.
      RF_ASSIGN_OR_RETURN(hit, TryHit(url, entry, info.size));
      if (hit) return hit;
      Stats().misses++;
      Status filled = Fill(*fs, url, info, key, entry);
      if (filled.ok()) {
        RF_ASSIGN_OR_RETURN(hit, TryHit(url, entry, info.size, /*count=*/false));
        if (hit) return hit;
        last = DataLossError("cache entry for '" + url + "' vanished right after it was filled");
        continue;
      }
      if (filled.code() != StatusCode::kFailedPrecondition) return filled;
      last = filled;  // the object changed while it was copied: look again
    }
    return last;
  }

 private:
  // The entry opened when it is complete; null when absent (a wrong-sized one is removed).
  Result<std::unique_ptr<RandomAccessFile>> TryHit(const std::string& url, const std::string& entry,
                                                   uint64_t size, bool count = true) {
    struct stat st;
    if (::stat(entry.c_str(), &st) != 0) {
      if (errno == ENOENT) return std::unique_ptr<RandomAccessFile>();
      return ErrnoToStatus(errno, "cannot stat cache entry", entry);
    }
    if (static_cast<uint64_t>(st.st_size) != size) {
      // Truncated or grown on disk (a full disk, someone else's hands): never served.
      Stats().invalidated++;
      ::unlink(entry.c_str());
      return std::unique_ptr<RandomAccessFile>();
    }
    RF_ASSIGN_OR_RETURN(auto local, OpenLocalRandomAccessFile(entry));
    if (local->size() != size) {  // replaced between stat and open
      return std::unique_ptr<RandomAccessFile>();
    }
    internal::MarkUsed(entry);
    if (count) Stats().hits++;
    return std::unique_ptr<RandomAccessFile>(std::make_unique<CachedFile>(url, std::move(local)));
  }

  Status Fill(FileSystem& fs, const std::string& url, const FileInfo& info, const std::string& key,
              const std::string& entry) {
    RF_ASSIGN_OR_RETURN(auto remote, fs.OpenRandomAccess(url));
    const std::string changed =
        "object '" + url + "' changed while it was copied into the cache; not committed";
    if (remote->size() != info.size) return FailedPreconditionError(changed);
    std::random_device rd;
    char suffix[48];
    std::snprintf(suffix, sizeof(suffix), ".tmp-%d-%08x", static_cast<int>(::getpid()), rd());
    const std::string temp = entry + suffix;
    Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) return ErrnoToStatus(errno, "cannot create cache file", temp);
    struct Remover {
      const std::string& path;
      bool keep = false;
      ~Remover() {
        if (!keep) ::unlink(path.c_str());
      }
    } remover{temp};
    remote->AdviseSequential();
    std::vector<std::byte> buf(4 << 20);
    uint64_t offset = 0;
    while (offset < info.size) {
      RF_ASSIGN_OR_RETURN(size_t got, remote->ReadAt(offset, buf));
      if (got == 0) break;
      size_t written = 0;
      while (written < got) {
        const ssize_t w = ::write(fd.get(), buf.data() + written, got - written);
        if (w < 0) {
          if (errno == EINTR) continue;
          return ErrnoToStatus(errno, "cannot write cache file", temp);
        }
        written += static_cast<size_t>(w);
      }
      offset += got;
      Stats().bytes_fetched += got;
    }
    if (offset != info.size) return FailedPreconditionError(changed);
    if (::fsync(fd.get()) != 0) return ErrnoToStatus(errno, "cannot sync cache file", temp);
    // The GETs were pinned to the ETag the first of them saw; this pins that one to the ETag
    // the entry is named by.
    RF_ASSIGN_OR_RETURN(FileInfo after, fs.Stat(url));
    if (after.etag != info.etag || after.size != info.size) {
      return FailedPreconditionError(changed);
    }
    RF_ASSIGN_OR_RETURN(auto dir_lock, LockFile(options_.dir + "/.evict.lock"));
    RF_RETURN_IF_ERROR(MakeRoom(info.size, key, entry));
    if (::rename(temp.c_str(), entry.c_str()) != 0) {
      return ErrnoToStatus(errno, "cannot commit cache file", entry);
    }
    remover.keep = true;
    internal::MarkUsed(entry);
    Fd dir(::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() >= 0) ::fsync(dir.get());
    return Status::OK();
  }

  // Under the directory lock: removes other versions of this URL, orphaned temporary files,
  // and least recently used entries until `incoming` more bytes fit under the limit.
  Status MakeRoom(uint64_t incoming, const std::string& key, const std::string& entry) {
    DIR* d = ::opendir(options_.dir.c_str());
    if (d == nullptr) return ErrnoToStatus(errno, "cannot list the cache directory", options_.dir);
    std::vector<Entry> entries;
    uint64_t total = 0;
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      const std::string path = options_.dir + "/" + name;
      if (IsOrphanTemp(name)) {
        ::unlink(path.c_str());
        continue;
      }
      if (!IsEntryName(name) || path == entry) continue;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) continue;
      if (name.starts_with(key + "-")) {  // an older version of the same object
        if (::unlink(path.c_str()) == 0) Stats().invalidated++;
        continue;
      }
      entries.push_back({path, static_cast<uint64_t>(st.st_size),
                         st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec});
      total += static_cast<uint64_t>(st.st_size);
    }
    ::closedir(d);
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.mtime_ns < b.mtime_ns; });
    for (const Entry& e : entries) {
      if (total + incoming <= options_.max_bytes) break;
      if (::unlink(e.name.c_str()) == 0 || errno == ENOENT) {
        total -= e.size;
        Stats().evictions++;
      }
    }
    return Status::OK();
  }

  ShardCacheOptions options_;
};

}  // namespace

Result<uint64_t> ParseByteSize(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  std::string unit(end == nullptr ? "" : end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (!unit.empty() && (unit.back() == 'i')) unit.pop_back();
  double scale = 1;
  if (unit.size() == 1) {
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
      case 'K':
        scale = 1024.0;
        break;
      case 'M':
        scale = 1024.0 * 1024;
        break;
      case 'G':
        scale = 1024.0 * 1024 * 1024;
        break;
      case 'T':
        scale = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        scale = 0;
    }
  } else if (!unit.empty()) {
    scale = 0;
  }
  if (end == text.c_str() || errno != 0 || scale == 0 || !std::isfinite(v) || v < 0 ||
      v * scale >= 1.8e19) {
    return InvalidArgumentError("not a byte size: '" + text +
                                "' (bytes, or a number with K, M, G or T)");
  }
  return static_cast<uint64_t>(v * scale);
}

Status SetShardCache(const ShardCacheOptions& options) {
  if (!options.dir.empty()) {
    if (options.max_bytes == 0) {
      return InvalidArgumentError("cache size for '" + options.dir + "' must be above 0");
    }
    RF_RETURN_IF_ERROR(MakeDirs(options.dir));
  }
  std::lock_guard lock(cache_mu);
  Current() = options;
  return Status::OK();
}

ShardCacheOptions GetShardCache() {
  std::lock_guard lock(cache_mu);
  return Current();
}

ShardCacheStats GetShardCacheStats() {
  const Counters& c = Stats();
  ShardCacheStats s;
  s.hits = c.hits.load();
  s.misses = c.misses.load();
  s.bytes_fetched = c.bytes_fetched.load();
  s.evictions = c.evictions.load();
  s.invalidated = c.invalidated.load();
  s.bypassed = c.bypassed.load();
  return s;
}

namespace internal {

// The last use, for LRU, as the entry's mtime: the clock's own nanoseconds, strictly rising in
// this process. (A write or utimensat(nullptr) stamps the kernel's coarse time, one tick of
// several milliseconds: a commit and a hit inside one tick would tie, and eviction could take
// the entry just used.)
void MarkUsed(const std::string& entry) {
  static std::atomic<int64_t> last_ns{0};
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t ns_now = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  int64_t prev = last_ns.load();
  int64_t ns = std::max(ns_now, prev + 1);
  while (!last_ns.compare_exchange_weak(prev, ns)) ns = std::max(ns_now, prev + 1);
  const timespec t{ns / 1'000'000'000, ns % 1'000'000'000};
  const timespec times[2] = {t, t};
  ::utimensat(AT_FDCWD, entry.c_str(), times, 0);
}

bool ShardCacheEnabled() {
  std::lock_guard lock(cache_mu);
  return !Current().dir.empty();
}

Result<std::unique_ptr<RandomAccessFile>> OpenThroughShardCache(const std::string& url) {
  ShardCacheOptions options = GetShardCache();
  if (options.max_bytes == 0) {
    return InvalidArgumentError("RECORDFLOW_CACHE_SIZE='" +
                                std::string(std::getenv("RECORDFLOW_CACHE_SIZE") != nullptr
                                                ? std::getenv("RECORDFLOW_CACHE_SIZE")
                                                : "") +
                                "' is not a byte size above 0 (bytes, or with K, M, G or T)");
  }
  RF_RETURN_IF_ERROR(MakeDirs(options.dir));
  return ShardCache(std::move(options)).Open(url);
}

}  // namespace internal
}  // namespace recordflow::io
