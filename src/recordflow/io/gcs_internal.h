// gs:// between gcs_auth.cc, gcs_filesystem.cc and filesystem.cc.
//
// Two routes to Google Cloud Storage:
//  - the JSON API (stat, list, delete, ranged media downloads, resumable uploads) with an OAuth2
//    bearer token or, against STORAGE_EMULATOR_HOST, without auth;
//  - with HMAC keys (GCS_HMAC_ACCESS_KEY_ID / GCS_HMAC_SECRET), the XML API's S3-compatible
//    interface signed with SigV4 (region "auto"), served by the s3:// implementation.
#pragma once

#include <string>

#include "filesystem_internal.h"

namespace recordflow::io::internal {

// Where JSON API requests go and whether they carry auth.
struct GcsTarget {
  // STORAGE_EMULATOR_HOST, else GCS_ENDPOINT_URL (a private endpoint; auth as usual), else
  // "https://storage.googleapis.com".
  std::string base;
  bool emulator = false;  // STORAGE_EMULATOR_HOST set: plain requests, no auth
};
GcsTarget ResolveGcsTarget();

// The "Authorization" header value for the JSON API ("Bearer ..."), or empty for anonymous
// requests (the emulator; or no credentials found anywhere, for public buckets). Sources, first
// found wins: GOOGLE_OAUTH_ACCESS_TOKEN; GOOGLE_APPLICATION_CREDENTIALS (service_account key:
// an RS256 JWT exchanged at its token_uri; authorized_user: its refresh token); gcloud's
// application_default_credentials.json; the metadata server (GCE_METADATA_HOST, else
// metadata.google.internal). Tokens are cached until a minute before they expire. Errors never
// contain a token or key: kPermissionDenied / kIOError naming the source (file, URL).
Result<std::string> GcsAuthorization(const RetryOptions& retry);

// Forgets cached tokens (tests; a changed credentials file is picked up after expiry anyway).
void ResetGcsAuthCache();

// The XML API through SigV4 with HMAC keys, or nullopt-like empty access key when not set.
// GCS_HMAC_ACCESS_KEY_ID / GCS_HMAC_SECRET; endpoint GCS_XML_ENDPOINT (default
// https://storage.googleapis.com); region "auto"; path-style addressing.
S3Config ResolveGcsHmacConfig();

// The file systems for gs:// (JSON API) and gs:// through HMAC keys (XML API, SigV4).
FileSystem* GcsFileSystemInstance();
FileSystem* GcsHmacFileSystemInstance();

// The gs:// file system for the present environment: HMAC keys when set (and no emulator),
// else the JSON API.
FileSystem* GcsFileSystemForEnvironment();

}  // namespace recordflow::io::internal
