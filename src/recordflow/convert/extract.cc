// TFRecords of image Examples -> image files in class folders, and a labels CSV.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "json_internal.h"
#include "recordflow/convert/convert.h"
#include "recordflow/core/utf8.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/image/image.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::convert {
namespace fs = std::filesystem;

namespace {

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, "cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The extension of files holding `format`'s bytes ("" for kUnknown).
std::string ExtensionOf(image::ImageFormat format) {
  if (format == image::ImageFormat::kJpeg) return "jpg";
  return Lower(image::ImageFormatName(format));
}

// The extension for an image/format feature value, when the bytes themselves say nothing.
std::string ExtensionForFormatName(std::string_view format) {
  const std::string lower = Lower(format);
  if (lower == "jpeg" || lower == "jpg") return "jpg";
  return lower.empty() ? "bin" : SanitizePathComponent(lower, "bin");
}

bool IsImageExtension(const std::string& ext) {
  static const std::unordered_set<std::string> kKnown = {"jpg", "jpeg", "jpe",  "jfif", "png",
                                                         "gif", "bmp",  "webp", "tif",  "tiff"};
  return kKnown.count(ext) != 0;
}

// `name` with the extension that matches the bytes: an image extension naming another format
// ("x.png" holding JPEG bytes) is replaced; a name without an image extension is kept.
std::string WithExtensionFor(const std::string& name, image::ImageFormat format) {
  const std::string ext = ExtensionOf(format);
  if (ext.empty()) return name;
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && dot != 0) {
    const std::string current = Lower(std::string_view(name).substr(dot + 1));
    if (current == ext) return name;
    if (ext == "jpg" && (current == "jpeg" || current == "jpe" || current == "jfif")) return name;
    if (IsImageExtension(current)) return name.substr(0, dot + 1) + ext;
  }
  return name;
}

// "name.jpg" -> "name-2.jpg".
std::string WithSuffix(const std::string& name, uint64_t n) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return name + "-" + std::to_string(n);
  return name.substr(0, dot) + "-" + std::to_string(n) + name.substr(dot);
}

// The folders and file name an image/filename value keeps under its class folder. A relative
// path ("n01/a/x.jpg") keeps its folders; an absolute one or one with ".." keeps only its last
// component (nothing stored in a record can reach outside OUT_DIR). Every part is one
// sanitized component.
std::vector<std::string> SafeRelativeParts(std::string_view stored, const std::string& fallback) {
  std::vector<std::string_view> raw;
  bool escapes = !stored.empty() && (stored[0] == '/' || stored[0] == '\\');
  size_t start = 0;
  while (start <= stored.size()) {
    size_t end = stored.find_first_of("/\\", start);
    if (end == std::string_view::npos) end = stored.size();
    const std::string_view part = stored.substr(start, end - start);
    if (part == "..") escapes = true;
    if (!part.empty() && part != ".") raw.push_back(part);
    start = end + 1;
  }
  constexpr size_t kMaxDepth = 32;
  if (escapes || raw.size() > kMaxDepth) {
    return {SanitizePathComponent(stored, fallback)};
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i + 1 < raw.size(); ++i) parts.push_back(SanitizePathComponent(raw[i], "_"));
  parts.push_back(raw.empty() ? fallback : SanitizePathComponent(raw.back(), fallback));
  return parts;
}

// Directory file descriptors of OUT_DIR's sub-folders, opened without following symlinks at any
// level, so that a symlink planted in OUT_DIR cannot carry a write outside it.
class DirCache {
 public:
  DirCache(int root_fd, std::string root) : root_fd_(root_fd), root_(std::move(root)) {}
  ~DirCache() { Clear(); }
  DirCache(const DirCache&) = delete;
  DirCache& operator=(const DirCache&) = delete;

