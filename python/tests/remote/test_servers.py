"""The remote-storage test infrastructure itself: real servers, ranges, auth, every fault."""

import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from . import fault_proxy as fp
from . import servers, sigv4

PAYLOAD = bytes(range(256)) * 400  # 102400 bytes, every offset distinguishable mod 256


def _get(endpoint, path, headers=None, method="GET"):
    host, port = endpoint.split("//", 1)[1].rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        c.close()


def _s3(endpoint, method, path, secret=servers.SECRET_KEY, **kw):
    return sigv4.request(endpoint, method, path, access_key=servers.ACCESS_KEY,
                         secret_key=secret, **kw)


def _listening_addresses(ports):
    """(address, port) of listening TCP sockets (from /proc/net/tcp*) on the given ports."""
    out = []
    for f, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        for line in Path(f).read_text().splitlines()[1:]:
            cols = line.split()
            addr, port = cols[1].split(":")
            if cols[3] != "0A" or int(port, 16) not in ports:  # 0A = LISTEN
                continue
            if v6:
                out.append(("v6:" + addr, int(port, 16)))
            else:
                out.append((".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)),
                            int(port, 16)))
    return out


# ---- servers ---------------------------------------------------------------------------------

def test_s3_ranged_get_and_multipart(s3_server):
    s3_server.put("infra/ranged.bin", PAYLOAD)
    st, h, body = _s3(s3_server.endpoint, "GET", f"/{s3_server.bucket}/infra/ranged.bin",
                      headers={"Range": "bytes=1000-1999"})
    assert st == 206
    assert h["content-range"] == f"bytes 1000-1999/{len(PAYLOAD)}"
    assert body == PAYLOAD[1000:2000]

    boto3 = pytest.importorskip("boto3", reason="boto3 is the reference S3 client "
                                "(scripts/setup.sh --test)")
    from botocore.config import Config
    c = boto3.client("s3", endpoint_url=s3_server.endpoint, region_name=servers.REGION,
                     aws_access_key_id=servers.ACCESS_KEY,
                     aws_secret_access_key=servers.SECRET_KEY,
                     config=Config(s3={"addressing_style": "path"}))
    up = c.create_multipart_upload(Bucket=s3_server.bucket, Key="infra/mp.bin")
    part1, part2 = os.urandom(5 << 20), b"tail-part"
    etags = [c.upload_part(Bucket=s3_server.bucket, Key="infra/mp.bin", UploadId=up["UploadId"],
                           PartNumber=i + 1, Body=b)["ETag"] for i, b in enumerate([part1, part2])]
    # Not visible before completion: the atomic-write guarantee the native client relies on.
    st, _, _ = _s3(s3_server.endpoint, "HEAD", f"/{s3_server.bucket}/infra/mp.bin")
    assert st == 404
    c.complete_multipart_upload(
        Bucket=s3_server.bucket, Key="infra/mp.bin", UploadId=up["UploadId"],
        MultipartUpload={"Parts": [{"ETag": e, "PartNumber": i + 1} for i, e in enumerate(etags)]})
    got = c.get_object(Bucket=s3_server.bucket, Key="infra/mp.bin",
                       Range=f"bytes={len(part1) - 3}-{len(part1) + 3}")["Body"].read()
    assert got == part1[-3:] + part2[:4]


def test_s3_rejects_wrong_signature_and_anonymous(s3_server):
    s3_server.put("infra/secret.bin", b"x" * 10)
    st, _, body = _s3(s3_server.endpoint, "GET", f"/{s3_server.bucket}/infra/secret.bin",
                      secret="not-the-secret")
    assert st == 403
    assert b"SignatureDoesNotMatch" in body
    st, _, _ = _get(s3_server.endpoint, f"/{s3_server.bucket}/infra/secret.bin")
    assert st == 403
    st, _, body = _s3(s3_server.endpoint, "GET", f"/{s3_server.bucket}/infra/secret.bin")
    assert (st, body) == (200, b"x" * 10)


def test_http_ranged_get(http_server):
    http_server.put("infra/ranged.bin", PAYLOAD)
    st, h, body = _get(http_server.endpoint, "/infra/ranged.bin",
                       {"Range": "bytes=100000-"})
    assert st == 206
    assert h["content-range"] == f"bytes 100000-{len(PAYLOAD) - 1}/{len(PAYLOAD)}"
    assert body == PAYLOAD[100000:]
    st, h, body = _get(http_server.endpoint, "/infra/ranged.bin")
    assert (st, body) == (200, PAYLOAD)
    assert "etag" in h
    st, _, _ = _get(http_server.endpoint, "/infra/missing.bin")
    assert st == 404
    log = (http_server.dir / "logs" / "access.log").read_text()
    assert "/infra/ranged.bin" in log  # logs live in the test folder


