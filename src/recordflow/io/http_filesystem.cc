// http:// and https://: read-only; ranged GETs, or skipping forward when a server ignores Range.
#include "filesystem_internal.h"
#include "object_store_internal.h"
#include "remote_file_internal.h"

namespace recordflow::io::internal {
namespace {

class HttpFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) override {
    const RemoteOptions options = GetRemoteOptions();
    RF_ASSIGN_OR_RETURN(FileInfo info, Stat(path));
    auto fetch = [url = path, etag = info.etag, retry = options.retry](uint64_t offset,
                                                                       std::span<std::byte> dst) {
      return FetchRange(url, retry, offset, dst, [&](uint64_t first, uint64_t last) {
        HttpRequest r;
        r.url = url;
        r.headers = {{"Range", "bytes=" + std::to_string(first) + "-" + std::to_string(last)}};
        if (!etag.empty()) r.headers.emplace_back("If-Match", etag);
        return r;
      });
    };
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<RemoteRandomAccessFile>(path, info.size, std::move(fetch), options));
  }

  Result<std::unique_ptr<AtomicFileWriter>> OpenWritable(const std::string& path,
                                                         AtomicFileOptions) override {
    return InvalidArgumentError("cannot write '" + path +
                                "': http(s) URLs are read-only (write to s3:// or a local path)");
  }

  Result<FileInfo> Stat(const std::string& path) override {
    const RetryOptions retry = GetRemoteOptions().retry;
    HttpResponse response;
    Status s = RunWithRetries(
        retry,
        [&]() -> Attempt {
          HttpRequest r;
          r.method = "HEAD";
          r.url = path;
          Attempt a = HttpClient::Default().Perform(r, retry, &response);
          if (!a.status.ok()) return a;
          if (response.status >= 200 && response.status < 300) return {};
          return {HttpErrorStatus(response, path, "HEAD"), IsRetryableHttpStatus(response.status)};
        },
        [&] { return "stat " + path; });
    if (!s.ok()) return s;
    const std::string length = response.Header("content-length");
    if (length.empty()) {
      return UnimplementedError("'" + path +
                                "' has no Content-Length; recordflow reads HTTP "
                                "resources of known size only");
    }
    FileInfo info;
    info.size = std::stoull(length);
    // A weak ETag cannot be used with If-Match.
    const std::string etag = response.Header("etag");
    if (!etag.starts_with("W/")) info.etag = etag;
    return info;
  }

  Result<std::vector<std::string>> ListPrefix(const std::string& prefix) override {
    return UnimplementedError("cannot list '" + prefix + "': HTTP has no listing; name the files");
  }

  Status Delete(const std::string& path) override {
    return InvalidArgumentError("cannot delete '" + path + "': http(s) URLs are read-only");
  }
};

}  // namespace

FileSystem* HttpFileSystemInstance() {
  static FileSystem* fs = new HttpFileSystem();
  return fs;
}

}  // namespace recordflow::io::internal
