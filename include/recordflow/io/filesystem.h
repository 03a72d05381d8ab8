// Where files live: one FileSystem per URL scheme, so every layer above (format, index,
// pipeline, convert, CLI) opens local paths and remote objects through the same calls.
//
//   /local/path, relative/path, file:///abs  -> the local file system
//   s3://bucket/key                          -> S3 and S3-compatible stores (SigV4)
//   gs://bucket/key                          -> Google Cloud Storage (JSON API + OAuth2, or
//                                               the XML API with HMAC keys; emulator)
//   http://host/path, https://host/path      -> read-only, ranged GETs (sequential fallback)
//
// Remote configuration follows the AWS SDKs (docs/remote-storage.md): AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3
// / AWS_ENDPOINT_URL (custom endpoints use path-style addressing), AWS_PROFILE with
// ~/.aws/credentials and ~/.aws/config. gs:// follows Google's client libraries:
// STORAGE_EMULATOR_HOST, GOOGLE_OAUTH_ACCESS_TOKEN, GOOGLE_APPLICATION_CREDENTIALS, the metadata
// server (GCE_METADATA_HOST), or HMAC keys GCS_HMAC_ACCESS_KEY_ID / GCS_HMAC_SECRET.
// Credentials never appear in error messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/io/file.h"

namespace recordflow::io {

// How failed remote requests are retried: 5xx, 429/SlowDown, connection resets and timeouts.
// Attempt n (from 0) waits a random time in [d/2, d] with d = min(max_backoff,
// initial_backoff * 2^n); no attempt starts once `max_total` has passed since the first.
struct RetryOptions {
  int max_attempts = 10;
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  std::chrono::milliseconds max_total{60000};
  std::chrono::milliseconds connect_timeout{10000};
  // A transfer slower than 1 KiB/s for this long is a timeout (and retried).
  std::chrono::milliseconds stall_timeout{30000};
};

// The wait before retry number `attempt` (0-based) given a uniform random `u` in [0, 1).
std::chrono::milliseconds BackoffDelay(const RetryOptions& options, int attempt, double u);

struct RemoteOptions {
  RetryOptions retry;
  // A sequentially read object is fetched in parts of this size, `read_ahead_parts` of them
  // at once by concurrent ranged GETs; that read-ahead memory is parts x part size per open
  // object.
  // part_size is autotuned per opened object between part_size and part_size_max (whole MiB)
  // so that a GET's first-byte latency stays under a tenth of its time (measured averages of
  // this process's GETs); part_size_max <= part_size fixes it at part_size.
  uint64_t part_size = 8ull << 20;
  uint64_t part_size_max = 16ull << 20;
  int read_ahead_parts = 4;
  // Opening an s3:// object is one ranged GET of its first `open_read_size` bytes (at most
  // part_size), which also gives its size and ETag: an object up to this size is read by that
  // one request; a larger one keeps these bytes until the reader moves past them.
  uint64_t open_read_size = 256ull << 10;
  // Writes upload parts of this size (S3 multipart minimum is 5 MiB).
  uint64_t upload_part_size = 16ull << 20;
};

// Process-wide options for remote files opened after the call. Thread-safe.
void SetRemoteOptions(const RemoteOptions& options);
RemoteOptions GetRemoteOptions();

// Credentials handed over explicitly (Python passes what botocore resolved); they take
// precedence over the environment and profile files. Empty access_key clears them.
void SetS3Credentials(std::string access_key, std::string secret_key, std::string session_token);

struct FileInfo {
  uint64_t size = 0;
  std::string etag;  // empty for local files
  bool is_directory = false;
};

// The parts of a URL: scheme "s3", authority "bucket", key "a/b.tfrecord". For a local path
// scheme is empty and key is the path.
struct Url {
  std::string scheme;
  std::string authority;
  std::string key;
};
Url ParseUrl(std::string_view path);

// True for "scheme://..." paths other than file://.
bool IsRemotePath(std::string_view path);

// One store. Implementations: local, s3, gs, http(s).
//
// Thread safety: thread-safe.
// Lifetime: FileSystemForPath returns process-lifetime singletons.
class FileSystem {
 public:
  virtual ~FileSystem() = default;
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) = 0;
  // A writer whose output appears under `path` only on Commit().
  virtual Result<std::unique_ptr<AtomicFileWriter>> OpenWritable(const std::string& path,
                                                                 AtomicFileOptions options) = 0;
  // kNotFound when nothing is there.
  virtual Result<FileInfo> Stat(const std::string& path) = 0;
  // Every file whose path starts with `prefix` (object stores: every key under the prefix,
  // recursively), as full paths/URLs in lexicographic order. kUnimplemented for HTTP.
  virtual Result<std::vector<std::string>> ListPrefix(const std::string& prefix) = 0;
  // Removes one file; a missing file is OK.
  virtual Status Delete(const std::string& path) = 0;

  // Multipart uploads left open by AtomicFileOptions::defer_completion. The default (stores
  // without them: local, http, gs:// through the JSON API) is kUnimplemented.
  // Completes `upload`: its object appears whole under upload.url. Errors: kNotFound (no such
  // upload: completed or aborted already), kIOError naming the URL.
  virtual Status CompleteUpload(const PendingUpload& upload);
  // Aborts the upload (its parts are deleted); an unknown upload is OK.
  virtual Status AbortUpload(const std::string& url, const std::string& upload_id);
  // The open uploads of keys starting with `prefix` (etags and size left empty), by URL.
  virtual Result<std::vector<PendingUpload>> ListUploads(const std::string& prefix);
};

// The file system for `path`'s scheme. Errors: kInvalidArgument for an unknown scheme.
Result<FileSystem*> FileSystemForPath(std::string_view path);

// Expands a pattern with * ? [..] (which do not match '/'): locally with glob(3); on object
// stores by listing the prefix before the first wildcard and matching keys. Results sorted.
// A path without wildcards is returned as is if it exists. Errors: kNotFound when nothing
// matches, and the listing's errors.
Result<std::vector<std::string>> GlobPaths(const std::string& pattern);

// Stat through FileSystemForPath.
Result<FileInfo> StatPath(const std::string& path);

// FileSystem::CompleteUpload / AbortUpload / ListUploads / Delete / ListPrefix through
// FileSystemForPath.
Status CompletePendingUpload(const PendingUpload& upload);
Status AbortPendingUpload(const std::string& url, const std::string& upload_id);
Result<std::vector<PendingUpload>> ListPendingUploads(const std::string& prefix);
Status DeletePath(const std::string& path);
Result<std::vector<std::string>> ListPath(const std::string& prefix);

}  // namespace recordflow::io