  // The fd of root/dirs[0]/.../dirs[n-1], created as needed.
  Result<int> Open(const std::vector<std::string>& dirs, size_t n) {
    std::string rel;
    int fd = root_fd_;
    for (size_t i = 0; i < n; ++i) {
      rel += (i ? "/" : "") + dirs[i];
      auto it = fds_.find(rel);
      if (it != fds_.end()) {
        fd = it->second;
        continue;
      }
      if (::mkdirat(fd, dirs[i].c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoToStatus(errno, "cannot create", root_ + rel);
      }
      const int sub =
          ::openat(fd, dirs[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        const int err = errno;
        struct stat st;
        if (::fstatat(fd, dirs[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
          return FailedPreconditionError(
              "'" + root_ + rel + "' is a symlink; extract writes only inside '" + root_ + "'");
        }
        if (err == ENOTDIR) {
          return FailedPreconditionError("'" + root_ + rel + "' is not a folder");
        }
        return ErrnoToStatus(err, "cannot open", root_ + rel);
      }
      if (fds_.size() >= kMaxOpen) Clear();
      fds_.emplace(rel, sub);
      fd = sub;
    }
    return fd;
  }

 private:
  static constexpr size_t kMaxOpen = 256;
  void Clear() {
    for (auto& [rel, fd] : fds_) ::close(fd);
    fds_.clear();
  }
  int root_fd_;
  std::string root_;
  std::unordered_map<std::string, int> fds_;
};

// Writes `data` to a new temporary file in `dir_fd` (O_EXCL: never an existing file, so never
// through a planted hard link or symlink). Returns its name; on error nothing is left behind.
Result<std::string> WriteTemp(int dir_fd, const std::string& dir_display, std::string_view data) {
  static std::atomic<uint64_t> counter{0};
  std::string name;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    name = ".rf-extract-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp";
    fd = ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST) return ErrnoToStatus(errno, "cannot create", dir_display + name);
  }
  if (fd < 0) return ErrnoToStatus(EEXIST, "cannot create", dir_display + name);
  Status written = WriteAll(fd, data, dir_display + name);
  if (::close(fd) != 0 && written.ok())
    written = ErrnoToStatus(errno, "cannot close", dir_display + name);
  if (!written.ok()) {
    ::unlinkat(dir_fd, name.c_str(), 0);
    return written;
  }
  return name;
}

enum class Published { kDone, kTaken };

// Gives the temporary file `tmp` its final `name`. Without `replace`, an existing entry is
// never touched (kTaken). With it, an existing regular file's entry is replaced by the rename
// (its other hard links keep their bytes); a symlink or folder there is kTaken.
Result<Published> Publish(int dir_fd, const std::string& dir_display, const std::string& tmp,
                          const std::string& name, bool replace) {
  if (replace) {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
      return Published::kTaken;
    }
    if (::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
      return ErrnoToStatus(errno, "cannot rename to", dir_display + name);
    }
    return Published::kDone;
  }
  if (::renameat2(dir_fd, tmp.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE) == 0) {
    return Published::kDone;
  }
  if (errno == EEXIST) return Published::kTaken;
  if (errno != EINVAL && errno != ENOSYS) {
    return ErrnoToStatus(errno, "cannot rename to", dir_display + name);
  }
  // File systems without RENAME_NOREPLACE: link(2) also refuses an existing name.
  if (::linkat(dir_fd, tmp.c_str(), dir_fd, name.c_str(), 0) != 0) {
    if (errno == EEXIST) return Published::kTaken;
    return ErrnoToStatus(errno, "cannot link to", dir_display + name);
  }
  ::unlinkat(dir_fd, tmp.c_str(), 0);
  return Published::kDone;
}

}  // namespace

std::string SanitizePathComponent(std::string_view name, std::string_view fallback) {
  const size_t slash = name.find_last_of("/\\");
  if (slash != std::string_view::npos) name = name.substr(slash + 1);
  std::string out;
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7F || c == ':') {
      out += '_';
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(name, i);
    if (len == 0) {
      out += '_';
      ++i;
      continue;
    }
    if (out.size() + len > 200) break;
    out.append(name.substr(i, len));
    i += len;
  }
  if (out.empty() || out == "." || out == "..") return std::string(fallback);
  return out;
}

std::string ExtractSummary::ToJson() const {
  return JsonWriter(JsonLayout::kSpaced)
      .AddUint("records", records)
      .AddUint("images", images)
      .AddUint("bytes", bytes)
      .AddUint("skipped_count", skipped.size())
      .AddRaw("skipped", internal::SkippedJson(skipped, "record"))
      .str();
}

namespace {

// Where extracted images go: `Publish` stores `bytes` as DIR_REL + the first free name of
// `name`, name-1, name-2, ... (taken: written by this run, or already there without overwrite)
// and returns the relative path it used.
class ImageSink {
 public:
  virtual ~ImageSink() = default;
  virtual Result<std::string> Publish(const std::vector<std::string>& parts,
                                      const std::string& bytes) = 0;