def test_gcs_ranged_get(gcs_server):
    gcs_server.put("infra/ranged.bin", PAYLOAD)
    # XML-API path (what gs:// uses) and the JSON API's media download.
    st, h, body = _get(gcs_server.endpoint, f"/{gcs_server.bucket}/infra/ranged.bin",
                       {"Range": "bytes=5-9"})
    assert (st, body) == (206, PAYLOAD[5:10])
    st, _, body = _get(gcs_server.endpoint,
                       f"/storage/v1/b/{gcs_server.bucket}/o/infra%2Franged.bin?alt=media",
                       {"Range": "bytes=256-511"})
    assert (st, body) == (206, PAYLOAD[256:512])
    st, _, _ = _get(gcs_server.endpoint, f"/{gcs_server.bucket}/infra/missing.bin")
    assert st == 404


def test_servers_listen_on_loopback_only(s3_server, http_server, gcs_server):
    for srv in (s3_server, http_server, gcs_server):
        addrs = _listening_addresses(set(srv.ports))
        assert addrs, f"{srv.kind}: nothing listens on its ports {srv.ports}"
        assert all(a == "127.0.0.1" for a, _ in addrs), f"{srv.kind} listens on {addrs}"


# ---- fault proxy -----------------------------------------------------------------------------

@pytest.fixture
def obj(fault_proxy, s3_server):
    s3_server.put("infra/proxied.bin", PAYLOAD)
    return f"/{s3_server.bucket}/infra/proxied.bin"


def test_proxy_forwards_signed_requests_and_counts(fault_proxy, obj):
    st, _, body = _s3(fault_proxy.url, "GET", obj, headers={"Range": "bytes=10-19"})
    assert (st, body) == (206, PAYLOAD[10:20])
    st, _, _ = _s3(fault_proxy.url, "HEAD", obj)
    assert st == 200
    s = fault_proxy.stats()
    assert s["requests"] == 2 and s["by_method"] == {"GET": 1, "HEAD": 1}
    assert s["response_body_bytes"] == 10


def test_proxy_latency(fault_proxy, obj):
    fault_proxy.configure(latency_ms=300)
    t0 = time.monotonic()
    st, _, _ = _s3(fault_proxy.url, "GET", obj, headers={"Range": "bytes=0-0"})
    assert st == 206 and time.monotonic() - t0 >= 0.3
    fault_proxy.configure(latency_ms=0)
    assert fault_proxy.stats()["delayed"] == 1


def test_proxy_bandwidth_throttle(fault_proxy, obj):
    fault_proxy.configure(bandwidth_bps=200_000)  # 102400 bytes -> >= 0.5 s
    t0 = time.monotonic()
    st, _, body = _s3(fault_proxy.url, "GET", obj)
    took = time.monotonic() - t0
    assert (st, body) == (200, PAYLOAD)
    assert took >= 0.45, took


