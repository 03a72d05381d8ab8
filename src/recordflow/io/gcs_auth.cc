// OAuth2 access tokens for gs://, found as Google's client libraries find them (gcs_internal.h).
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "gcs_internal.h"
#include "http_client.h"
#include "recordflow/core/json.h"
#include "sigv4.h"

namespace recordflow::io::internal {
namespace {

constexpr char kScope[] = "https://www.googleapis.com/auth/devstorage.read_write";
constexpr char kDefaultTokenUri[] = "https://oauth2.googleapis.com/token";

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

struct CachedToken {
  std::string header;  // "Bearer ..."; empty: anonymous
  std::chrono::steady_clock::time_point expires;
};

std::mutex cache_mu;
std::map<std::string, CachedToken>& Cache() {
  static auto* c = new std::map<std::string, CachedToken>();
  return *c;
}

std::string Base64Url(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

// RS256 (RSASSA-PKCS1-v1_5 with SHA-256) over `data` with a PEM private key.
Result<std::string> SignRs256(const std::string& pem, std::string_view data,
                              const std::string& where) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return ResourceExhaustedError("cannot allocate a BIO");
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) {
    return InvalidArgumentError("the private_key in " + where + " is not a PEM private key");
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::string sig;
  size_t len = 0;
  bool ok = ctx != nullptr && EVP_DigestSignInit(ctx, nullptr, EVP_sha256(), nullptr, key) == 1 &&
            EVP_DigestSign(ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()),
                           data.size()) == 1;
  if (ok) {
    sig.resize(len);
    ok = EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                        reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1;
    sig.resize(len);
  }
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  if (!ok) return InvalidArgumentError("cannot sign with the private_key in " + where);
  return sig;
}

std::string FormEncode(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) {
    if (!out.empty()) out += "&";
    out += UriEncode(k, false) + "=" + UriEncode(v, false);
  }
  return out;
}

// Reads {"access_token": ..., "expires_in": ...} from a token endpoint's answer.
Result<CachedToken> ParseTokenAnswer(const HttpResponse& r, const std::string& source) {
  if (r.status < 200 || r.status >= 300) {
    // OAuth2 error answers carry "error" and "error_description", never a token.
    std::string why = "HTTP " + std::to_string(r.status);
    Result<JsonValue> j = ParseJson(r.body, "the token endpoint's answer");
    if (j.ok()) {
      const std::string e = j->FindText("error");
      const std::string d = j->FindText("error_description");
      if (!e.empty()) why += " " + e;
      if (!d.empty()) why += ": " + d;
    }
    if (r.status == 400 || r.status == 401 || r.status == 403) {
      return PermissionDeniedError("cannot obtain a GCS access token from " + source + ": " + why);
    }
    return IOError("cannot obtain a GCS access token from " + source + ": " + why);
  }
  RF_ASSIGN_OR_RETURN(JsonValue j, ParseJson(r.body, "the token answer of " + source));
  const std::string token = j.FindText("access_token");
  if (token.empty()) return IOError("no access_token in the answer of " + source);
  long expires_in = 3600;
  const std::string e = j.FindText("expires_in");
  if (!e.empty()) expires_in = std::strtol(e.c_str(), nullptr, 10);
  CachedToken t;
  t.header = "Bearer " + token;
  // Refresh a minute early so a token never expires between the check and the request.
  t.expires =
      std::chrono::steady_clock::now() + std::chrono::seconds(std::max(0L, expires_in - 60));
  return t;
}

// One token request, retried while the transport fails or the server answers a retryable
// status; any other answer goes back for ParseTokenAnswer to read.
Result<HttpResponse> RequestToken(const HttpRequest& request, const RetryOptions& retry,
                                  const std::function<std::string()>& describe) {
  HttpResponse response;
  Status s = RunWithRetries(
      retry,
      [&]() -> Attempt {
        Attempt a = HttpClient::Default().Perform(request, retry, &response);
        if (!a.status.ok()) return a;
        if (IsRetryableHttpStatus(response.status)) {
          return {IOError("HTTP " + std::to_string(response.status)), true};
        }
        return {};
      },
      describe);
  if (!s.ok()) return s;
  return response;
}