 protected:
  // Relative paths written by this run, and per wanted path the next -N suffix to try: each
  // record tries O(1) names on average, however many records share a name.
  std::unordered_set<std::string> used_;
  std::unordered_map<std::string, uint64_t> next_suffix_;
};

std::string DirRel(const std::vector<std::string>& parts) {
  std::string dir_rel;
  for (size_t i = 0; i + 1 < parts.size(); ++i) dir_rel += parts[i] + "/";
  return dir_rel;
}

// A local folder: files are written under temporary names through directory descriptors (no
// path is resolved twice, so a symlink swapped in mid-run is never followed) and renamed.
class LocalImageSink final : public ImageSink {
 public:
  static Result<std::unique_ptr<LocalImageSink>> Open(const std::string& out_dir,
                                                      const ExtractOptions& options) {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) return ErrnoToStatus(ec.value(), "cannot create", out_dir);
    const int root_fd =
        ::open(out_dir.empty() ? "." : out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0) return ErrnoToStatus(errno, "cannot open", out_dir);
    const std::string root = out_dir.empty() || out_dir.back() == '/' ? out_dir : out_dir + "/";
    return std::unique_ptr<LocalImageSink>(new LocalImageSink(root_fd, root, options.overwrite));
  }
  ~LocalImageSink() override {
    dirs_.reset();
    ::close(root_fd_);
  }

  Result<std::string> Publish(const std::vector<std::string>& parts,
                              const std::string& bytes) override {
    RF_ASSIGN_OR_RETURN(const int dir_fd, dirs_->Open(parts, parts.size() - 1));
    const std::string dir_rel = DirRel(parts);
    const std::string& name = parts.back();
    RF_ASSIGN_OR_RETURN(std::string tmp, WriteTemp(dir_fd, root_ + dir_rel, bytes));
    const std::string wanted = dir_rel + name;
    uint64_t& n = next_suffix_[wanted];
    std::string rel;
    while (true) {
      const std::string candidate = n == 0 ? name : WithSuffix(name, n);
      rel = dir_rel + candidate;
      ++n;
      if (used_.count(rel) != 0) continue;
      Result<Published> published =
          convert::Publish(dir_fd, root_ + dir_rel, tmp, candidate, overwrite_);
      if (!published.ok()) {
        ::unlinkat(dir_fd, tmp.c_str(), 0);
        return published.status();
      }
      if (*published == Published::kDone) break;
    }
    used_.insert(rel);
    return rel;
  }

 private:
  LocalImageSink(int root_fd, std::string root, bool overwrite)
      : root_fd_(root_fd),
        root_(std::move(root)),
        overwrite_(overwrite),
        dirs_(std::make_unique<DirCache>(root_fd_, root_)) {}
  int root_fd_;
  std::string root_;
  bool overwrite_;
  std::unique_ptr<DirCache> dirs_;
};

// A key prefix in a bucket: each image is one atomic upload; the keys already there are
// listed once, so that without overwrite an existing object is never replaced.
class BucketImageSink final : public ImageSink {
 public:
  static Result<std::unique_ptr<BucketImageSink>> Open(std::string out_dir,
                                                       const ExtractOptions& options) {
    while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
    RF_ASSIGN_OR_RETURN(io::FileSystem * store, io::FileSystemForPath(out_dir));
    const std::string root = out_dir + "/";
    auto sink = std::unique_ptr<BucketImageSink>(new BucketImageSink(root, options.overwrite));
    if (!options.overwrite) {
      RF_ASSIGN_OR_RETURN(const std::vector<std::string> keys, store->ListPrefix(root));
      for (const std::string& key : keys) sink->existing_.insert(key.substr(root.size()));
    }
    return sink;
  }

  Result<std::string> Publish(const std::vector<std::string>& parts,
                              const std::string& bytes) override {
    const std::string dir_rel = DirRel(parts);
    const std::string& name = parts.back();
    uint64_t& n = next_suffix_[dir_rel + name];
    std::string rel;
    while (true) {
      const std::string candidate = n == 0 ? name : WithSuffix(name, n);
      rel = dir_rel + candidate;
      ++n;
      if (used_.count(rel) == 0 && (overwrite_ || existing_.count(rel) == 0)) break;
    }
    RF_RETURN_IF_ERROR(io::WriteStringToFileAtomic(root_ + rel, bytes));
    used_.insert(rel);
    return rel;
  }

  const std::string& root() const { return root_; }

 private:
  BucketImageSink(std::string root, bool overwrite)
      : root_(std::move(root)), overwrite_(overwrite) {}
  std::string root_;
  bool overwrite_;
  std::unordered_set<std::string> existing_;
};

}  // namespace

