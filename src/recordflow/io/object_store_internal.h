// Pieces shared by the object-store file systems (s3, http): ranged reads with resume.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "http_client.h"

namespace recordflow::io::internal {

// Builds the request for bytes [first, last] (inclusive), signed afresh for each attempt.
using RangeRequestMaker = std::function<HttpRequest(uint64_t first, uint64_t last)>;

// Reads up to dst.size() bytes at `offset` of `url` with ranged GETs. A transfer that fails
// midway is retried from the byte where it stopped (RetryOptions bound the attempts and time);
// a server that ignores Range (200) is skipped forward to `offset`. Returns the bytes read
// (fewer than dst.size() only at the end of the object). Errors: kNotFound, kPermissionDenied,
// kFailedPrecondition (the object changed while being read: 412), kIOError naming URL and
// offset. `last_response` (optional) receives the status and headers of the final answer
// (Content-Range, ETag), e.g. to learn an object's size from its first ranged GET.
Result<size_t> FetchRange(const std::string& url, const RetryOptions& options, uint64_t offset,
                          std::span<std::byte> dst, const RangeRequestMaker& make,
                          HttpResponse* last_response = nullptr);

// The object size in a Content-Range header ("bytes 0-99/1234" -> 1234, "bytes */0" -> 0);
// nullopt when absent or unknown ("*").
std::optional<uint64_t> ContentRangeTotal(std::string_view content_range);

}  // namespace recordflow::io::internal