def test_proxy_drops_mid_response_then_serves(fault_proxy, obj):
    fault_proxy.configure(drop_after_bytes=1000, drop_count=1)
    host, port = fault_proxy.url.split("//")[1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    hdrs = sigv4.sign("GET", f"{host}:{port}", obj, None, {}, b"", servers.ACCESS_KEY,
                      servers.SECRET_KEY)
    c.request("GET", obj, headers=hdrs)
    r = c.getresponse()
    assert r.status == 200 and int(r.getheader("Content-Length")) == len(PAYLOAD)
    with pytest.raises(http.client.IncompleteRead) as e:
        r.read()
    assert e.value.partial == PAYLOAD[:1000]  # exactly N bytes, then the connection is gone
    c.close()
    st, _, body = _s3(fault_proxy.url, "GET", obj)  # the fault was for one request only
    assert (st, body) == (200, PAYLOAD)
    assert fault_proxy.stats()["dropped"] == 1


@pytest.mark.parametrize("status", [503, 429])
def test_proxy_answers_first_k_requests_with_error(fault_proxy, obj, status):
    fault_proxy.configure(fail_status=status, fail_count=2, retry_after=1, match_method="GET")
    st, _, _ = _s3(fault_proxy.url, "HEAD", obj)  # not matched: passes through
    assert st == 200
    for _ in range(2):
        st, h, body = _s3(fault_proxy.url, "GET", obj)
        assert st == status
        assert b"<Code>SlowDown</Code>" in body and h["retry-after"] == "1"
    st, _, body = _s3(fault_proxy.url, "GET", obj)
    assert (st, body) == (200, PAYLOAD)
    s = fault_proxy.stats()
    assert s["failed"] == 2 and s["requests"] == 4


def test_proxy_keeps_connection_after_injected_error(fault_proxy, obj):
    # One keep-alive connection: refused request, then a served one on the same socket.
    fault_proxy.configure(fail_count=1)
    host, port = fault_proxy.url.split("//")[1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    for want in (503, 200):
        hdrs = sigv4.sign("GET", f"{host}:{port}", obj, None, {}, b"", servers.ACCESS_KEY,
                          servers.SECRET_KEY)
        c.request("GET", obj, headers=hdrs)
        r = c.getresponse()
        r.read()
        assert r.status == want
    c.close()
    assert fault_proxy.stats()["connections"] == 1


def test_proxy_in_front_of_http_and_put_with_expect_continue(fault_proxy_factory, http_server,
                                                             s3_server):
    http_server.put("infra/h.bin", PAYLOAD)
    p = fault_proxy_factory(http_server.endpoint)
    p.configure(drop_after_bytes=10, drop_count=-1, match_path="/infra/h.bin")
    for _ in range(2):  # -1: every matching request
        with pytest.raises(http.client.IncompleteRead):
            _get(p.url, "/infra/h.bin")
    p.configure(drop_count=0)
    assert _get(p.url, "/infra/h.bin")[2] == PAYLOAD
    # botocore-style uploads send `Expect: 100-continue` and wait for the interim response.
    s3p = fault_proxy_factory(s3_server.endpoint)
    st, _, _ = _s3(s3p.url, "PUT", f"/{s3_server.bucket}/infra/expect.bin", body=b"abc",
                   headers={"Expect": "100-continue"})
    assert st == 200
    st, _, body = _s3(s3_server.endpoint, "GET", f"/{s3_server.bucket}/infra/expect.bin")
    assert (st, body) == (200, b"abc")


# ---- CLI (what C++ tests and benchmarks use) -----------------------------------------------

def test_cli_start_configure_stop(tmp_path, http_server):
    script = Path(servers.__file__)
    target = http_server.endpoint.split("//")[1]
    http_server.put("infra/cli.bin", PAYLOAD)
    out = subprocess.run([sys.executable, str(script), "start", "proxy", "--dir", str(tmp_path),
                          "--target", target], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    env = dict(line[len("export "):].split("=", 1) for line in out.stdout.splitlines())
    pid = int(env["RF_TEST_PROXY_PID"])
    try:
        assert (tmp_path / "proxy" / "env.sh").read_text().count("export ") == 4
        fp.control(env["RF_TEST_PROXY_CONTROL"], "/config", {"fail_count": 1})
        assert _get(env["RF_TEST_PROXY_URL"], "/infra/cli.bin")[0] == 503
        assert _get(env["RF_TEST_PROXY_URL"], "/infra/cli.bin")[2] == PAYLOAD
        assert fp.control(env["RF_TEST_PROXY_CONTROL"], "/stats")["requests"] == 2
        again = subprocess.run([sys.executable, str(script), "start", "proxy", "--dir",
                                str(tmp_path), "--target", target], capture_output=True,
                               text=True, timeout=60)
        assert again.returncode == 2 and "already runs" in again.stderr
    finally:
        stop = subprocess.run([sys.executable, str(script), "stop", "--dir", str(tmp_path)],
                              capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0 and f"proxy pid {pid}" in stop.stderr
    assert not servers._alive(pid)  # gone or a zombie awaiting init's reaping


def test_shell_wrapper_exports_env_and_cleans_up(tmp_path):
    script = Path(servers.__file__).parents[3] / "scripts" / "servers" / "with-remote-servers.sh"
    out = subprocess.run(
        [str(script), "bash", "-c",
         'echo "$RF_TEST_HTTP_URL $RF_TEST_HTTP_PID $RF_TEST_HTTP_ROOT"; exit 7'],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, KINDS="http", TMPDIR=str(tmp_path), PYTHON=sys.executable))
    assert out.returncode == 7, out.stderr  # the command's own status
    url, pid, root = out.stdout.split()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/")
    assert not servers._alive(int(pid))
    assert not Path(root).exists() and list(tmp_path.iterdir()) == []


def test_s3_conditional_put_listing_and_missing_key(s3_server):
    path = f"/{s3_server.bucket}/infra/cond-{os.getpid()}-{time.monotonic_ns()}.bin"
    st, _, _ = _s3(s3_server.endpoint, "PUT", path, body=b"first", headers={"If-None-Match": "*"})
    assert st == 200
    st, _, body = _s3(s3_server.endpoint, "PUT", path, body=b"second",
                      headers={"If-None-Match": "*"})
    assert st == 412 and b"PreconditionFailed" in body
    assert _s3(s3_server.endpoint, "GET", path)[2] == b"first"
    st, _, body = _s3(s3_server.endpoint, "GET", f"/{s3_server.bucket}",
                      query={"list-type": "2", "prefix": path.split("/", 2)[2]})
    assert st == 200 and path.split("/", 2)[2].encode() in body
    st, _, body = _s3(s3_server.endpoint, "GET", f"/{s3_server.bucket}/infra/no-such-key")
    assert st == 404 and b"NoSuchKey" in body


def test_proxy_reconnects_when_upstream_closed_an_idle_connection():
    # An upstream that closes every connection after one response, without saying so (as an
    # idle keep-alive timeout does): the proxy must not turn that into a dropped response.
    import socket
    import threading
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(4096)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    p = fp.FaultProxy(f"127.0.0.1:{srv.getsockname()[1]}").start()
    try:
        c = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
        for _ in range(3):
            c.request("GET", "/x")
            r = c.getresponse()
            assert (r.status, r.read()) == (200, b"ok")
        c.close()
        assert p.stats()["connections"] == 1 and p.stats()["dropped"] == 0
    finally:
        p.stop()
        srv.close()
