// AWS Signature Version 4 (HMAC-SHA256), for S3 and for GCS's XML API with HMAC keys.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace recordflow::io::internal {

struct AwsCredentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // empty unless temporary credentials
  bool empty() const { return access_key.empty(); }
};

// What is signed. Header names must be lower case; `host` must be among them. Values are
// trimmed and inner runs of spaces collapsed when canonicalised.
struct SigV4Request {
  std::string method;
  std::string canonical_uri;    // already URI-encoded, e.g. "/bucket/my%20key"
  std::string canonical_query;  // already canonical: sorted, encoded "a=1&b=2"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string payload_hash;  // hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

std::string HexSha256(std::string_view data);
std::string HexEncode(std::string_view bytes);
std::string HmacSha256(std::string_view key, std::string_view data);

// Percent-encodes everything except A-Z a-z 0-9 - . _ ~ (and '/' when `keep_slash`).
std::string UriEncode(std::string_view s, bool keep_slash);

std::string CanonicalRequest(const SigV4Request& request);
std::string StringToSign(const SigV4Request& request, std::string_view amz_date,
                         std::string_view scope);
// The hex signature. `amz_date` is "YYYYMMDDTHHMMSSZ".
std::string SigV4Signature(const SigV4Request& request, const AwsCredentials& credentials,
                           std::string_view amz_date, std::string_view region,
                           std::string_view service);
// The Authorization header value.
std::string SigV4Authorization(const SigV4Request& request, const AwsCredentials& credentials,
                               std::string_view amz_date, std::string_view region,
                               std::string_view service);

}  // namespace recordflow::io::internal
