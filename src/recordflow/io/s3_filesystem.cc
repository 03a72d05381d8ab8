// s3://bucket/key: S3 and S3-compatible stores, configured as the AWS SDKs are.
#include <fnmatch.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include "filesystem_internal.h"
#include "http_client.h"
#include "object_store_internal.h"
#include "remote_file_internal.h"
#include "sigv4.h"

namespace recordflow::io::internal {
namespace {

constexpr char kEmptySha256[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

std::mutex explicit_mu;
AwsCredentials* ExplicitCredentials() {
  static AwsCredentials* c = new AwsCredentials();
  return c;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string Home() { return Env("HOME"); }

// INI sections of an AWS shared file: section name -> key -> value.
std::map<std::string, std::map<std::string, std::string>> ReadIni(const std::string& path) {
  std::map<std::string, std::map<std::string, std::string>> out;
  std::ifstream in(path);
  std::string line, section;
  auto trim = [](std::string s) {
    const size_t a = s.find_first_not_of(" \t\r");
    const size_t b = s.find_last_not_of(" \t\r");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = trim(line.substr(1, line.size() - 2));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    out[section][trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return out;
}

std::string StripSlash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

S3Config ResolveS3Config() {
  S3Config c;
  const std::string profile = Env("AWS_PROFILE").empty() ? "default" : Env("AWS_PROFILE");
  std::string creds_file = Env("AWS_SHARED_CREDENTIALS_FILE");
  if (creds_file.empty()) creds_file = Home() + "/.aws/credentials";
  std::string config_file = Env("AWS_CONFIG_FILE");
  if (config_file.empty()) config_file = Home() + "/.aws/config";
  auto config = ReadIni(config_file);
  const auto& conf = config[profile == "default" ? "default" : "profile " + profile];
  {
    std::lock_guard lock(explicit_mu);
    c.credentials = *ExplicitCredentials();
  }
  if (c.credentials.empty() && !Env("AWS_ACCESS_KEY_ID").empty()) {
    c.credentials.access_key = Env("AWS_ACCESS_KEY_ID");
    c.credentials.secret_key = Env("AWS_SECRET_ACCESS_KEY");
    c.credentials.session_token = Env("AWS_SESSION_TOKEN");
  }
  if (c.credentials.empty()) {
    auto creds = ReadIni(creds_file);
    const auto& sec = creds[profile];
    auto get = [&](const char* k) {
      auto it = sec.find(k);
      if (it != sec.end()) return it->second;
      auto jt = conf.find(k);
      return jt != conf.end() ? jt->second : std::string();
    };
    c.credentials.access_key = get("aws_access_key_id");
    c.credentials.secret_key = get("aws_secret_access_key");
    c.credentials.session_token = get("aws_session_token");
  }
  c.region = Env("AWS_REGION");
  if (c.region.empty()) c.region = Env("AWS_DEFAULT_REGION");
  if (c.region.empty() && conf.count("region")) c.region = conf.at("region");
  if (c.region.empty()) c.region = "us-east-1";
  c.endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = Env("AWS_ENDPOINT_URL");
  if (c.endpoint.empty() && conf.count("endpoint_url")) c.endpoint = conf.at("endpoint_url");
  c.path_style = !c.endpoint.empty();
  c.endpoint = StripSlash(c.endpoint);
  return c;
}

void SetExplicitS3Credentials(AwsCredentials credentials) {
  std::lock_guard lock(explicit_mu);
  *ExplicitCredentials() = std::move(credentials);
}

std::string AmzDateNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[20];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

HttpRequest S3Request(const S3Config& c, std::string method, const std::string& bucket,
                      const std::string& key, const std::string& canonical_query,
                      std::string_view body, std::vector<std::pair<std::string, std::string>> extra,
                      std::string_view service) {
  std::string scheme_host;  // "https://host[:port]"
  std::string uri;          // the encoded path
  if (c.path_style) {
    scheme_host = c.endpoint;
    uri = "/" + UriEncode(bucket, false) + "/" + UriEncode(key, true);
  } else {
    scheme_host = "https://" + bucket + ".s3." + c.region + ".amazonaws.com";
    uri = "/" + UriEncode(key, true);
  }
  const size_t sep = scheme_host.find("://");
  const std::string host = sep == std::string::npos ? scheme_host : scheme_host.substr(sep + 3);
  HttpRequest r;
  r.method = std::move(method);
  r.url = scheme_host + uri + (canonical_query.empty() ? "" : "?" + canonical_query);
  r.body = body;
  const std::string payload_hash = body.empty() ? kEmptySha256 : HexSha256(body);
  r.headers = std::move(extra);
  if (!c.credentials.empty()) {
    const std::string date = AmzDateNow();
    r.headers.emplace_back("host", host);
    r.headers.emplace_back("x-amz-date", date);
    r.headers.emplace_back("x-amz-content-sha256", payload_hash);
    if (!c.credentials.session_token.empty()) {
      r.headers.emplace_back("x-amz-security-token", c.credentials.session_token);
    }
    SigV4Request sr{r.method, uri, canonical_query, r.headers, payload_hash};
    for (auto& [name, value] : sr.headers) {
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
    r.headers.emplace_back("Authorization",
                           SigV4Authorization(sr, c.credentials, date, c.region, service));
  }
  return r;
}

namespace {

Result<std::pair<std::string, std::string>> SplitBucketKey(const std::string& url) {
  Url u = ParseUrl(url);
  if (u.authority.empty()) return InvalidArgumentError("no bucket in '" + url + "'");
  return std::make_pair(u.authority, u.key);
}

std::string Q(const std::string& name, const std::string& value) {
  return UriEncode(name, false) + "=" + UriEncode(value, false);
}

// Completes `request` once, with retries; non-2xx final answers become errors.
Result<HttpResponse> Send(const std::function<HttpRequest()>& make, const std::string& url,
                          const std::string& what, const RetryOptions& retry) {
  HttpResponse response;
  Status s = RunWithRetries(
      retry,
      [&]() -> Attempt {
        Attempt a = HttpClient::Default().Perform(make(), retry, &response);
        if (!a.status.ok()) return a;
        if (response.status >= 200 && response.status < 300) {
          // CompleteMultipartUpload may answer 200 with an error document.
          if (response.body.find("<Error>") != std::string::npos) {
            return {HttpErrorStatus(response, url, what),
                    XmlValue(response.body, "Code") == "InternalError" ||
                        XmlValue(response.body, "Code") == "SlowDown"};
          }
          return {};
        }
        return {HttpErrorStatus(response, url, what), IsRetryableHttpStatus(response.status)};
      },
      [&] { return what + " " + url; });
  if (!s.ok()) return s;
  return response;
}

class S3Writer final : public AtomicFileWriter {
 public:
  S3Writer(std::string url, S3Config config, std::string bucket, std::string key,
           RemoteOptions options, bool defer_completion)
      : AtomicFileWriter(std::move(url), ""),
        config_(std::move(config)),
        bucket_(std::move(bucket)),
        key_(std::move(key)),
        options_(options),
        defer_completion_(defer_completion) {
    options_.upload_part_size = std::max<uint64_t>(options_.upload_part_size, 5ull << 20);
  }
  ~S3Writer() override { S3Writer::Abort(); }

  Status Append(std::span<const std::byte> data) override {
    if (closed_) return FailedPreconditionError("write to closed file '" + path() + "'");
    buffer_.append(reinterpret_cast<const char*>(data.data()), data.size());
    bytes_written_ += data.size();
    while (buffer_.size() >= options_.upload_part_size) {
      Status s = UploadPart(std::string_view(buffer_).substr(0, options_.upload_part_size));
      if (!s.ok()) {
        Abort();
        return s;
      }
      buffer_.erase(0, options_.upload_part_size);
    }
    return Status::OK();
  }

  Status Commit() override {
    if (closed_) return FailedPreconditionError("commit of closed file '" + path() + "'");
    Status s = CommitInner();
    if (!s.ok()) Abort();
    closed_ = true;
    return s;
  }

  void Abort() override {
    closed_ = true;
    buffer_.clear();
    if (upload_id_.empty()) return;
    const std::string id = std::move(upload_id_);
    upload_id_.clear();
    AbortMultipartUpload(config_, bucket_, key_, id, path(), options_.retry).IgnoreError();
  }

  std::optional<PendingUpload> pending_upload() const override { return pending_; }

  static Status AbortMultipartUpload(const S3Config& config, const std::string& bucket,
                                     const std::string& key, const std::string& id,
                                     const std::string& url, const RetryOptions& retry) {
    Result<HttpResponse> r =
        Send([&] { return S3Request(config, "DELETE", bucket, key, Q("uploadId", id), {}, {}); },
             url, "abort multipart upload of", retry);
    // NoSuchUpload: aborted or completed already; either way nothing of it is left open.
    if (!r.ok() && r.status().code() != StatusCode::kNotFound) return r.status();
    return Status::OK();
  }

  static Status CompleteMultipartUpload(const S3Config& config, const std::string& bucket,
                                        const std::string& key, const std::string& id,
                                        const std::vector<std::string>& etags,
                                        const std::string& url, const RetryOptions& retry) {
    std::string xml = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < etags.size(); ++i) {
      xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[i] +
             "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    return Send([&] { return S3Request(config, "POST", bucket, key, Q("uploadId", id), xml, {}); },
                url, "complete multipart upload of", retry)
        .status();
  }

 private:
  Status CommitInner() {
    if (defer_completion_) {
      // Every byte goes up as parts (an empty object as one empty part) and the upload stays
      // open: the object appears only when a commit protocol completes it.
      if (!buffer_.empty() || etags_.empty()) RF_RETURN_IF_ERROR(UploadPart(buffer_));
      buffer_.clear();
      pending_ = PendingUpload{path(), upload_id_, etags_, bytes_written_};
      upload_id_.clear();  // no longer ours to abort
      return Status::OK();
    }
    if (upload_id_.empty()) {
      // One request: the object appears whole or not at all.
      return Send([&] { return S3Request(config_, "PUT", bucket_, key_, "", buffer_, {}); }, path(),
                  "upload", options_.retry)
          .status();
    }
    if (!buffer_.empty()) RF_RETURN_IF_ERROR(UploadPart(buffer_));
    RF_RETURN_IF_ERROR(CompleteMultipartUpload(config_, bucket_, key_, upload_id_, etags_, path(),
                                               options_.retry));
    upload_id_.clear();
    return Status::OK();
  }

  Status UploadPart(std::string_view part) {
    if (upload_id_.empty()) {
      RF_ASSIGN_OR_RETURN(
          HttpResponse r,
          Send([&] { return S3Request(config_, "POST", bucket_, key_, "uploads=", {}, {}); },
               path(), "start multipart upload of", options_.retry));
      upload_id_ = XmlValue(r.body, "UploadId");
      if (upload_id_.empty()) return IOError("no UploadId in the answer for " + path());
    }
    const int number = static_cast<int>(etags_.size()) + 1;
    const std::string query =
        Q("partNumber", std::to_string(number)) + "&" + Q("uploadId", upload_id_);
    RF_ASSIGN_OR_RETURN(
        HttpResponse r,
        Send([&] { return S3Request(config_, "PUT", bucket_, key_, query, part, {}); }, path(),
             "upload part " + std::to_string(number) + " of", options_.retry));
    std::string etag = r.Header("etag");
    if (etag.empty())
      return IOError("no ETag for part " + std::to_string(number) + " of " + path());
    etags_.push_back(std::move(etag));
    return Status::OK();
  }

  S3Config config_;
  std::string bucket_, key_;
  RemoteOptions options_;
  std::string buffer_;
  std::string upload_id_;
  std::vector<std::string> etags_;
  bool closed_ = false;
  bool defer_completion_;
  std::optional<PendingUpload> pending_;
};

class S3FileSystem final : public FileSystem {
 public:
  explicit S3FileSystem(std::function<S3Config()> resolve) : resolve_(std::move(resolve)) {}

  Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(path));
    const S3Config config = resolve_();
    const RemoteOptions options = GetRemoteOptions();
    if (bk.second.empty() || bk.second.back() == '/') {
      return InvalidArgumentError("'" + path + "' names no object (empty key or ending in '/')");
    }
    // No HEAD: the first ranged GET brings the size and ETag (Content-Range) with the first
    // bytes, so a small object costs one round trip in all.
    std::vector<std::byte> head(static_cast<size_t>(
        std::max<uint64_t>(1, std::min(options.open_read_size, options.part_size))));
    HttpResponse first;
    Result<size_t> got = FetchRange(
        path, options.retry, 0, std::span(head),
        [&](uint64_t a, uint64_t b) {
          return S3Request(config, "GET", bk.first, bk.second, "", {},
                           {{"range", "bytes=" + std::to_string(a) + "-" + std::to_string(b)}});
        },
        &first);
    FileInfo info;
    std::optional<uint64_t> total = ContentRangeTotal(first.Header("content-range"));
    if (got.ok() && first.status == 200 && first.Header("content-range").empty()) {
      const std::string length = first.Header("content-length");  // the whole object
      if (!length.empty()) total = std::strtoull(length.c_str(), nullptr, 10);
    }
    if (!got.ok() || !total.has_value() || first.Header("etag").empty()) {
      // Not found (a prefix?), or an answer without size or ETag: the HEAD path says which.
      RF_ASSIGN_OR_RETURN(info, StatWith(config, bk.first, bk.second, path, options));
      if (info.is_directory) {
        return InvalidArgumentError("'" + path + "' is a prefix, not an object");
      }
      if (!got.ok()) return got.status();
      head.clear();
    } else {
      info.size = *total;
      info.etag = first.Header("etag");
      head.resize(
          std::min<size_t>(*got, static_cast<size_t>(std::min<uint64_t>(head.size(), info.size))));
    }
    auto fetch = [config, bucket = bk.first, key = bk.second, url = path, etag = info.etag,
                  retry = options.retry](uint64_t offset, std::span<std::byte> dst) {
      return FetchRange(url, retry, offset, dst, [&](uint64_t first, uint64_t last) {
        std::vector<std::pair<std::string, std::string>> extra = {
            {"range", "bytes=" + std::to_string(first) + "-" + std::to_string(last)}};
        if (!etag.empty()) extra.emplace_back("if-match", etag);
        return S3Request(config, "GET", bucket, key, "", {}, std::move(extra));
      });
    };
    RemoteOptions tuned = options;
    tuned.part_size = AutotunedPartSize(options);  // the open GET is one more sample
    return std::unique_ptr<RandomAccessFile>(std::make_unique<RemoteRandomAccessFile>(
        path, info.size, std::move(fetch), tuned, std::move(head)));
  }

  Result<std::unique_ptr<AtomicFileWriter>> OpenWritable(const std::string& path,
                                                         AtomicFileOptions options) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(path));
    if (bk.second.empty() || bk.second.back() == '/') {
      return InvalidArgumentError("not an object URL: '" + path + "'");
    }
    return std::unique_ptr<AtomicFileWriter>(std::make_unique<S3Writer>(
        path, resolve_(), bk.first, bk.second, GetRemoteOptions(), options.defer_completion));
  }

  Status CompleteUpload(const PendingUpload& upload) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(upload.url));
    if (upload.upload_id.empty() || upload.etags.empty()) {
      return InvalidArgumentError("cannot complete the upload of '" + upload.url +
                                  "': no upload id or no parts");
    }
    return S3Writer::CompleteMultipartUpload(resolve_(), bk.first, bk.second, upload.upload_id,
                                             upload.etags, upload.url, GetRemoteOptions().retry);
  }

