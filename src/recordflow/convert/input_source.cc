// The sources of Convert's inputs: a path (image folder or manifest) and spooled items.
#include "recordflow/convert/input_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "convert_internal.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::convert {
namespace fs = std::filesystem;

namespace {

bool IsManifestName(std::string_view s) {
  return internal::EndsWithCaseless(s, ".csv") || internal::EndsWithCaseless(s, ".jsonl") ||
         internal::EndsWithCaseless(s, ".ndjson") || internal::EndsWithCaseless(s, ".json");
}

class PathSource final : public InputSource {
 public:
  explicit PathSource(std::string src) : src_(std::move(src)) {}

  std::string Name() const override { return src_; }

  Status CheckDestination(const std::string& dst) const override {
    if (io::IsRemotePath(src_)) {
      if (IsManifestName(src_)) return Status();
      // A bucket prefix: the same rule, on key prefixes.
      std::string root = src_;
      while (root.size() > 1 && root.back() == '/') root.pop_back();
      if (dst == root || dst.compare(0, root.size() + 1, root + "/") == 0) {
        return InvalidArgumentError("output prefix '" + dst + "' is inside the image folder '" +
                                    src_ + "'; choose one outside it");
      }
      return Status();
    }
    if (io::IsRemotePath(dst)) return Status();
    std::error_code ec;
    if (!fs::is_directory(src_, ec)) return Status();
    // Shards inside the image folder would become a class of the next run.
    const fs::path s = fs::weakly_canonical(src_, ec), d = fs::weakly_canonical(dst, ec);
    auto [s_end, d_it] = std::mismatch(s.begin(), s.end(), d.begin(), d.end());
    if (!ec && s_end == s.end()) {
      return InvalidArgumentError("output folder '" + dst + "' is inside the image folder '" +
                                  src_ + "'; choose one outside it");
    }
    return Status();
  }

  Result<InputListing> List(const ConvertOptions& options) override {
    // A URL is listed by ListImageFolder as a key prefix, or read as a manifest by its name.
    if (io::IsRemotePath(src_)) {
      return IsManifestName(src_) ? ReadManifest(src_, options) : ListImageFolder(src_);
    }
    std::error_code ec;
    if (fs::is_regular_file(src_, ec) && IsManifestName(src_)) return ReadManifest(src_, options);
    return ListImageFolder(src_);
  }

  Result<LoadedInput> Load(const InputItem& item, const ConvertOptions& options) const override {
    RF_ASSIGN_OR_RETURN(std::string bytes, io::ReadFileToString(item.path, options.max_file_size));
    LoadedInput loaded;
    loaded.image = std::move(bytes);
    return loaded;
  }

 private:
  std::string src_;
};

}  // namespace

std::unique_ptr<InputSource> MakePathSource(std::string src) {
  return std::make_unique<PathSource>(std::move(src));
}

Result<std::unique_ptr<SpooledSource>> SpooledSource::Create(
    std::string spool_path, std::string name, std::optional<std::vector<std::string>> class_names) {
  const int fd = ::open(spool_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoToStatus(errno, "cannot create the spool file", spool_path);
  std::unique_ptr<SpooledSource> source(
      new SpooledSource(fd, std::move(spool_path), std::move(name)));
  source->listing_.named_classes = class_names.has_value();
  if (class_names) source->listing_.class_names = std::move(*class_names);
  return source;
}

SpooledSource::SpooledSource(int fd, std::string path, std::string name)
    : fd_(fd), path_(std::move(path)), name_(std::move(name)) {}

SpooledSource::~SpooledSource() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

Status SpooledSource::Add(std::optional<std::string_view> image, std::vector<int64_t> labels,
                          std::string_view extra, bool transcoded) {
  const uint64_t index = entries_.size();
  if (extra.size() > UINT32_MAX) {
    return InvalidArgumentError("item " + std::to_string(index) + ": features over 4 GiB");
  }
  // Checked now, so that a bad row fails where the caller made it, not mid-write.
  Result<example::Features> parsed =
      example::ParseExample(std::as_bytes(std::span(extra.data(), extra.size())));
  if (!parsed.ok()) return parsed.status().WithContext("item " + std::to_string(index));
  Entry entry;
  entry.offset = end_;
  entry.extra_size = static_cast<uint32_t>(extra.size());
  entry.has_image = image.has_value();
  entry.transcoded = transcoded;
  for (std::string_view part : {extra, image.value_or(std::string_view())}) {
    size_t written = 0;
    while (written < part.size()) {
      const ssize_t n = ::pwrite(fd_, part.data() + written, part.size() - written,
                                 static_cast<off_t>(end_ + written));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoToStatus(errno, "cannot write the spool file", path_);
      written += static_cast<size_t>(n);
    }
    end_ += part.size();
  }
  InputItem item;
  item.path = "item " + std::to_string(index);
  item.labels = std::move(labels);
  item.size = end_ - entry.offset;
  item.source_index = index;
  listing_.items.push_back(std::move(item));
  entries_.push_back(entry);
  return Status();
}

Result<InputListing> SpooledSource::List(const ConvertOptions& options) {
  // Convert lists once; the items stay here for Load (only their spool places are needed).
  InputListing listing = listing_;
  return listing;
}

Result<LoadedInput> SpooledSource::Load(const InputItem& item,
                                        const ConvertOptions& options) const {
  if (item.source_index >= entries_.size()) {
    return InvalidArgumentError(item.path + " is not in the spool '" + path_ + "'");
  }
  const Entry& entry = entries_[item.source_index];
  std::string bytes(item.size, '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done,
                              static_cast<off_t>(entry.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "cannot read the spool file", path_);
    if (n == 0) {
      return DataLossError("spool file '" + path_ + "' ends at byte offset " +
                           std::to_string(entry.offset + done) + " inside " + item.path);
    }
    done += static_cast<size_t>(n);
  }
  LoadedInput loaded;
  RF_ASSIGN_OR_RETURN(loaded.extra, example::ParseExample(
                                        std::as_bytes(std::span(bytes.data(), entry.extra_size))));
  if (entry.has_image) loaded.image = bytes.substr(entry.extra_size);
  loaded.transcoded = entry.transcoded;
  return loaded;
}

}  // namespace recordflow::convert
