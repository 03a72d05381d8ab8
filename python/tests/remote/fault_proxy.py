"""A fault-injecting HTTP/1.1 proxy on loopback for the remote-storage tests.

It sits between a client and one upstream server (SeaweedFS, nginx, the GCS emulator) and
forwards requests one at a time per client connection, which is what HTTP/1.1 clients do
without pipelining. Knowing where each request and response starts lets it inject faults per
request, not per TCP segment:

  latency_ms          added before each matching request is forwarded
  bandwidth_bps       response bytes per second, per client connection (0 = unlimited)
  fail_status/fail_count
                      answer the next `fail_count` matching requests itself with `fail_status`
                      (503 or 429) and an S3-style SlowDown XML body; the connection stays open
  drop_after_bytes/drop_count
                      for the next `drop_count` matching responses that reach that size, forward the status line,
                      the headers and `drop_after_bytes` bytes of the body, then close both
                      sockets (a connection reset mid-response)
  match_method/match_path
                      faults apply only to requests with this method / whose target contains
                      this substring (None = every request); plain forwarding otherwise

A count of -1 means "every matching request". Counts go down as faults are injected, so a
test can arm "fail the next 2 GETs" between two reads. Every request is counted.

Configuration changes take effect for the next request. In-process use goes through
`FaultProxy.configure()` / `.stats()`; a process started by servers.py's CLI is configured
through a small loopback control port (GET /stats, POST /config with a JSON object,
POST /reset), so C++ and shell tests can use the same faults.
"""

from __future__ import annotations

import argparse
import http.server
import json
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

