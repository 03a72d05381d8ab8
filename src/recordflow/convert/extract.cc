// TFRecords of image Examples -> image files in class folders, and a labels CSV.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>

#include "json_internal.h"
#include "recordflow/convert/convert.h"
#include "recordflow/example/example.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/io/file.h"

namespace recordflow::convert {
namespace fs = std::filesystem;

namespace {

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
            : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (int k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return static_cast<size_t>(len);
}

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

std::string ExtensionFor(std::string_view format) {
  if (format == "JPEG" || format == "jpeg" || format == "jpg") return "jpg";
  std::string ext;
  for (char c : format) ext += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext.empty() ? "bin" : SanitizePathComponent(ext, "bin");
}

// "name.jpg" -> "name-2.jpg".
std::string WithSuffix(const std::string& name, int n) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot == 0) return name + "-" + std::to_string(n);
  return name.substr(0, dot) + "-" + std::to_string(n) + name.substr(dot);
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
  std::vector<std::string> skips;
  for (const auto& s : skipped) {
    skips.push_back(internal::JsonWriter().String("record", s.path).String("reason", s.reason).str());
  }
  return internal::JsonWriter()
      .Uint("records", records)
      .Uint("images", images)
      .Uint("bytes", bytes)
      .Uint("skipped_count", skipped.size())
      .Raw("skipped", internal::JsonArray(skips))
      .str();
}

Result<ExtractSummary> Extract(const std::vector<std::string>& files, const std::string& out_dir,
                               const ExtractOptions& options) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return ErrnoToStatus(ec.value(), "cannot create", out_dir);
  const std::string root = out_dir.empty() || out_dir.back() == '/' ? out_dir : out_dir + "/";
  ExtractSummary summary;
  std::set<std::string> used;  // relative paths written by this run
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
      const std::string dir = SanitizePathComponent(class_name, "unnamed");
      const auto* format = get_bytes("image/format");
      const auto* filename = get_bytes("image/filename");
      const std::string fallback =
          stem + "-" + std::to_string(index) + "." + ExtensionFor(format ? (*format)[0] : "");
      std::string name = filename ? SanitizePathComponent((*filename)[0], fallback) : fallback;
      fs::create_directories(root + dir, ec);
      if (ec) return ErrnoToStatus(ec.value(), "cannot create", root + dir);
      // Names are single sanitized components and files are opened O_NOFOLLOW, but a class
      // folder that is a symlink (planted in a non-empty output folder) would carry the write
      // elsewhere: refuse it.
      if (fs::is_symlink(fs::symlink_status(root + dir, ec))) {
        return FailedPreconditionError("'" + root + dir +
                                       "' is a symlink; extract writes only inside '" + root +
                                       "'");
      }
      // A name taken (in this run, or on disk without overwrite) gets a -N suffix.
      std::string rel = dir + "/" + name;
      int fd = -1;
      for (int n = 1;; ++n) {
        if (used.count(rel) == 0) {
          const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
                            (options.overwrite ? O_TRUNC : O_EXCL);
          fd = ::open((root + rel).c_str(), flags, 0644);
          if (fd >= 0) break;
          if (errno != EEXIST && errno != ELOOP) {
            return ErrnoToStatus(errno, "cannot create", root + rel);
          }
        }
        rel = dir + "/" + WithSuffix(name, n);
      }
      used.insert(rel);
      Status written = WriteAll(fd, (*encoded)[0], root + rel);
      if (::close(fd) != 0 && written.ok()) written = ErrnoToStatus(errno, "cannot close", root + rel);
      RF_RETURN_IF_ERROR(written);
      ++summary.images;
      summary.bytes += (*encoded)[0].size();
      std::string label_text, class_text;
      for (size_t i = 0; i < labels.size(); ++i) label_text += (i ? ";" : "") + std::to_string(labels[i]);
      if (texts != nullptr) {
        for (size_t i = 0; i < texts->size(); ++i) class_text += (i ? ";" : "") + (*texts)[i];
      }
      csv += CsvField(rel) + "," + CsvField(label_text) + "," + CsvField(class_text) + "\n";
    }
  }
  RF_RETURN_IF_ERROR(io::WriteStringToFileAtomic(
      root + SanitizePathComponent(options.labels_csv, "labels.csv"), csv));
  return summary;
}

}  // namespace recordflow::convert
