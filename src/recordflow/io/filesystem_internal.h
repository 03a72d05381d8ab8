// Between filesystem.cc and the per-scheme implementations.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http_client.h"
#include "recordflow/io/filesystem.h"
#include "sigv4.h"

namespace recordflow::io::internal {

// Where and how S3 requests go, resolved as the AWS SDKs do (filesystem.h).
struct S3Config {
  AwsCredentials credentials;  // empty: unsigned (anonymous) requests
  std::string region;
  std::string endpoint;  // "http://127.0.0.1:8333"; empty for AWS itself
  bool path_style = false;
  std::string url_scheme = "s3";  // of the URLs that listings return ("gs" for GCS HMAC)
};
S3Config ResolveS3Config();
void SetExplicitS3Credentials(AwsCredentials credentials);
std::string AmzDateNow();

// A request for `key` in `bucket` (empty key: the bucket itself), signed when credentials
// are set. `canonical_query` must already be sorted and encoded.
HttpRequest S3Request(const S3Config& config, std::string method, const std::string& bucket,
                      const std::string& key, const std::string& canonical_query,
                      std::string_view body, std::vector<std::pair<std::string, std::string>> extra,
                      std::string_view service = "s3");

FileSystem* LocalFileSystemInstance();
FileSystem* S3FileSystemInstance();
FileSystem* HttpFileSystemInstance();
// An s3://-style file system whose configuration comes from `resolve` (called per operation).
std::unique_ptr<FileSystem> NewS3CompatibleFileSystem(std::function<S3Config()> resolve);

}  // namespace recordflow::io::internal
