#include "sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>

namespace recordflow::io::internal {

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

std::string HexSha256(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                            c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

namespace {

std::string TrimAll(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> SortedHeaders(const SigV4Request& r) {
  auto headers = r.headers;
  for (auto& [name, value] : headers) value = TrimAll(value);
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return headers;
}

std::string SignedHeaders(const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string out;
  for (const auto& h : headers) {
    if (!out.empty() && out.substr(out.rfind(';') + 1) == h.first) continue;
    if (!out.empty()) out += ';';
    out += h.first;
  }
  return out;
}

}  // namespace

std::string CanonicalRequest(const SigV4Request& request) {
  const auto headers = SortedHeaders(request);
  std::string canonical_headers;
  for (size_t i = 0; i < headers.size(); ++i) {
    // Repeated names are joined with commas on one line.
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      canonical_headers.back() = ',';
      canonical_headers += headers[i].second + "\n";
      continue;
    }
    canonical_headers += headers[i].first + ":" + headers[i].second + "\n";
  }
  return request.method + "\n" + request.canonical_uri + "\n" + request.canonical_query + "\n" +
         canonical_headers + "\n" + SignedHeaders(headers) + "\n" + request.payload_hash;
}

std::string StringToSign(const SigV4Request& request, std::string_view amz_date,
                         std::string_view scope) {
  return "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + std::string(scope) + "\n" +
         HexSha256(CanonicalRequest(request));
}

namespace {
std::string Scope(std::string_view amz_date, std::string_view region, std::string_view service) {
  return std::string(amz_date.substr(0, 8)) + "/" + std::string(region) + "/" +
         std::string(service) + "/aws4_request";
}
}  // namespace

std::string SigV4Signature(const SigV4Request& request, const AwsCredentials& credentials,
                           std::string_view amz_date, std::string_view region,
                           std::string_view service) {
  std::string key = HmacSha256("AWS4" + credentials.secret_key, amz_date.substr(0, 8));
  key = HmacSha256(key, region);
  key = HmacSha256(key, service);
  key = HmacSha256(key, "aws4_request");
  return HexEncode(
      HmacSha256(key, StringToSign(request, amz_date, Scope(amz_date, region, service))));
}

std::string SigV4Authorization(const SigV4Request& request, const AwsCredentials& credentials,
                               std::string_view amz_date, std::string_view region,
                               std::string_view service) {
  return "AWS4-HMAC-SHA256 Credential=" + credentials.access_key + "/" +
         Scope(amz_date, region, service) +
         ", SignedHeaders=" + SignedHeaders(SortedHeaders(request)) +
         ", Signature=" + SigV4Signature(request, credentials, amz_date, region, service);
}

}  // namespace recordflow::io::internal