Result<ExtractSummary> Extract(const std::vector<std::string>& files, const std::string& out_dir,
                               const ExtractOptions& options) {
  std::unique_ptr<ImageSink> sink;
  std::string root;
  if (io::IsRemotePath(out_dir)) {
    RF_ASSIGN_OR_RETURN(auto bucket, BucketImageSink::Open(out_dir, options));
    root = bucket->root();
    sink = std::move(bucket);
  } else {
    RF_ASSIGN_OR_RETURN(sink, LocalImageSink::Open(out_dir, options));
    root = out_dir.empty() || out_dir.back() == '/' ? out_dir : out_dir + "/";
  }
  const std::string csv_name = SanitizePathComponent(options.labels_csv, "labels.csv");
  ExtractSummary summary;
  std::string csv = "path,label,class\n";
  for (const std::string& file : files) {
    format::RecordReaderOptions reader_options;
    reader_options.compression = options.compression;
    RF_ASSIGN_OR_RETURN(auto reader, format::RecordReader::Open(file, reader_options));
    const std::string stem = SanitizePathComponent(fs::path(file).stem().string(), "records");
    for (uint64_t index = 0;; ++index) {
      std::span<const std::byte> record;
      RF_ASSIGN_OR_RETURN(bool more, reader->ReadRecord(&record));
      if (!more) break;
      ++summary.records;
      const std::string where = file + " record " + std::to_string(index);
      Result<example::Features> features = example::ParseExample(record);
      if (!features.ok()) {
        summary.skipped.push_back({where, "not an Example: " + features.status().message()});
        continue;
      }
      auto get_bytes = [&](const char* key) -> const std::vector<std::string>* {
        auto it = features->find(key);
        if (it == features->end() || it->second.kind != example::ListKind::kBytes ||
            it->second.bytes.empty()) {
          return nullptr;
        }
        return &it->second.bytes;
      };
      const auto* encoded = get_bytes("image/encoded");
      if (encoded == nullptr) {
        summary.skipped.push_back({where, "no image/encoded bytes"});
        continue;
      }
      const std::string& bytes = (*encoded)[0];
      std::vector<int64_t> labels;
      if (auto it = features->find("image/class/label");
          it != features->end() && it->second.kind == example::ListKind::kInt64) {
        labels = it->second.int64s;
      }
      const auto* texts = get_bytes("image/class/text");
      std::string class_name;
      if (texts != nullptr) {
        class_name = (*texts)[0];
      } else if (!labels.empty()) {
        class_name = std::to_string(labels[0]);
      } else {
        class_name = "unlabeled";
      }
      std::string dir = SanitizePathComponent(class_name, "unnamed");
      // The labels CSV keeps its name: a class of that name gets a folder beside it.
      if (dir == csv_name) dir += "_class";
      // The extension follows the bytes (they are written as stored, never transcoded); only
      // when they are no image format we know does image/format decide.
      const image::ImageFormat sniffed =
          image::SniffFormat(std::as_bytes(std::span(bytes.data(), bytes.size())));
      const auto* format = get_bytes("image/format");
      const std::string fallback = stem + "-" + std::to_string(index) + "." +
                                   (sniffed != image::ImageFormat::kUnknown
                                        ? ExtensionOf(sniffed)
                                        : ExtensionForFormatName(format ? (*format)[0] : ""));
      const auto* filename = get_bytes("image/filename");
      std::vector<std::string> parts = filename ? SafeRelativeParts((*filename)[0], fallback)
                                                : std::vector<std::string>{fallback};
      parts.back() = WithExtensionFor(parts.back(), sniffed);
      parts.insert(parts.begin(), dir);
      RF_ASSIGN_OR_RETURN(const std::string rel, sink->Publish(parts, bytes));
      ++summary.images;
      summary.bytes += bytes.size();
      std::string label_text, class_text;
      for (size_t i = 0; i < labels.size(); ++i)
        label_text += (i ? ";" : "") + std::to_string(labels[i]);
      if (texts != nullptr) {
        for (size_t i = 0; i < texts->size(); ++i) class_text += (i ? ";" : "") + (*texts)[i];
      }
      csv += CsvField(rel) + "," + CsvField(label_text) + "," + CsvField(class_text) + "\n";
    }
  }
  RF_RETURN_IF_ERROR(io::WriteStringToFileAtomic(root + csv_name, csv));
  return summary;
}

}  // namespace recordflow::convert
