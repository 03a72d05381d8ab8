#include "http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <random>
#include <thread>

namespace recordflow::io::internal {
namespace {

constexpr size_t kMaxErrorBody = 1 << 20;

struct Transfer {
  CURL* curl;
  HttpResponse* response;
  const BodySink* sink;
  bool stopped_by_sink = false;
  std::string_view upload;
  size_t uploaded = 0;
};

bool IsSuccess(long status) { return status >= 200 && status < 300; }

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (IsSuccess(status) && t->sink != nullptr && *t->sink) {
    if (!(*t->sink)(data, bytes)) {
      t->stopped_by_sink = true;
      return 0;
    }
    return bytes;
  }
  const size_t room = kMaxErrorBody - std::min(kMaxErrorBody, t->response->body.size());
  t->response->body.append(data, std::min(room, bytes));
  return bytes;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  std::string_view line(data, bytes);
  if (line.starts_with("HTTP/")) {
    t->response->headers.clear();  // a new response (after a redirect or 100 Continue)
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return bytes;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) {
    value.remove_suffix(1);
  }
  t->response->headers.emplace_back(std::move(name), std::string(value));
  return bytes;
}

size_t OnUpload(char* dst, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t want = std::min(size * n, t->upload.size() - t->uploaded);
  std::copy_n(t->upload.data() + t->uploaded, want, dst);
  t->uploaded += want;
  return want;
}

// Running averages (exponential, weight 1/4 for a new sample) of GETs' first-byte latency and
// transfer rate, for AutotunedPartSize. Guarded by timing_mu.
std::mutex timing_mu;
double avg_first_byte_s = -1;
double avg_bytes_per_s = -1;

void RecordGetTiming(CURL* curl) {
  curl_off_t first_us = 0, total_us = 0, bytes = 0;
  if (curl_easy_getinfo(curl, CURLINFO_STARTTRANSFER_TIME_T, &first_us) != CURLE_OK ||
      curl_easy_getinfo(curl, CURLINFO_TOTAL_TIME_T, &total_us) != CURLE_OK ||
      curl_easy_getinfo(curl, CURLINFO_SIZE_DOWNLOAD_T, &bytes) != CURLE_OK) {
    return;
  }
  if (bytes < (64 << 10) || total_us <= first_us) return;
  const double first = static_cast<double>(first_us) / 1e6;
  const double rate = static_cast<double>(bytes) / (static_cast<double>(total_us - first_us) / 1e6);
  std::lock_guard lock(timing_mu);
  avg_first_byte_s = avg_first_byte_s < 0 ? first : 0.75 * avg_first_byte_s + 0.25 * first;
  avg_bytes_per_s = avg_bytes_per_s < 0 ? rate : 0.75 * avg_bytes_per_s + 0.25 * rate;
}

struct CurlGlobal {
  CurlGlobal() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

}  // namespace

std::string HttpResponse::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return value;
  }
  return "";
}

HttpClient& HttpClient::Default() {
  static CurlGlobal global;
  static HttpClient* client = new HttpClient();  // never destroyed: used until process exit
  return *client;
}

HttpClient::~HttpClient() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::Acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::Release(void* handle) {
  std::lock_guard lock(mu_);
  idle_.push_back(handle);
}

Attempt HttpClient::Perform(const HttpRequest& request, const RetryOptions& options,
                            HttpResponse* response, const BodySink& sink) {
  *response = HttpResponse();
  CURL* curl = static_cast<CURL*>(Acquire());
  if (curl == nullptr) return {ResourceExhaustedError("cannot create an HTTP handle"), false};
  // Reset keeps the handle's live connections, so the next request reuses them.
  curl_easy_reset(curl);
  Transfer t{.curl = curl, .response = response, .sink = &sink, .upload = request.body};
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                   std::max(1L, static_cast<long>(options.stall_timeout.count() / 1000)));
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, OnUpload);
    curl_easy_setopt(curl, CURLOPT_READDATA, &t);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    if (request.method == "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "POST");
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  curl_slist* headers = nullptr;
  for (const auto& [name, value] : request.headers) {
    headers = curl_slist_append(headers, (name + ": " + value).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response->status);
  if (request.method == "GET" && IsSuccess(response->status) &&
      (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && t.stopped_by_sink))) {
    RecordGetTiming(curl);
  }
  Release(curl);
  if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && t.stopped_by_sink)) return {};
  // Malformed URLs and unsupported protocols fail again; every other transport error
  // (refused, reset, timeout, partial body, TLS handshake) may pass on another attempt.
  const bool retryable = rc != CURLE_URL_MALFORMAT && rc != CURLE_UNSUPPORTED_PROTOCOL &&
                         rc != CURLE_COULDNT_RESOLVE_HOST && rc != CURLE_WRITE_ERROR;
  return {IOError(std::string(request.method) + " " + request.url +
                  " failed: " + curl_easy_strerror(rc)),
          retryable};
}

