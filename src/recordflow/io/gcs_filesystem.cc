// gs://bucket/key through GCS's JSON API (gcs_internal.h): ranged media downloads pinned to the
// object's generation, resumable uploads finalized only on Commit, paginated listings.
#include <algorithm>
#include <cstdlib>

#include "gcs_internal.h"
#include "http_client.h"
#include "object_store_internal.h"
#include "recordflow/core/json.h"
#include "remote_file_internal.h"
#include "sigv4.h"

namespace recordflow::io::internal {
namespace {

// Resumable upload chunks must be multiples of 256 KiB (all but the last).
constexpr uint64_t kChunkQuantum = 256 * 1024;

using Headers = std::vector<std::pair<std::string, std::string>>;

Result<std::pair<std::string, std::string>> SplitBucketKey(const std::string& url) {
  Url u = ParseUrl(url);
  if (u.authority.empty()) return InvalidArgumentError("no bucket in '" + url + "'");
  return std::make_pair(u.authority, u.key);
}

std::string ObjectPath(const std::string& bucket, const std::string& key) {
  return "/b/" + UriEncode(bucket, false) + "/o/" + UriEncode(key, false);
}

// The store's error with the JSON API's own message ({"error": {"message": ...}}) appended.
Status GcsError(const HttpResponse& r, const std::string& url, const std::string& what) {
  Status s = HttpErrorStatus(r, url, what);
  Result<JsonValue> j = ParseJson(r.body, "the error answer");
  if (j.ok()) {
    const JsonValue* e = j->Find("error");
    const std::string msg = e == nullptr ? "" : e->FindText("message");
    if (!msg.empty()) return Status(s.code(), s.message() + ": " + msg);
  }
  return s;
}

// A request with the present token (fetched or refreshed as needed).
Result<HttpRequest> Authorized(std::string method, std::string url, Headers headers,
                               std::string_view body, const RetryOptions& retry) {
  RF_ASSIGN_OR_RETURN(std::string auth, GcsAuthorization(retry));
  HttpRequest r;
  r.method = std::move(method);
  r.url = std::move(url);
  r.headers = std::move(headers);
  if (!auth.empty()) r.headers.emplace_back("Authorization", std::move(auth));
  r.body = body;
  return r;
}

// One JSON API call with retries; `ok` statuses besides 2xx (e.g. 308) count as success.
Result<HttpResponse> Call(const std::function<Result<HttpRequest>()>& make, const std::string& url,
                          const std::string& what, const RetryOptions& retry, long also_ok = 0) {
  HttpResponse response;
  Status s = RunWithRetries(
      retry,
      [&]() -> Attempt {
        Result<HttpRequest> req = make();
        if (!req.ok()) return {req.status(), false};
        Attempt a = HttpClient::Default().Perform(*req, retry, &response);
        if (!a.status.ok()) {
          // The transport error names the request URL; name the gs:// URL instead (an upload
          // session URL is itself a credential).
          return {IOError(what + " " + url + ": " +
                          a.status.message().substr(a.status.message().rfind(": ") + 2)),
                  a.retryable};
        }
        if ((response.status >= 200 && response.status < 300) || response.status == also_ok) {
          return {};
        }
        return {GcsError(response, url, what), IsRetryableHttpStatus(response.status)};
      },
      [&] { return what + " " + url; });
  if (!s.ok()) return s;
  return response;
}

// How many bytes an unfinished session holds, from a 308's "Range: bytes=0-N" (none: nothing
// yet). GCS persists whole multiples of 256 KiB, so the count is rounded down to one; that also
// reads the emulator's "bytes=0-0" for an empty session as 0.
uint64_t PersistedBytes(const HttpResponse& r) {
  const std::string range = r.Header("range");
  const size_t dash = range.find('-');
  if (dash == std::string::npos) return 0;
  const uint64_t n = std::strtoull(range.c_str() + dash + 1, nullptr, 10) + 1;
  return n / kChunkQuantum * kChunkQuantum;
}

class GcsWriter final : public AtomicFileWriter {
 public:
  GcsWriter(std::string url, GcsTarget target, std::string bucket, std::string key,
            RemoteOptions options)
      : AtomicFileWriter(std::move(url), ""),
        target_(std::move(target)),
        bucket_(std::move(bucket)),
        key_(std::move(key)),
        options_(options) {
    chunk_ = std::max(kChunkQuantum, options_.upload_part_size / kChunkQuantum * kChunkQuantum);
  }
  ~GcsWriter() override { GcsWriter::Abort(); }