_SLOWDOWN_XML = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
    b"<Resource>%s</Resource><RequestId>rf-fault-proxy</RequestId></Error>"
)
_REASONS = {429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Slow Down", 504: "Gateway Timeout"}
_MAX_HEADER_BYTES = 64 * 1024


@dataclass
class Faults:
    latency_ms: float = 0.0
    bandwidth_bps: int = 0
    fail_status: int = 503
    fail_count: int = 0
    retry_after: int | None = None
    drop_after_bytes: int = 0
    drop_count: int = 0
    match_method: str | None = None
    match_path: str | None = None


@dataclass
class Stats:
    requests: int = 0
    by_method: dict = field(default_factory=dict)
    failed: int = 0          # answered with fail_status by the proxy
    dropped: int = 0         # connections closed mid-response
    delayed: int = 0         # requests that got latency_ms
    connections: int = 0
    response_body_bytes: int = 0
    targets: list = field(default_factory=list)  # "METHOD target" of the last 1000 requests


class _Closed(Exception):
    pass


def _read_through(sock: socket.socket, buf: bytearray, end: bytes) -> bytes:
    """Reads up to and including the first `end`; what follows it stays in buf."""
    while True:
        i = buf.find(end)
        if i >= 0:
            out = bytes(buf[: i + len(end)])
            del buf[: i + len(end)]
            return out
        if len(buf) > _MAX_HEADER_BYTES:
            raise _Closed(f"no {end!r} in {len(buf)} bytes")
        chunk = sock.recv(65536)
        if not chunk:
            raise _Closed(f"eof before {end!r}")
        buf += chunk


def _read_head(sock: socket.socket, buf: bytearray) -> bytes:
    """The head of an HTTP message, up to and including the blank line that ends it."""
    return _read_through(sock, buf, b"\r\n\r\n")


def _headers(head: bytes) -> dict[str, str]:
    out = {}
    for line in head.split(b"\r\n")[1:]:
        if b":" in line:
            k, v = line.split(b":", 1)
            out[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    return out


def _read_exact(sock: socket.socket, buf: bytearray, n: int) -> bytes:
    while len(buf) < n:
        chunk = sock.recv(max(65536, n - len(buf)))
        if not chunk:
            raise _Closed("eof in body")
        buf += chunk
    out = bytes(buf[:n])
    del buf[:n]
    return out


def _read_line(sock: socket.socket, buf: bytearray) -> bytes:
    return _read_through(sock, buf, b"\r\n")


def _iter_body(sock, buf, hdrs, *, until_close: bool):
    """Yields the raw bytes of a message body (chunked framing kept as is)."""
    if "chunked" in hdrs.get("transfer-encoding", "").lower():
        while True:
            line = _read_line(sock, buf)
            yield line
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers up to the empty line
                    t = _read_line(sock, buf)
                    yield t
                    if t == b"\r\n":
                        return
            yield _read_exact(sock, buf, size + 2)
    elif "content-length" in hdrs:
        left = int(hdrs["content-length"])
        while left > 0:
            if not buf:
                chunk = sock.recv(min(left, 262144))
                if not chunk:
                    raise _Closed("eof in body")
                buf += chunk
            piece = bytes(buf[:left])
            del buf[: len(piece)]
            left -= len(piece)
            yield piece
    elif until_close:
        if buf:
            yield bytes(buf)
            buf.clear()
        while True:
            chunk = sock.recv(262144)
            if not chunk:
                return
            yield chunk


class FaultProxy:
    """Loopback proxy to `target` ("host:port"). start() binds 127.0.0.1 on a free port."""

    def __init__(self, target: str, port: int = 0, control_port: int | None = None):
        host, p = target.rsplit(":", 1)
        self.target = (host, int(p))
        self._faults = Faults()
        self._stats = Stats()
        self._lock = threading.Lock()
        self._listen = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listen.bind(("127.0.0.1", port))
        self._listen.listen(128)
        self.port = self._listen.getsockname()[1]
        self._stopping = False
        self._conns: set[socket.socket] = set()
        self._control = None
        self.control_port = None
        if control_port is not None:
            self._control = self._make_control(control_port)
            self.control_port = self._control.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- runtime configuration -------------------------------------------------------------
    def configure(self, **kw) -> None:
        """Sets the named fault fields (see Faults); unnamed fields keep their value."""
        with self._lock:
            for k, v in kw.items():
                if not hasattr(self._faults, k):
                    raise ValueError(f"unknown fault field {k!r}")
                setattr(self._faults, k, v)

    def reset(self) -> None:
        """No faults, counters back to zero."""
        with self._lock:
            self._faults = Faults()
            self._stats = Stats()

    def faults(self) -> dict:
        with self._lock:
            return asdict(self._faults)

    def stats(self) -> dict:
        with self._lock:
            d = asdict(self._stats)
            d["by_method"] = dict(self._stats.by_method)
            d["targets"] = list(self._stats.targets)
            return d

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "FaultProxy":
        threading.Thread(target=self._accept_loop, name="fault-proxy", daemon=True).start()
        if self._control is not None:
            threading.Thread(target=self._control.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping = True
        try:
            self._listen.close()
        except OSError:
            pass
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        if self._control is not None:
            self._control.shutdown()
            self._control.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- proxying ----------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stopping:
            try:
                client, _ = self._listen.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._stats.connections += 1
                self._conns.add(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _decide(self, method: str, target: str):
        """Counts the request and takes (consumes) the faults that apply to it."""
        with self._lock:
            s, f = self._stats, self._faults
            s.requests += 1
            s.by_method[method] = s.by_method.get(method, 0) + 1
            s.targets.append(f"{method} {target}")
            del s.targets[:-1000]
            match = ((f.match_method is None or f.match_method.upper() == method)
                     and (f.match_path is None or f.match_path in target))
            if not match:
                return 0.0, 0, None, None, f.retry_after
            fail = None
            if f.fail_count != 0:
                fail = f.fail_status
                if f.fail_count > 0:
                    f.fail_count -= 1
                s.failed += 1
            drop = None
            if fail is None and f.drop_count != 0:
                # Consumed when a response actually reaches the byte count (below): a response
                # too short to be cut does not use up a drop.
                drop = f.drop_after_bytes
            if f.latency_ms > 0:
                s.delayed += 1
            return f.latency_ms, f.bandwidth_bps, fail, drop, f.retry_after

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        cbuf, ubuf = bytearray(), bytearray()
        try:
            while not self._stopping:
                head = _read_head(client, cbuf)
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                method, target = line.split(" ")[0].upper(), line.split(" ")[1]
                hdrs = _headers(head)
                if hdrs.get("expect", "").lower() == "100-continue":
                    # Answer the interim response ourselves and forward without Expect: the
                    # body is read here first (below), so the upstream never waits for it.
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = b"\r\n".join(
                        ln for ln in head.split(b"\r\n")
                        if not ln.lower().startswith(b"expect:"))
                # The request body is read before any decision so that a refused request
                # leaves the connection in a clean state for the next one.
                body = b"".join(_iter_body(client, cbuf, hdrs, until_close=False))
                latency_ms, bps, fail, drop, retry_after = self._decide(method, target)
                if latency_ms > 0:
                    time.sleep(latency_ms / 1000.0)
                if fail is not None:
                    xml = _SLOWDOWN_XML % target.encode("latin-1")
                    resp = (f"HTTP/1.1 {fail} {_REASONS.get(fail, 'Error')}\r\n"
                            f"Content-Type: application/xml\r\nContent-Length: {len(xml)}\r\n")
                    if retry_after is not None:
                        resp += f"Retry-After: {retry_after}\r\n"
                    client.sendall(resp.encode() + b"\r\n" + (b"" if method == "HEAD" else xml))
                    continue
                for attempt in (0, 1):
                    reused = upstream is not None
                    if upstream is None:
                        upstream = socket.create_connection(self.target, timeout=60)
                        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        with self._lock:
                            self._conns.add(upstream)
                    try:
                        upstream.sendall(head + body)
                        rhead = _read_head(upstream, ubuf)
                        break
                    except (_Closed, OSError):
                        # An idle keep-alive connection the upstream closed meanwhile is not a
                        # fault anyone asked for: reconnect once and resend.
                        if not reused or attempt == 1 or ubuf:
                            raise
                        with self._lock:
                            self._conns.discard(upstream)
                        upstream.close()
                        upstream = None
                status = int(rhead.split(b" ", 2)[1])
                rh = _headers(rhead)
                client.sendall(rhead)
                no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
                sent = 0
                t0 = time.monotonic()
                if not no_body:
                    until_close = "content-length" not in rh and "chunked" not in rh.get(
                        "transfer-encoding", "").lower()
                    for piece in _iter_body(upstream, ubuf, rh, until_close=until_close):
                        if drop is not None and sent + len(piece) >= drop:
                            with self._lock:
                                if self._faults.drop_count == 0:
                                    drop = None  # the drops asked for happened meanwhile
                                else:
                                    if self._faults.drop_count > 0:
                                        self._faults.drop_count -= 1
                                    self._stats.dropped += 1
                                    self._stats.response_body_bytes += drop - sent
                        if drop is not None and sent + len(piece) >= drop:
                            client.sendall(piece[: drop - sent])
                            raise _Closed("dropped by fault")
                        step = 16384 if bps else max(len(piece), 1)
                        for off in range(0, len(piece), step):
                            part = piece[off: off + step]
                            if bps:  # wait until this part fits the rate, then send it
                                ahead = (sent + len(part)) / bps - (time.monotonic() - t0)
                                if ahead > 0:
                                    time.sleep(ahead)
                            client.sendall(part)
                            sent += len(part)
                        with self._lock:
                            self._stats.response_body_bytes += len(piece)
                    if until_close:
                        raise _Closed("upstream closed")
                if rh.get("connection", "").lower() == "close":
                    raise _Closed("upstream asked to close")
                if hdrs.get("connection", "").lower() == "close":
                    raise _Closed("client asked to close")
        except (_Closed, OSError, ValueError, IndexError):
            pass
        finally:
            for s in (client, upstream):
                if s is None:
                    continue
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
                with self._lock:
                    self._conns.discard(s)

    # ---- control port --------------------------------------------------------------------------
    def _make_control(self, port: int) -> http.server.ThreadingHTTPServer:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet: the tests read /stats instead
                pass

            def _reply(self, code, obj):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/stats":
                    self._reply(200, proxy.stats())
                elif self.path == "/config":
                    self._reply(200, proxy.faults())
                else:
                    self._reply(404, {"error": f"unknown path {self.path}"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b"{}"
                try:
                    if self.path == "/config":
                        proxy.configure(**json.loads(raw or b"{}"))
                    elif self.path == "/reset":
                        proxy.reset()
                    else:
                        self._reply(404, {"error": f"unknown path {self.path}"})
                        return
                except (ValueError, TypeError) as e:
                    self._reply(400, {"error": str(e)})
                    return
                self._reply(200, proxy.faults())

        return http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)


def control(control_url: str, path: str, body: dict | None = None) -> dict:
    """Client of the control port: control(url, "/config", {"latency_ms": 20})."""
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(control_url.rstrip("/") + path, data=data,
                                 method="GET" if body is None and path == "/stats" else "POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True, help="upstream host:port")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--ready-file", help="written with 'PORT CONTROL_PORT' once listening")
    ap.add_argument("--config", default="{}", help="initial faults as JSON")
    a = ap.parse_args(argv)
    p = FaultProxy(a.target, a.port, a.control_port)
    p.configure(**json.loads(a.config))
    p.start()
    if a.ready_file:
        tmp = a.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{p.port} {p.control_port}\n")
        import os
        os.replace(tmp, a.ready_file)
    print(f"fault proxy 127.0.0.1:{p.port} -> {a.target}, control 127.0.0.1:{p.control_port}",
          flush=True)
    import signal
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    p.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