Result<HttpResponse> PostForm(const std::string& url, const std::string& body,
                              const RetryOptions& retry, const std::string& source) {
  HttpRequest r;
  r.method = "POST";
  r.url = url;
  r.body = body;
  r.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
  return RequestToken(r, retry, [&] { return "requesting a GCS access token from " + source; });
}

Result<CachedToken> ServiceAccountToken(const JsonValue& key, const std::string& file,
                                        const RetryOptions& retry) {
  const std::string email = key.FindText("client_email");
  const std::string pem = key.FindText("private_key");
  std::string token_uri = key.FindText("token_uri");
  if (token_uri.empty()) token_uri = kDefaultTokenUri;
  if (email.empty() || pem.empty()) {
    return InvalidArgumentError("service-account key " + file +
                                " lacks client_email or private_key");
  }
  const long now = static_cast<long>(std::time(nullptr));
  std::string header = R"({"alg":"RS256","typ":"JWT")";
  const std::string kid = key.FindText("private_key_id");
  if (!kid.empty()) header += R"(,"kid":)" + JsonQuote(kid);
  header += "}";
  const std::string claims = R"({"iss":)" + JsonQuote(email) + R"(,"scope":)" + JsonQuote(kScope) +
                             R"(,"aud":)" + JsonQuote(token_uri) + R"(,"iat":)" +
                             std::to_string(now) + R"(,"exp":)" + std::to_string(now + 3600) + "}";
  const std::string signing_input = Base64Url(header) + "." + Base64Url(claims);
  RF_ASSIGN_OR_RETURN(std::string sig, SignRs256(pem, signing_input, file));
  const std::string jwt = signing_input + "." + Base64Url(sig);
  const std::string source = token_uri + " (service account " + email + " from " + file + ")";
  RF_ASSIGN_OR_RETURN(
      HttpResponse r,
      PostForm(token_uri,
               FormEncode({{"grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
                           {"assertion", jwt}}),
               retry, source));
  return ParseTokenAnswer(r, source);
}

Result<CachedToken> AuthorizedUserToken(const JsonValue& key, const std::string& file,
                                        const RetryOptions& retry) {
  std::string token_uri = key.FindText("token_uri");
  if (token_uri.empty()) token_uri = kDefaultTokenUri;
  const std::string source = token_uri + " (refresh token from " + file + ")";
  RF_ASSIGN_OR_RETURN(HttpResponse r,
                      PostForm(token_uri,
                               FormEncode({{"grant_type", "refresh_token"},
                                           {"client_id", key.FindText("client_id")},
                                           {"client_secret", key.FindText("client_secret")},
                                           {"refresh_token", key.FindText("refresh_token")}}),
                               retry, source));
  return ParseTokenAnswer(r, source);
}

Result<CachedToken> FileToken(const std::string& file, const RetryOptions& retry) {
  std::ifstream in(file);
  if (!in) {
    return NotFoundError("cannot read the GCS credentials file " + file +
                         " (GOOGLE_APPLICATION_CREDENTIALS)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  RF_ASSIGN_OR_RETURN(JsonValue key, ParseJson(ss.str(), file));
  const std::string type = key.FindText("type");
  if (type == "service_account") return ServiceAccountToken(key, file, retry);
  if (type == "authorized_user") return AuthorizedUserToken(key, file, retry);
  return InvalidArgumentError("unsupported credentials type '" + type + "' in " + file +
                              " (supported: service_account, authorized_user)");
}

// The metadata server; `required` when GCE_METADATA_HOST names it (else an unreachable server
// means "not on Google Cloud": anonymous requests).
Result<CachedToken> MetadataToken(const RetryOptions& retry, bool* unreachable) {
  std::string host = Env("GCE_METADATA_HOST");
  const bool explicit_host = !host.empty();
  if (!explicit_host) host = "metadata.google.internal";
  const std::string url =
      "http://" + host + "/computeMetadata/v1/instance/service-accounts/default/token";
  RetryOptions probe = retry;
  if (!explicit_host) {
    // Off Google Cloud the name does not resolve or connect: decide fast.
    probe.max_attempts = 1;
    probe.connect_timeout = std::chrono::milliseconds(1000);
  }
  HttpRequest r;
  r.url = url;
  r.headers = {{"Metadata-Flavor", "Google"}};
  Result<HttpResponse> response = RequestToken(
      r, probe, [&] { return "requesting a GCS access token from the metadata server " + url; });
  if (!response.ok()) {
    *unreachable = !explicit_host;
    return response.status();
  }
  return ParseTokenAnswer(*response, "the metadata server " + url);
}

Result<CachedToken> FetchToken(const std::string& source, const RetryOptions& retry) {
  if (source.starts_with("file:")) return FileToken(source.substr(5), retry);
  bool unreachable = false;
  Result<CachedToken> t = MetadataToken(retry, &unreachable);
  if (!t.ok() && unreachable) {
    // No credentials anywhere: anonymous requests (public buckets), re-probed in 5 minutes.
    CachedToken anon;
    anon.expires = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    return anon;
  }
  return t;
}

std::string WellKnownFile() {
  std::string dir = Env("CLOUDSDK_CONFIG");
  if (dir.empty()) dir = Env("HOME") + "/.config/gcloud";
  const std::string f = dir + "/application_default_credentials.json";
  std::ifstream in(f);
  return in ? f : "";
}

}  // namespace

GcsTarget ResolveGcsTarget() {
  GcsTarget t;
  std::string host = Env("STORAGE_EMULATOR_HOST");
  if (!host.empty()) {
    if (host.find("://") == std::string::npos) host = "http://" + host;
    while (!host.empty() && host.back() == '/') host.pop_back();
    t.base = host;
    t.emulator = true;
  } else {
    t.base = Env("GCS_ENDPOINT_URL");
    if (t.base.empty()) t.base = "https://storage.googleapis.com";
    while (!t.base.empty() && t.base.back() == '/') t.base.pop_back();
  }
  return t;
}

Result<std::string> GcsAuthorization(const RetryOptions& retry) {
  if (!Env("STORAGE_EMULATOR_HOST").empty()) return std::string();
  const std::string direct = Env("GOOGLE_OAUTH_ACCESS_TOKEN");
  if (!direct.empty()) return "Bearer " + direct;
  std::string source;
  const std::string file = Env("GOOGLE_APPLICATION_CREDENTIALS");
  if (!file.empty()) {
    source = "file:" + file;
  } else if (const std::string wk = WellKnownFile(); !wk.empty()) {
    source = "file:" + wk;
  } else {
    source = "metadata:" + Env("GCE_METADATA_HOST");
  }
  // One fetch at a time: concurrent readers wait for the first one's token.
  std::lock_guard lock(cache_mu);
  auto it = Cache().find(source);
  if (it != Cache().end() && std::chrono::steady_clock::now() < it->second.expires) {
    return it->second.header;
  }
  RF_ASSIGN_OR_RETURN(CachedToken t, FetchToken(source, retry));
  Cache()[source] = t;
  return t.header;
}

void ResetGcsAuthCache() {
  std::lock_guard lock(cache_mu);
  Cache().clear();
}

S3Config ResolveGcsHmacConfig() {
  S3Config c;
  c.credentials.access_key = Env("GCS_HMAC_ACCESS_KEY_ID");
  c.credentials.secret_key = Env("GCS_HMAC_SECRET");
  c.region = "auto";
  c.endpoint = Env("GCS_XML_ENDPOINT");
  if (c.endpoint.empty()) c.endpoint = "https://storage.googleapis.com";
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  c.path_style = true;
  c.url_scheme = "gs";
  return c;
}

}  // namespace recordflow::io::internal