  Status AbortUpload(const std::string& url, const std::string& upload_id) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(url));
    return S3Writer::AbortMultipartUpload(resolve_(), bk.first, bk.second, upload_id, url,
                                          GetRemoteOptions().retry);
  }

  Result<std::vector<PendingUpload>> ListUploads(const std::string& prefix) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(prefix));
    const S3Config config = resolve_();
    const RetryOptions retry = GetRemoteOptions().retry;
    const std::string root = config.url_scheme + "://" + bk.first + "/";
    std::vector<PendingUpload> out;
    std::string key_marker, id_marker;
    while (true) {
      // Query parameters in sorted order (SigV4's canonical query).
      std::string query;
      if (!key_marker.empty()) query += Q("key-marker", key_marker) + "&";
      query += Q("prefix", bk.second);
      if (!id_marker.empty()) query += "&" + Q("upload-id-marker", id_marker);
      query += "&uploads=";
      RF_ASSIGN_OR_RETURN(
          HttpResponse r,
          Send([&] { return S3Request(config, "GET", bk.first, "", query, {}, {}); }, prefix,
               "list multipart uploads under", retry));
      size_t pos = 0;
      while (true) {
        std::string upload = XmlValue(r.body, "Upload", &pos);
        if (pos == std::string::npos) break;
        PendingUpload u;
        u.url = root + XmlValue(upload, "Key");
        u.upload_id = XmlValue(upload, "UploadId");
        out.push_back(std::move(u));
      }
      if (XmlValue(r.body, "IsTruncated") != "true") break;
      key_marker = XmlValue(r.body, "NextKeyMarker");
      id_marker = XmlValue(r.body, "NextUploadIdMarker");
      if (key_marker.empty()) break;
    }
    return out;
  }

  Result<FileInfo> Stat(const std::string& path) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(path));
    return StatWith(resolve_(), bk.first, bk.second, path, GetRemoteOptions());
  }

  Result<std::vector<std::string>> ListPrefix(const std::string& prefix) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(prefix));
    return List(resolve_(), bk.first, bk.second, GetRemoteOptions(), 0);
  }

  Status Delete(const std::string& path) override {
    RF_ASSIGN_OR_RETURN(auto bk, SplitBucketKey(path));
    const S3Config config = resolve_();
    Result<HttpResponse> r =
        Send([&] { return S3Request(config, "DELETE", bk.first, bk.second, "", {}, {}); }, path,
             "delete", GetRemoteOptions().retry);
    if (!r.ok() && r.status().code() != StatusCode::kNotFound) return r.status();
    return Status::OK();
  }

 private:
  Result<std::vector<std::string>> List(const S3Config& config, const std::string& bucket,
                                        const std::string& prefix, const RemoteOptions& options,
                                        size_t limit) {
    std::vector<std::string> out;
    std::string token;
    const std::string root = config.url_scheme + "://" + bucket + "/";
    const std::string where = root + prefix;
    while (true) {
      std::string query;
      if (!token.empty()) query += Q("continuation-token", token) + "&";
      query += Q("list-type", "2");
      if (limit > 0) query += "&" + Q("max-keys", std::to_string(limit));
      query += "&" + Q("prefix", prefix);
      RF_ASSIGN_OR_RETURN(HttpResponse r,
                          Send([&] { return S3Request(config, "GET", bucket, "", query, {}, {}); },
                               where, "list", options.retry));
      size_t pos = 0;
      while (true) {
        std::string contents = XmlValue(r.body, "Contents", &pos);
        if (pos == std::string::npos) break;
        out.push_back(root + XmlValue(contents, "Key"));
      }
      if (XmlValue(r.body, "IsTruncated") != "true" || limit > 0) break;
      token = XmlValue(r.body, "NextContinuationToken");
      if (token.empty()) break;
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<FileInfo> StatWith(const S3Config& config, const std::string& bucket,
                            const std::string& key, const std::string& url,
                            const RemoteOptions& options) {
    if (key.empty() || key.back() == '/') {
      return InvalidArgumentError("'" + url + "' names no object (empty key or ending in '/')");
    }
    Result<HttpResponse> r =
        Send([&] { return S3Request(config, "HEAD", bucket, key, "", {}, {}); }, url, "stat",
             options.retry);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kNotFound) {
        // A "folder": keys exist under key + "/".
        Result<std::vector<std::string>> under = List(config, bucket, key + "/", options, 1);
        if (under.ok() && !under->empty()) {
          FileInfo info;
          info.is_directory = true;
          return info;
        }
        return NotFoundError("no such object: '" + url + "'");
      }
      return r.status();
    }
    FileInfo info;
    info.etag = r->Header("etag");
    const std::string length = r->Header("content-length");
    info.size = length.empty() ? 0 : std::stoull(length);
    return info;
  }

  std::function<S3Config()> resolve_;
};

}  // namespace

FileSystem* S3FileSystemInstance() {
  static FileSystem* fs = new S3FileSystem(ResolveS3Config);
  return fs;
}

std::unique_ptr<FileSystem> NewS3CompatibleFileSystem(std::function<S3Config()> resolve) {
  return std::make_unique<S3FileSystem>(std::move(resolve));
}

}  // namespace recordflow::io::internal
