"""gs:// through the real GCS emulator (gcp-storage-emulator, JSON API) and, for OAuth2, a
loopback token endpoint that verifies the service account's RS256 JWT with its public key in
front of the emulator. Every record is compared with what was written."""
from __future__ import annotations

import base64
import http.client
import http.server
import json
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qs

import pytest

import recordflow as rf
from remote.records import (
    check_aborted_writer_leaves_no_object,
    check_cli_count_cat_verify_index,
    check_glob_global_shuffle_and_checkpoint,
    check_read_through_fault_proxy,
    check_round_trip_gzip_and_index,
    remote_part_sizes,
)
from remote.records import records as _records
from remote.records import write as _write


def _url(gcs, key: str) -> str:
    return f"gs://{gcs.bucket}/{gcs.prefix}/{key}"


def test_gcs_round_trip_gzip_and_indexed_reader(gcs):
    check_round_trip_gzip_and_index(lambda key: _url(gcs, key))


def test_gcs_missing_object_and_bucket_are_not_found(gcs):
    with pytest.raises(rf.NotFoundError, match="nope.tfrecord"):
        rf.RecordReader(_url(gcs, "nope.tfrecord"))
    with pytest.raises(rf.NotFoundError, match="gs://no-such-bucket-rf/x"):
        rf.RecordReader("gs://no-such-bucket-rf/x")


def test_gcs_glob_from_files_global_shuffle_and_checkpoint(gcs):
    check_glob_global_shuffle_and_checkpoint(lambda key: _url(gcs, key))


@pytest.fixture
def small_chunks():
    with remote_part_sizes(64 * 1024, 256 * 1024):
        yield


def test_gcs_writer_closed_by_an_exception_leaves_no_object(gcs, small_chunks):
    # 1.8 MB in 256 KiB chunks: a session with chunks.
    check_aborted_writer_leaves_no_object(_url(gcs, "aborted.tfrecord"), 6, 300_000)


def test_cli_count_cat_verify_on_gcs(gcs):
    check_cli_count_cat_verify_index(_url(gcs, "cli.tfrecord"), _url(gcs, "missing.tfrecord"))


@pytest.mark.parametrize("fault", [
    dict(match_method="GET", match_path="/download/", fail_count=2, fail_status=503),
    dict(match_method="GET", match_path="/download/", drop_after_bytes=150_000, drop_count=2),
])
def test_gcs_retries_through_the_fault_proxy(gcs, fault_proxy_factory, fault):
    proxy = fault_proxy_factory(gcs.endpoint)
    check_read_through_fault_proxy(_url(gcs, "faults.tfrecord"), proxy,
                                   {"STORAGE_EMULATOR_HOST": proxy.url}, fault)


def test_gcs_upload_chunk_failures_resume_the_session(gcs, fault_proxy_factory, monkeypatch,
                                                      small_chunks):
    # 503s on the resumable session's PUTs: the writer asks the session how much it holds and
    # sends the rest; the object is whole.
    proxy = fault_proxy_factory(gcs.endpoint)
    proxy.configure(match_method="PUT", fail_count=3, fail_status=503)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
    recs = _records(10, 100_000, seed=9)  # 1 MB: three 256 KiB chunks and a final one
    _write(_url(gcs, "resumed.tfrecord"), recs)
    assert proxy.stats()["failed"] == 3
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.endpoint)
    assert list(rf.RecordReader(_url(gcs, "resumed.tfrecord"))) == recs


# ---- OAuth2: a service-account key, a token endpoint that checks the JWT, a bearer check ----