  Status Append(std::span<const std::byte> data) override {
    if (closed_) return FailedPreconditionError("write to closed file '" + path() + "'");
    buffer_.append(reinterpret_cast<const char*>(data.data()), data.size());
    bytes_written_ += data.size();
    while (buffer_.size() >= chunk_ + 1) {
      // Keep at least one byte back so that the final request always carries data.
      Status s = SendChunk(std::string_view(buffer_).substr(0, chunk_), false);
      if (!s.ok()) {
        Abort();
        return s;
      }
      buffer_.erase(0, chunk_);
    }
    return Status::OK();
  }

  Status Commit() override {
    if (closed_) return FailedPreconditionError("commit of closed file '" + path() + "'");
    Status s = session_.empty() ? UploadWhole() : SendChunk(buffer_, true);
    if (s.ok()) session_.clear();  // finalized: nothing to cancel
    closed_ = true;
    if (!s.ok()) Abort();
    return s;
  }

  void Abort() override {
    closed_ = true;
    buffer_.clear();
    if (session_.empty()) return;
    const std::string session = std::move(session_);
    session_.clear();
    // Cancelling the session discards what was uploaded; nothing appears under the key.
    // (The emulator does not implement cancellation; there an unfinished session is simply
    // never finalized.)
    // Best effort, briefly: an unfinalized session expires on its own within a week.
    RetryOptions brief = options_.retry;
    brief.max_attempts = std::min(brief.max_attempts, 3);
    brief.max_total = std::min(brief.max_total, std::chrono::milliseconds(2000));
    Call([&] { return Authorized("DELETE", session, {}, {}, brief); }, path(),
         "cancel the upload of", brief, 499)
        .status()
        .IgnoreError();
  }

 private:
  // A file below one chunk: one request, so the object appears whole or not at all.
  Status UploadWhole() {
    const std::string url = target_.base + "/upload/storage/v1/b/" + UriEncode(bucket_, false) +
                            "/o?uploadType=media&name=" + UriEncode(key_, false);
    return Call(
               [&] {
                 return Authorized("POST", url, {{"Content-Type", "application/octet-stream"}},
                                   buffer_, options_.retry);
               },
               path(), "upload", options_.retry)
        .status();
  }

  Status StartSession() {
    const std::string url = target_.base + "/upload/storage/v1/b/" + UriEncode(bucket_, false) +
                            "/o?uploadType=resumable&name=" + UriEncode(key_, false);
    RF_ASSIGN_OR_RETURN(HttpResponse r, Call(
                                            [&] {
                                              return Authorized("POST", url,
                                                                {{"X-Upload-Content-Type",
                                                                  "application/octet-stream"}},
                                                                {}, options_.retry);
                                            },
                                            path(), "start a resumable upload of", options_.retry));
    session_ = r.Header("location");
    if (session_.empty())
      return IOError("no upload session (Location) in the answer for " + path());
    return Status::OK();
  }

