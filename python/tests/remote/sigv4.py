"""A minimal AWS Signature Version 4 client for the test servers (stdlib only).

It signs path-style requests to an S3-compatible endpoint so the server scripts can check
readiness and the tests can make requests with a right or a wrong secret without botocore.
Payloads are signed in full (x-amz-content-sha256 = hex SHA-256 of the body).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import urllib.parse


def _h(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sign(method: str, host: str, path: str, query: dict[str, str] | None, headers: dict,
         body: bytes, access_key: str, secret_key: str, region: str = "us-east-1",
         service: str = "s3", now: datetime.datetime | None = None) -> dict:
    """Returns `headers` plus Host, x-amz-date, x-amz-content-sha256 and Authorization."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = now.strftime("%Y%m%d")
    payload_hash = hashlib.sha256(body).hexdigest()
    hdrs = {k.lower(): str(v).strip() for k, v in headers.items()}
    hdrs["host"] = host
    hdrs["x-amz-date"] = amz_date
    hdrs["x-amz-content-sha256"] = payload_hash
    # Like the AWS SDKs, leave hop-by-hop headers that proxies may rewrite out of the signature.
    signed = sorted(k for k in hdrs if k not in ("expect", "connection", "user-agent"))
    canon_headers = "".join(f"{k}:{hdrs[k]}\n" for k in signed)
    canon_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in sorted((query or {}).items()))
    canon_path = urllib.parse.quote(path, safe="/-_.~")
    canon = "\n".join([method, canon_path, canon_query, canon_headers, ";".join(signed),
                       payload_hash])
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canon.encode()).hexdigest()])
    k = _h(_h(_h(_h(("AWS4" + secret_key).encode(), day), region), service), "aws4_request")
    sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    hdrs["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                             f"SignedHeaders={';'.join(signed)}, Signature={sig}")
    return hdrs


def request(endpoint: str, method: str, path: str, *, access_key: str, secret_key: str,
            body: bytes = b"", headers: dict | None = None, query: dict | None = None,
            region: str = "us-east-1", timeout: float = 30.0):
    """Signed request to `endpoint` (http://host:port); returns (status, headers, body)."""
    u = urllib.parse.urlsplit(endpoint)
    host = u.netloc
    hdrs = sign(method, host, path, query, headers or {}, body, access_key, secret_key, region)
    target = urllib.parse.quote(path, safe="/-_.~")
    if query:
        target += "?" + urllib.parse.urlencode(sorted(query.items()), quote_via=urllib.parse.quote)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request(method, target, body=body or None, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()
