"""A Spark standalone cluster on loopback with workers on two host names, for the tests that
need Spark's own speculative execution.

Spark's scheduler never launches a speculative copy of a task on a host that already runs an
attempt of it (TaskSetManager: `!(speculative && hasAttemptOnHost(index, host))`), and every
executor of local[N] / local-cluster[...] is on one host. Here the master binds 127.0.0.1 and
the two workers (1 core each) bind 127.0.0.1 and 127.0.0.2 (all of 127/8 is loopback on
Linux), so the two executors are on two hosts.

Each daemon runs `spark-class` from pip's pyspark in its own process group, with its log and
work folder under the given folder, and is stopped by that PID (SIGTERM, then SIGKILL).

    python python/tests/spark_cluster.py --dir D      # starts, prints the master URL, waits
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote.servers import _alive, _spawn, free_ports, stop_pid  # noqa: E402


class ClusterUnavailable(RuntimeError):
    pass


class StandaloneCluster:
    """Master on 127.0.0.1, one 1-core worker on each of `hosts`."""

    def __init__(self, folder: Path, hosts=("127.0.0.1", "127.0.0.2"), worker_memory="1g"):
        import pyspark
        self.folder = Path(folder)
        self.hosts = tuple(hosts)
        self.worker_memory = worker_memory
        self.spark_home = os.path.dirname(pyspark.__file__)
        self.pids: list[int] = []
        self.master_url = ""
        self.ui_port = 0

    def _env(self, host: str) -> dict:
        env = dict(os.environ)
        env.update(SPARK_HOME=self.spark_home, SPARK_LOCAL_IP=host, SPARK_LOCAL_HOSTNAME=host,
                   SPARK_DAEMON_MEMORY="256m", SPARK_NO_DAEMONIZE="1",
                   PYSPARK_PYTHON=sys.executable,
                   SPARK_LOG_DIR=str(self.folder / "logs"), SPARK_PID_DIR=str(self.folder))
        return env

    def _spawn(self, cls: str, args: list[str], host: str, log: str) -> int:
        cmd = [os.path.join(self.spark_home, "bin", "spark-class"), cls, *args]
        p = _spawn(cmd, self.folder, log, self._env(host), tie_to_parent=True)
        self.pids.append(p.pid)
        return p.pid

    def alive_workers(self) -> list[str]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
            state = json.load(r)
        return sorted(w["host"] for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def start(self, timeout: float = 90.0) -> float:
        """Starts the daemons; returns the seconds until every worker was registered."""
        self.folder.mkdir(parents=True, exist_ok=True)
        port, self.ui_port, *worker_ports = free_ports(2 + 2 * len(self.hosts))
        self.master_url = f"spark://127.0.0.1:{port}"
        t0 = time.monotonic()
        self._spawn("org.apache.spark.deploy.master.Master",
                             ["--host", "127.0.0.1", "--port", str(port),
                              "--webui-port", str(self.ui_port)], "127.0.0.1", "master.log")
        for i, host in enumerate(self.hosts):
            work = self.folder / f"work-{i}"
            work.mkdir(exist_ok=True)
            self._spawn("org.apache.spark.deploy.worker.Worker",
                        ["--host", host, "--port", str(worker_ports[2 * i]),
                         "--webui-port", str(worker_ports[2 * i + 1]), "--cores", "1",
                         "--memory", self.worker_memory, "--work-dir", str(work),
                         self.master_url], host, f"worker-{i}.log")
        last = None
        while time.monotonic() - t0 < timeout:
            for pid in self.pids:
                if not _alive(pid):
                    self.stop()
                    raise ClusterUnavailable(f"a Spark daemon exited during start; logs in "
                                             f"{self.folder / 'logs'}")
            try:
                if self.alive_workers() == sorted(self.hosts):
                    return time.monotonic() - t0
            except OSError as e:  # the master's UI is not up yet
                last = e
            time.sleep(0.3)
        self.stop()
        raise ClusterUnavailable(f"Spark standalone cluster not ready after {timeout:.0f} s "
                                 f"(last error: {last}); logs in {self.folder / 'logs'}")

    def stop(self) -> None:
        # Workers first (they kill their executors), then the master.
        for pid in reversed(self.pids):
            stop_pid(pid, timeout=10.0)
        self.pids.clear()


def main() -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True)
    a = ap.parse_args()
    c = StandaloneCluster(Path(a.dir))
    took = c.start()
    print(f"{c.master_url} (ready after {took:.1f} s); Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