  // Sends `data`, the object's bytes from sent_ on; `final` ends the object there. After a
  // failed attempt the server is asked how much it holds and the rest is sent from there.
  Status SendChunk(std::string_view data, bool final) {
    if (session_.empty()) RF_RETURN_IF_ERROR(StartSession());
    const uint64_t start = sent_;
    const uint64_t end = start + data.size();  // exclusive
    const std::string total = final ? std::to_string(end) : "*";
    uint64_t persisted = start;
    bool ask_first = false;
    bool finished = false;
    const RetryOptions& retry = options_.retry;
    Status s = RunWithRetries(
        retry,
        [&]() -> Attempt {
          HttpResponse r;
          if (ask_first) {
            Result<HttpRequest> q =
                Authorized("PUT", session_, {{"Content-Range", "bytes */" + total}}, {}, retry);
            if (!q.ok()) return {q.status(), false};
            Attempt a = HttpClient::Default().Perform(*q, retry, &r);
            if (!a.status.ok()) return {IOError("upload of " + path() + " interrupted"), true};
            if (r.status == 200 || r.status == 201) {
              finished = true;
              return {};
            }
            if (r.status != 308) {
              return {GcsError(r, path(), "resume the upload of"), IsRetryableHttpStatus(r.status)};
            }
            persisted = PersistedBytes(r);
            if (persisted < start || persisted > end) {
              return {DataLossError("the upload session of " + path() + " holds " +
                                    std::to_string(persisted) + " bytes, expected " +
                                    std::to_string(start) + " to " + std::to_string(end)),
                      false};
            }
          }
          ask_first = true;
          if (!final && persisted == end) return {};
          const std::string_view rest = data.substr(persisted - start);
          const std::string range = rest.empty() ? "bytes */" + total
                                                 : "bytes " + std::to_string(persisted) + "-" +
                                                       std::to_string(end - 1) + "/" + total;
          Result<HttpRequest> put =
              Authorized("PUT", session_, {{"Content-Range", range}}, rest, retry);
          if (!put.ok()) return {put.status(), false};
          Attempt a = HttpClient::Default().Perform(*put, retry, &r);
          if (!a.status.ok()) {
            return {IOError("upload of " + path() + " at byte offset " + std::to_string(persisted) +
                            " interrupted"),
                    true};
          }
          if (final && (r.status == 200 || r.status == 201)) {
            finished = true;
            return {};
          }
          if (!final && r.status == 308) {
            persisted = PersistedBytes(r);
            if (persisted == end) return {};
            // The server kept less than was sent: ask and send the rest.
            return {IOError("upload of " + path() + " kept " + std::to_string(persisted) + " of " +
                            std::to_string(end) + " bytes"),
                    true};
          }
          return {GcsError(r, path(), "upload byte offset " + std::to_string(persisted) + " of"),
                  IsRetryableHttpStatus(r.status)};
        },
        [&] { return "uploading " + path() + " at byte offset " + std::to_string(persisted); });
    if (!s.ok()) return s;
    if (final && !finished) return IOError("the upload of " + path() + " did not complete");
    sent_ = end;
    return Status::OK();
  }

