// The doctor's file helpers: the reshard command line, temporary sample files, records read
// and written whole (diagnose_variants.cc measures variants on them).
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "diagnose_internal.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/glob.h"
#include "recordflow/pipeline/diagnose.h"

namespace recordflow::pipeline {
namespace {

namespace fs = std::filesystem;

// A word for a POSIX shell: as it is when it holds only safe characters, else single-quoted.
std::string ShellQuote(const std::string& s) {
  if (s.empty()) return "''";
  if (s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                          "@%+=:,./-_") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
  return out + "'";
}

// The files for a shell command: one glob when `dir/*suffix` matches exactly them.
std::string FilesArgument(const std::vector<std::string>& paths) {
  std::vector<std::string> dirs, suffixes;
  for (const std::string& p : paths) {
    const fs::path path(p);
    const std::string base = path.filename().string();
    const size_t dot = base.find('.');
    dirs.push_back(path.parent_path().string());
    suffixes.push_back(dot == std::string::npos ? "" : base.substr(dot));
  }
  auto all_same = [](const std::vector<std::string>& v) {
    return std::all_of(v.begin(), v.end(), [&](const std::string& x) { return x == v[0]; });
  };
  if (paths.size() > 1 && all_same(dirs) && all_same(suffixes)) {
    const std::string& d = dirs[0];
    std::vector<std::string> sorted = paths;
    std::sort(sorted.begin(), sorted.end());
    Result<std::vector<std::string>> matched =
        io::ExpandGlob((d.empty() ? "" : d + "/") + "*" + suffixes[0]);
    if (matched.ok() && *matched == sorted) {
      return (d.empty() ? "" : ShellQuote(d + "/")) + "*" + ShellQuote(suffixes[0]);
    }
  }
  std::string out;
  for (const std::string& p : paths) {
    if (!out.empty()) out += ' ';
    out += ShellQuote(p);
  }
  return out;
}

}  // namespace

namespace internal {

std::string ErrorText(const Status& s) {
  return std::string(StatusCodeName(s.code())) + ": " + s.message();
}

uint64_t FileSize(const std::string& path) {
  std::error_code error;
  const uintmax_t n = fs::file_size(path, error);
  return error ? 0 : static_cast<uint64_t>(n);
}

TempDir::TempDir() {
  std::error_code error;
  std::string templ = (fs::temp_directory_path(error) / "rf-doctor-XXXXXX").string();
  if (!error && ::mkdtemp(templ.data()) != nullptr) path_ = templ;
}

TempDir::~TempDir() {
  std::error_code error;
  if (!path_.empty()) fs::remove_all(path_, error);
}

Status WriteRecords(const std::string& path, const std::vector<std::string>& records,
                    format::Compression compression) {
  format::RecordWriterOptions options;
  options.compression = compression;
  RF_ASSIGN_OR_RETURN(auto writer, format::RecordWriter::Open(path, options));
  for (const std::string& r : records) {
    RF_RETURN_IF_ERROR(writer->WriteRecord(std::as_bytes(std::span(r.data(), r.size()))));
  }
  return writer->Close();
}

Result<std::vector<std::string>> ReadRecords(const std::string& path,
                                             std::optional<format::Compression> compression,
                                             size_t limit) {
  format::RecordReaderOptions options;
  options.compression = compression;
  RF_ASSIGN_OR_RETURN(auto reader, format::RecordReader::Open(path, options));
  std::vector<std::string> out;
  std::span<const std::byte> record;
  while (out.size() < limit) {
    RF_ASSIGN_OR_RETURN(bool got, reader->ReadRecord(&record));
    if (!got) break;
    out.emplace_back(reinterpret_cast<const char*>(record.data()), record.size());
  }
  return out;
}

Result<std::vector<std::string>> FirstRecords(const PipelinePlan& plan, size_t limit) {
  if (plan.records) {
    const std::vector<std::string>& all = *plan.records;
    return std::vector<std::string>(
        all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min(limit, all.size())));
  }
  std::vector<std::string> out;
  for (const std::string& path : plan.files) {
    if (out.size() >= limit) break;
    RF_ASSIGN_OR_RETURN(std::vector<std::string> more,
                        ReadRecords(path, plan.files_options.compression, limit - out.size()));
    for (std::string& r : more) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace internal

std::pair<std::string, uint64_t> ReshardCommand(const std::vector<std::string>& paths,
                                                double total_bytes, std::string_view compression) {
  const uint64_t n = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(total_bytes / static_cast<double>(kReshardTargetBytes))));
  std::vector<std::string> dirs;
  for (const std::string& p : paths) {
    std::error_code error;
    dirs.push_back(fs::absolute(p, error).lexically_normal().parent_path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  std::error_code error;
  const std::string base = dirs.size() == 1 ? dirs[0] : fs::current_path(error).string();
  std::string cmd = "recordflow reshard " + FilesArgument(paths) + " " +
                    ShellQuote((fs::path(base) / "resharded").string()) + " --shards " +
                    std::to_string(n);
  if (!compression.empty()) cmd += " --compression " + std::string(compression);
  return {cmd, n};
}

}  // namespace recordflow::pipeline
