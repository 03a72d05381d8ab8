// HTTP(S) requests through libcurl, with pooled connections and a retry loop with backoff.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/io/filesystem.h"

namespace recordflow::io::internal {

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string_view body;  // sent for PUT and POST
};

struct HttpResponse {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;  // the body when no sink took it (capped at 1 MiB for errors)
  std::string Header(std::string_view lower_name) const;
};

// Receives the body of a 2xx response; returns false to end the transfer early (not an error).
using BodySink = std::function<bool(const char* data, size_t n)>;

// One attempt's outcome: OK, or an error that says whether retrying may help.
struct Attempt {
  Status status;
  bool retryable = false;
};

// Thread safety: thread-safe. Connections are reused across requests (a pool of handles).
class HttpClient {
 public:
  static HttpClient& Default();
  ~HttpClient();
  // Sends one request. A transport failure (reset, timeout, refused) is a retryable kIOError;
  // any HTTP status is OK here (the caller judges it). `sink` (optional) takes 2xx bodies.
  Attempt Perform(const HttpRequest& request, const RetryOptions& options, HttpResponse* response,
                  const BodySink& sink = nullptr);

 private:
  HttpClient() = default;
  void* Acquire();
  void Release(void* handle);
  std::mutex mu_;
  std::vector<void*> idle_;
};

// The part size for sequential reads of a newly opened object: `options.part_size` raised (up to
// `options.part_size_max`, in whole MiB) until the first-byte latency is at most a tenth of a
// part's time, i.e. part >= 9 x latency x throughput, from running averages of the GETs this
// process has made (HttpClient records every 2xx GET of 64 KiB or more). Thread-safe.
uint64_t AutotunedPartSize(const RemoteOptions& options);

// 5xx, 408 and 429 (S3's SlowDown is a 503).
bool IsRetryableHttpStatus(long status);

// The error for a final non-2xx response to a request for `url`: 404 -> kNotFound, 401/403 ->
// kPermissionDenied, others kIOError; names the URL, the status and the store's error code.
Status HttpErrorStatus(const HttpResponse& response, std::string_view url, std::string_view what);

// Runs `attempt` until it returns OK or a non-retryable error, or the retry budget
// (RetryOptions) is spent; then the error is kIOError "<describe()>: gave up after N attempts
// in S s: <last error>" (describe() is called then, so it can name the offset reached).
Status RunWithRetries(const RetryOptions& options, const std::function<Attempt()>& attempt,
                      const std::function<std::string()>& describe);

// The text of the first <tag>...</tag> in `xml` (entities decoded), or empty.
std::string XmlValue(std::string_view xml, std::string_view tag, size_t* pos = nullptr);

}  // namespace recordflow::io::internal