  GcsTarget target_;
  std::string bucket_, key_;
  RemoteOptions options_;
  uint64_t chunk_;
  std::string buffer_;
  std::string session_;  // the resumable upload's URL; empty before the first chunk
  uint64_t sent_ = 0;    // bytes the session holds
  bool closed_ = false;
};

class GcsFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(path));
    const GcsTarget target = ResolveGcsTarget();
    const RemoteOptions options = GetRemoteOptions();
    RF_ASSIGN_OR_RETURN(Meta meta, StatWith(target, bk.first, bk.second, path, options));
    if (meta.info.is_directory) {
      return InvalidArgumentError("'" + path + "' is a prefix, not an object");
    }
    // Every range names the generation seen at open: an overwritten object answers 412
    // (kFailedPrecondition) instead of mixing two versions' bytes.
    std::string url =
        target.base + "/download/storage/v1" + ObjectPath(bk.first, bk.second) + "?alt=media";
    if (!meta.generation.empty()) url += "&ifGenerationMatch=" + meta.generation;
    auto fetch = [url, gs = path, retry = options.retry](uint64_t offset,
                                                         std::span<std::byte> dst) {
      return FetchRange(gs, retry, offset, dst, [&](uint64_t first, uint64_t last) {
        Result<HttpRequest> r = Authorized(
            "GET", url, {{"Range", "bytes=" + std::to_string(first) + "-" + std::to_string(last)}},
            {}, retry);
        // Without a token the request goes out anonymously and the store's 401/403 says why.
        if (!r.ok()) {
          HttpRequest anon;
          anon.url = url;
          anon.headers = {{"Range", "bytes=" + std::to_string(first) + "-" + std::to_string(last)}};
          return anon;
        }
        return *std::move(r);
      });
    };
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<RemoteRandomAccessFile>(path, meta.info.size, std::move(fetch), options));
  }

  Result<std::unique_ptr<AtomicFileWriter>> OpenWritable(const std::string& path,
                                                         AtomicFileOptions options) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(path));
    if (bk.second.empty() || bk.second.back() == '/') {
      return InvalidArgumentError("not an object URL: '" + path + "'");
    }
    if (options.defer_completion) {
      return UnimplementedError("'" + path +
                                "': deferred completion needs multipart uploads, which gs:// "
                                "has through HMAC keys (GCS_HMAC_ACCESS_KEY_ID), not the JSON API");
    }
    return std::unique_ptr<AtomicFileWriter>(std::make_unique<GcsWriter>(
        path, ResolveGcsTarget(), bk.first, bk.second, GetRemoteOptions()));
  }

  Result<FileInfo> Stat(const std::string& path) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(path));
    RF_ASSIGN_OR_RETURN(
        Meta m, StatWith(ResolveGcsTarget(), bk.first, bk.second, path, GetRemoteOptions()));
    return m.info;
  }

  Result<std::vector<std::string>> ListPrefix(const std::string& prefix) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(prefix));
    return List(ResolveGcsTarget(), bk.first, bk.second, GetRemoteOptions(), 0);
  }

  Status Delete(const std::string& path) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(path));
    const GcsTarget target = ResolveGcsTarget();
    const RetryOptions retry = GetRemoteOptions().retry;
    const std::string url = target.base + "/storage/v1" + ObjectPath(bk.first, bk.second);
    Result<HttpResponse> r =
        Call([&] { return Authorized("DELETE", url, {}, {}, retry); }, path, "delete", retry);
    if (!r.ok() && r.status().code() != StatusCode::kNotFound) return r.status();
    return Status::OK();
  }

 private:
  struct Meta {
    FileInfo info;
    std::string generation;
  };

  Result<std::vector<std::string>> List(const GcsTarget& target, const std::string& bucket,
                                        const std::string& prefix, const RemoteOptions& options,
                                        size_t limit) {
    std::vector<std::string> out;
    std::string token;
    const std::string root = "gs://" + bucket + "/";
    while (true) {
      std::string url = target.base + "/storage/v1/b/" + UriEncode(bucket, false) +
                        "/o?prefix=" + UriEncode(prefix, false) +
                        "&fields=" + UriEncode("items(name),nextPageToken", false);
      if (limit > 0) url += "&maxResults=" + std::to_string(limit);
      if (!token.empty()) url += "&pageToken=" + UriEncode(token, false);
      RF_ASSIGN_OR_RETURN(HttpResponse r,
                          Call([&] { return Authorized("GET", url, {}, {}, options.retry); },
                               root + prefix, "list", options.retry));
      RF_ASSIGN_OR_RETURN(JsonValue j, ParseJson(r.body, "the listing of " + root + prefix));
      if (const JsonValue* items = j.Find("items"); items != nullptr) {
        for (const JsonValue& item : items->items) {
          const std::string name = item.FindText("name");
          // The emulator ignores `prefix` for some names; keep only what was asked for.
          if (!name.empty() && name.starts_with(prefix)) out.push_back(root + name);
        }
      }
      token = j.FindText("nextPageToken");
      if (token.empty() || (limit > 0 && out.size() >= limit)) break;
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<Meta> StatWith(const GcsTarget& target, const std::string& bucket, const std::string& key,
                        const std::string& url, const RemoteOptions& options) {
    if (key.empty() || key.back() == '/') {
      return InvalidArgumentError("'" + url + "' names no object (empty key or ending in '/')");
    }
    const std::string api = target.base + "/storage/v1" + ObjectPath(bucket, key);
    Result<HttpResponse> r = Call([&] { return Authorized("GET", api, {}, {}, options.retry); },
                                  url, "stat", options.retry);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kNotFound) {
        // A "folder": objects exist under key + "/".
        Result<std::vector<std::string>> under = List(target, bucket, key + "/", options, 1);
        if (under.ok() && !under->empty()) {
          Meta m;
          m.info.is_directory = true;
          return m;
        }
        return NotFoundError("no such object: '" + url + "'");
      }
      return r.status();
    }
    RF_ASSIGN_OR_RETURN(JsonValue j, ParseJson(r->body, "the metadata of " + url));
    Meta m;
    const std::string size = j.FindText("size");
    m.info.size = size.empty() ? 0 : std::strtoull(size.c_str(), nullptr, 10);
    m.generation = j.FindText("generation");
    m.info.etag = j.FindText("etag");
    return m;
  }
};

}  // namespace

FileSystem* GcsFileSystemInstance() {
  static FileSystem* fs = new GcsFileSystem();
  return fs;
}

FileSystem* GcsHmacFileSystemInstance() {
  static FileSystem* fs = NewS3CompatibleFileSystem(ResolveGcsHmacConfig).release();
  return fs;
}

FileSystem* GcsFileSystemForEnvironment() {
  const char* emulator = std::getenv("STORAGE_EMULATOR_HOST");
  const char* hmac = std::getenv("GCS_HMAC_ACCESS_KEY_ID");
  if ((emulator == nullptr || *emulator == '\0') && hmac != nullptr && *hmac != '\0') {
    return GcsHmacFileSystemInstance();
  }
  return GcsFileSystemInstance();
}

}  // namespace recordflow::io::internal