uint64_t AutotunedPartSize(const RemoteOptions& options) {
  double first = 0, rate = 0;
  {
    std::lock_guard lock(timing_mu);
    first = avg_first_byte_s;
    rate = avg_bytes_per_s;
  }
  const uint64_t lo = options.part_size;
  const uint64_t hi = std::max(options.part_size, options.part_size_max);
  if (first < 0 || rate <= 0) return lo;  // nothing measured yet
  const double want = 9.0 * first * rate;
  if (want <= static_cast<double>(lo)) return lo;
  if (want >= static_cast<double>(hi)) return hi;
  constexpr uint64_t kMiB = 1 << 20;
  return std::min(hi, (static_cast<uint64_t>(want) + kMiB - 1) / kMiB * kMiB);
}

bool IsRetryableHttpStatus(long status) { return status >= 500 || status == 408 || status == 429; }

std::string XmlValue(std::string_view xml, std::string_view tag, size_t* pos) {
  const std::string open = std::string("<").append(tag).append(">");
  const std::string close = std::string("</").append(tag).append(">");
  const size_t from = pos != nullptr ? *pos : 0;
  const size_t a = xml.find(open, from);
  if (a == std::string_view::npos) {
    if (pos != nullptr) *pos = std::string_view::npos;
    return "";
  }
  const size_t b = xml.find(close, a + open.size());
  if (b == std::string_view::npos) {
    if (pos != nullptr) *pos = std::string_view::npos;
    return "";
  }
  if (pos != nullptr) *pos = b + close.size();
  std::string_view raw = xml.substr(a + open.size(), b - a - open.size());
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out.push_back(raw[i]);
      continue;
    }
    const size_t semi = raw.find(';', i);
    if (semi == std::string_view::npos) {
      out.push_back('&');
      continue;
    }
    std::string_view ent = raw.substr(i + 1, semi - i - 1);
    if (ent == "amp")
      out.push_back('&');
    else if (ent == "lt")
      out.push_back('<');
    else if (ent == "gt")
      out.push_back('>');
    else if (ent == "quot")
      out.push_back('"');
    else if (ent == "apos")
      out.push_back('\'');
    else if (ent.starts_with("#x"))
      out.push_back(static_cast<char>(std::stoi(std::string(ent.substr(2)), nullptr, 16)));
    else if (ent.starts_with("#"))
      out.push_back(static_cast<char>(std::stoi(std::string(ent.substr(1)))));
    else
      out.append(raw.substr(i, semi - i + 1));
    i = semi;
  }
  return out;
}

Status HttpErrorStatus(const HttpResponse& response, std::string_view url, std::string_view what) {
  std::string code = XmlValue(response.body, "Code");
  std::string detail = "HTTP " + std::to_string(response.status) + (code.empty() ? "" : " " + code);
  std::string msg = std::string(what) + " " + std::string(url) + ": " + detail;
  if (response.status == 404)
    return NotFoundError("no such object: " + std::string(url) + " (" + detail + ")");
  if (response.status == 401 || response.status == 403) {
    return PermissionDeniedError("access denied: " + msg +
                                 " (check the credentials and their permissions)");
  }
  return IOError(msg);
}

Status RunWithRetries(const RetryOptions& options, const std::function<Attempt()>& attempt,
                      const std::function<std::string()>& describe) {
  const auto start = std::chrono::steady_clock::now();
  thread_local std::minstd_rand rng(std::random_device{}());
  int n = 0;
  while (true) {
    Attempt a = attempt();
    ++n;
    if (a.status.ok() || !a.retryable) return a.status;
    const auto elapsed = std::chrono::steady_clock::now() - start;
    const auto delay =
        BackoffDelay(options, n - 1, std::uniform_real_distribution<double>(0, 1)(rng));
    if (n >= options.max_attempts || elapsed + delay > options.max_total) {
      const double secs = std::chrono::duration<double>(elapsed).count();
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f", secs);
      return IOError(describe() + ": gave up after " + std::to_string(n) + " attempts in " + buf +
                     " s: " + a.status.message());
    }
    std::this_thread::sleep_for(delay);
  }
}

}  // namespace recordflow::io::internal