def _b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class _AuthFront:
    """POST /token verifies the RS256 JWT; everything else needs the issued bearer token and
    is forwarded to the emulator (so every JSON API call is checked)."""

    def __init__(self, upstream: str, public_key, email: str):
        self.upstream = upstream.split("//", 1)[1]
        self.public_key = public_key
        self.email = email
        self.token = "tok-" + uuid.uuid4().hex
        self.token_requests = 0
        self.authorized = 0
        self.rejected = 0
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _reply(self, status, body=b"", headers=()):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                if self.path == "/token":
                    return self._token(body)
                if self.path == "/computeMetadata/v1/instance/service-accounts/default/token":
                    front.token_requests += 1
                    if self.headers.get("Metadata-Flavor") != "Google":
                        return self._reply(403, b"missing Metadata-Flavor")
                    return self._reply(200, json.dumps(
                        {"access_token": front.token, "expires_in": 3600}).encode())
                if self.headers.get("Authorization") != f"Bearer {front.token}":
                    front.rejected += 1
                    return self._reply(401, b'{"error": {"code": 401, "message": "no token"}}')
                front.authorized += 1
                conn = http.client.HTTPConnection(front.upstream, timeout=30)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("authorization", "content-length")}
                conn.request(self.command, self.path, body=body, headers=headers)
                r = conn.getresponse()
                data = r.read()
                out = [(k, v) for k, v in r.getheaders()
                       if k.lower() not in ("content-length", "transfer-encoding", "connection")]
                conn.close()
                self._reply(r.status, data, out)

            def _token(self, body):
                from cryptography.hazmat.primitives import hashes
                from cryptography.hazmat.primitives.asymmetric import padding
                front.token_requests += 1
                form = parse_qs(body.decode())
                if form.get("grant_type") == ["refresh_token"]:
                    ok = form.get("refresh_token") == ["rt-1"] and form.get("client_id") == ["c"]
                    return self._reply(200 if ok else 400, json.dumps(
                        {"access_token": front.token, "expires_in": 3600} if ok else
                        {"error": "invalid_grant"}).encode())
                try:
                    assert form["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
                    h, c, s = form["assertion"][0].split(".")
                    front.public_key.verify(_b64url_decode(s), f"{h}.{c}".encode(),
                                            padding.PKCS1v15(), hashes.SHA256())
                    header, claims = json.loads(_b64url_decode(h)), json.loads(_b64url_decode(c))
                    assert header["alg"] == "RS256"
                    assert claims["iss"] == front.email
                    assert claims["aud"].endswith("/token")
                    assert "devstorage" in claims["scope"]
                    assert claims["iat"] <= time.time() + 5 < claims["exp"]
                except Exception as e:  # noqa: BLE001 - any defect is a 400 invalid_grant
                    return self._reply(400, json.dumps(
                        {"error": "invalid_grant", "error_description": repr(e)}).encode())
                self._reply(200, json.dumps(
                    {"access_token": front.token, "expires_in": 3600,
                     "token_type": "Bearer"}).encode(), [("Content-Type", "application/json")])

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _service_account(tmp_path: Path, token_uri: str, key=None):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = key or rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    email = "rf-test@example.iam.gserviceaccount.com"
    f = tmp_path / f"sa-{uuid.uuid4().hex[:6]}.json"
    f.write_text(json.dumps({"type": "service_account", "client_email": email,
                             "private_key": pem, "private_key_id": "k1", "token_uri": token_uri}))
    return f, key, email


@pytest.fixture
def oauth_gcs(gcs, tmp_path, monkeypatch):
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    front = _AuthFront(gcs.endpoint, key.public_key(), "rf-test@example.iam.gserviceaccount.com")
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    monkeypatch.setenv("GCS_ENDPOINT_URL", front.url)
    front.key = key
    yield gcs, front
    front.stop()


def test_gcs_service_account_jwt_is_exchanged_and_the_token_sent(oauth_gcs, tmp_path,
                                                                  monkeypatch):
    gcs, front = oauth_gcs
    f, _, _ = _service_account(tmp_path, front.url + "/token", front.key)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(f))
    recs = _records(100, 200)
    _write(_url(gcs, "sa.tfrecord"), recs)
    assert list(rf.RecordReader(_url(gcs, "sa.tfrecord"))) == recs
    assert front.token_requests == 1  # cached for the following requests
    assert front.authorized >= 3 and front.rejected == 0


def test_gcs_wrong_key_and_wrong_token_are_permission_denied_without_secrets(
        oauth_gcs, tmp_path, monkeypatch):
    gcs, front = oauth_gcs
    f, _, _ = _service_account(tmp_path, front.url + "/token")  # a key the endpoint rejects
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(f))
    with pytest.raises(rf.errors.PermissionDeniedError) as e:
        rf.RecordReader(_url(gcs, "x.tfrecord"))
    assert "invalid_grant" in str(e.value) and str(f) in str(e.value)
    assert "PRIVATE KEY" not in str(e.value)
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "wrong-token-value-123")
    with pytest.raises(rf.errors.PermissionDeniedError) as e:
        rf.RecordReader(_url(gcs, "x.tfrecord"))
    assert "wrong-token-value-123" not in str(e.value)
    monkeypatch.setenv("GOOGLE_OAUTH_ACCESS_TOKEN", front.token)
    _write(_url(gcs, "t.tfrecord"), [b"ok"])
    assert list(rf.RecordReader(_url(gcs, "t.tfrecord"))) == [b"ok"]


def test_gcs_metadata_server_and_authorized_user_tokens(oauth_gcs, tmp_path, monkeypatch):
    gcs, front = oauth_gcs
    # GCE_METADATA_HOST, as Google's libraries honour it (no key file, no token variable).
    monkeypatch.setenv("GCE_METADATA_HOST", front.url.split("//", 1)[1])
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    _write(_url(gcs, "m.tfrecord"), [b"meta"])
    assert list(rf.RecordReader(_url(gcs, "m.tfrecord"))) == [b"meta"]
    assert front.token_requests == 1 and front.rejected == 0
    # An authorized_user file (gcloud auth application-default login): its refresh token.
    f = tmp_path / "user.json"
    f.write_text(json.dumps({"type": "authorized_user", "client_id": "c", "client_secret": "s",
                             "refresh_token": "rt-1", "token_uri": front.url + "/token"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(f))
    assert list(rf.RecordReader(_url(gcs, "m.tfrecord"))) == [b"meta"]
    assert front.token_requests == 2 and front.rejected == 0
