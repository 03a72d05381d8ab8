#include "object_store_internal.h"

#include <algorithm>
#include <cstring>

namespace recordflow::io::internal {

Result<size_t> FetchRange(const std::string& url, const RetryOptions& options, uint64_t offset,
                          std::span<std::byte> dst, const RangeRequestMaker& make,
                          HttpResponse* last_response) {
  size_t got = 0;
  bool at_end = false;
  auto attempt = [&]() -> Attempt {
    const uint64_t first = offset + got;
    HttpRequest request = make(first, offset + dst.size() - 1);
    HttpResponse response;
    uint64_t skip = 0;  // bytes to drop when the server sends the whole object (200)
    // A 200 to a ranged request (no Content-Range) carries the object from byte 0.
    bool first_chunk = true;
    BodySink sink = [&](const char* data, size_t n) {
      if (first_chunk) {
        first_chunk = false;
        if (response.Header("content-range").empty()) skip = first;
      }
      size_t consumed = 0;
      if (skip > 0) {
        consumed = static_cast<size_t>(std::min<uint64_t>(skip, n));
        skip -= consumed;
      }
      const size_t take = std::min(n - consumed, dst.size() - got);
      std::memcpy(dst.data() + got, data + consumed, take);
      got += take;
      return got < dst.size();
    };
    Attempt a = HttpClient::Default().Perform(request, options, &response, sink);
    if (!a.status.ok()) return a;  // transport failure: `got` says where to resume
    if (last_response != nullptr) {
      last_response->status = response.status;
      last_response->headers = response.headers;
    }
    if (response.status == 416) {
      at_end = true;
      return {};
    }
    if (response.status == 412) {
      return {FailedPreconditionError("object " + url + " changed while it was read (at byte " +
                                      std::to_string(first) + "); reopen it"),
              false};
    }
    if (response.status < 200 || response.status >= 300) {
      Status s =
          HttpErrorStatus(response, url, "GET at byte offset " + std::to_string(first) + " of");
      return {s, IsRetryableHttpStatus(response.status)};
    }
    at_end = true;  // a complete 2xx transfer: what it did not give does not exist
    return {};
  };
  Status s = RunWithRetries(options, attempt, [&] {
    return "reading " + url + " at byte offset " + std::to_string(offset + got);
  });
  if (!s.ok()) return s;
  (void)at_end;
  return got;
}

std::optional<uint64_t> ContentRangeTotal(std::string_view content_range) {
  const size_t slash = content_range.rfind('/');
  if (slash == std::string_view::npos || slash + 1 >= content_range.size()) return std::nullopt;
  uint64_t total = 0;
  for (char c : content_range.substr(slash + 1)) {
    if (c < '0' || c > '9') return std::nullopt;  // "*": unknown
    if (total > (UINT64_MAX - 9) / 10) return std::nullopt;
    total = total * 10 + static_cast<uint64_t>(c - '0');
  }
  return total;
}

}  // namespace recordflow::io::internal
