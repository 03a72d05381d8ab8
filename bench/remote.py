#!/usr/bin/env python3
"""Remote storage benchmark: the ImageNet train pipeline read from S3 vs local files.

    python bench/remote.py                 # ~3000 images, 0/20/50 ms, 3 runs each
    python bench/remote.py --quick         # 600 images, 1 run each (a smoke run)

1. data: the suite's ImageNet-like shards (bench/suite.py prepare_data, cached in bench/data).
2. servers: SeaweedFS (`weed mini`) and the fault proxy of python/tests/remote on loopback,
   in a fresh folder (logs there), stopped at exit; shards and .idx files uploaded to
   s3://rf-test/bench/.
3. train pipeline (bench/suite_worker.py recordflow train: read -> shuffle -> parse -> decode +
   RandomResizedCrop 224 + flip + normalize -> batch 256), a fresh process per run, on the
   local shards and on their s3:// URLs through the proxy with 0, 20 and 50 ms added to every
   request; configurations alternate in rotating order. Reported: images/s, client CPU per
   image (the worker's process tree), server CPU per image (SeaweedFS + proxy), ratio to local.
4. peers on the same objects at the same added latency (--peer-latency, default 20 ms):
   - read stage (every record of every shard once, records/s and CPU per record):
     recordflow `Dataset.from_files(s3 URLs)`, the `tfrecord` package's reader over an `s3fs`
     file, and webdataset-style `pipe:` streaming (`curl --aws-sigv4` of the object into the
     same TFRecord framing reader);
   - the full train pipeline of NVIDIA DALI (CPU) with `fn.readers.tfrecord` on s3:// URLs.
   - recordflow's read stage through its local shard cache (RECORDFLOW_CACHE_DIR, a fresh
     folder): a cold run (fills the cache) then a warm run (served locally; one HEAD per
     object, no GET), each in a fresh process ("cache" in --peers).
   A peer that cannot run here is listed with the reason.

Writes bench/out/remote.md and bench/out/remote.json. The numbers depend on the machine's load:
the table records the load average.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "python" / "tests" / "remote"))

PREFIX = "bench"


# ----------------------------------------------------------------------------- worker mode
# Runs in a fresh process (possibly a peers virtualenv): no recordflow import at module level.

def _read_tfrecord_frames(f, check_crc: bool = False):
    """Yields the records of a TFRecord stream from a file object (length, crc, data, crc)."""
    import struct
    while True:
        head = f.read(12)
        if not head:
            return
        if len(head) < 12:
            raise IOError("truncated record header")
        (n,) = struct.unpack("<Q", head[:8])
        data = f.read(n)
        tail = f.read(4)
        if len(data) < n or len(tail) < 4:
            raise IOError("truncated record")
        yield data


def _worker_read(kind: str, urls: list[str], env_endpoint: str) -> dict:
    """Reads every record of every URL once; returns counts, wall and CPU seconds."""
    from suite_worker import TreeMonitor, cpu_between
    mon = TreeMonitor()
    c0 = mon.cpu_snapshot()
    t0 = time.perf_counter()
    records = nbytes = 0
    if kind == "recordflow":
        import recordflow as rf
        for rec in rf.Dataset.from_files(urls).interleave():
            records += 1
            nbytes += len(rec)
    elif kind == "tfrecord-s3fs":
        import s3fs
        from tfrecord import reader as tfr
        fs = s3fs.S3FileSystem(key=os.environ["AWS_ACCESS_KEY_ID"],
                               secret=os.environ["AWS_SECRET_ACCESS_KEY"],
                               client_kwargs={"endpoint_url": env_endpoint,
                                              "region_name": os.environ["AWS_REGION"]})
        # The package's iterator opens local paths (io.open, os.path.getsize); route those two
        # calls of its module to s3fs so that its own reading loop runs over the S3 objects.
        import io as _io
        import types
        tfr.io = types.SimpleNamespace(open=lambda p, mode="rb": fs.open(p, mode,
                                                                          block_size=8 << 20),
                                       SEEK_END=_io.SEEK_END)
        tfr.os = types.SimpleNamespace(path=types.SimpleNamespace(getsize=fs.size))
        for u in urls:
            for rec in tfr.tfrecord_iterator(u):
                records += 1
                nbytes += len(rec)
    elif kind == "pipe":
        host = env_endpoint.rstrip("/")
        for u in urls:
            bucket_key = u[len("s3://"):]
            cmd = ["curl", "-sSf", "--aws-sigv4", f"aws:amz:{os.environ['AWS_REGION']}:s3",
                   "--user", f"{os.environ['AWS_ACCESS_KEY_ID']}:"
                   f"{os.environ['AWS_SECRET_ACCESS_KEY']}", f"{host}/{bucket_key}"]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, bufsize=1 << 20)
            for rec in _read_tfrecord_frames(p.stdout):
                records += 1
                nbytes += len(rec)
            if p.wait() != 0:
                raise IOError(f"curl {u}: exit {p.returncode}")
    else:
        raise ValueError(kind)
    wall = time.perf_counter() - t0
    c1 = mon.cpu_snapshot()
    mon.stop()
    return {"kind": kind, "records": records, "bytes": nbytes, "wall_s": wall,
            "cpu_s": cpu_between(c0, c1), "records_per_s": records / wall,
            "mb_per_s": nbytes / wall / 1e6}


def worker_main(argv) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--urls", nargs="+", required=True)
    a = ap.parse_args(argv)
    res = _worker_read(a.worker, a.urls, a.endpoint)
    print("REMOTE_RESULT " + json.dumps(res), flush=True)
    sys.stdout.flush()
    os._exit(0)


# ----------------------------------------------------------------------------- driver
def _proc_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _run(cmd, env, timeout, tag) -> dict:
    import benchlib  # imports recordflow: for the driver only, not for the workers (see above)
    return benchlib.run_for_result(cmd, env, timeout, tag)


def _python_with(modules: list[str], candidates: list[Path]) -> tuple[Path | None, str]:
    missing = ""
    for py in candidates:
        if not py.exists():
            continue
        probe = subprocess.run([str(py), "-c", "import " + ", ".join(modules)],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return py, ""
        missing = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "?"
    return None, f"not importable ({missing or 'no interpreter'}): pip install " + \
        " ".join(modules).replace("nvidia.dali", "nvidia-dali-cuda120")


def main() -> int:
    if "--worker" in sys.argv:
        return worker_main(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--images", type=int, help="dataset size (default 3000; quick 600)")
    ap.add_argument("--runs", type=int, help="runs per configuration (default 3; quick 1)")
    ap.add_argument("--batches", type=int, help="measured batches of 256 (default 6; quick 2)")
    ap.add_argument("--warmup-batches", type=int, help="default 2; quick 1")
    ap.add_argument("--shuffle", type=int, help="shuffle buffer (default 2048; quick 512)")
    ap.add_argument("--latencies", type=float, nargs="+", default=[0, 20, 50],
                    help="ms added per request by the proxy")
    ap.add_argument("--peer-latency", type=float, default=20)
    ap.add_argument("--no-train", action="store_true", help="peers only")
    ap.add_argument("--peers", nargs="*", default=["read", "tfrecord-s3fs", "pipe", "dali", "cache"],
                    help="which peers (none: skip)")
    ap.add_argument("--peers-python", type=Path, action="append",
                    help="interpreter(s) to look for a peer's packages in (default: this one, "
                    "then bench/.venv-peers)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--out", type=Path, default=HERE / "out")
    args = ap.parse_args()
    import benchlib
    benchlib.fill_defaults(args, images=(3000, 600), runs=(3, 1), batches=(6, 2),
                           warmup_batches=(2, 1), shuffle=(2048, 512))
    peer_pythons = args.peers_python or [Path(sys.executable),
                                         HERE / ".venv-peers" / "bin" / "python"]
    args.out.mkdir(parents=True, exist_ok=True)

    import fault_proxy
    import servers
    import suite

    classes = 10
    per_class = max(1, args.images // classes)
    data = suite.prepare_data(args.data_dir, classes, per_class, 8)
    local = [str(Path(data["dir"]) / "shards" / f) for f in data["files"]]
    work = Path(tempfile.mkdtemp(prefix="rf-remote-bench."))
    print(f"servers: folder {work}")
    s3 = proxy = None
    results: dict = {"train": [], "read": [], "dali": [], "errors": {}}
    try:
        s3 = servers.start_s3(work / "s3", tie_to_parent=True)
        proxy = servers.start_proxy(work / "proxy", s3.endpoint.split("//")[1],
                                    tie_to_parent=True)
        print(f"servers: SeaweedFS ready in {s3.started_s:.1f} s, proxy in "
              f"{proxy.started_s:.1f} s")
        t = time.perf_counter()
        total = 0
        for f in local:
            for p in (Path(f), Path(f + ".idx")):
                b = p.read_bytes()
                s3.put(f"{PREFIX}/{p.name}", b)
                total += len(b)
        print(f"upload: {total / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s")
        urls = [s3.url(f"{PREFIX}/{Path(f).name}") for f in local]
        ctl = proxy.env["RF_TEST_PROXY_CONTROL"]
        env_s3 = dict(os.environ)
        env_s3.update(s3.env)
        env_s3.update(AWS_ENDPOINT_URL=proxy.endpoint, AWS_ENDPOINT_URL_S3=proxy.endpoint,
                      TF_CPP_MIN_LOG_LEVEL="3")
        configs = [("local", None)] + [("s3", ms) for ms in args.latencies]
        worker = [sys.executable, HERE / "suite_worker.py", "recordflow", "train",
                  "--warmup-batches", str(args.warmup_batches), "--batches", str(args.batches),
                  "--shuffle", str(args.shuffle), "--files"]

        def server_cpu():
            return _proc_cpu(s3.pid) + _proc_cpu(proxy.pid)

        for r in range(0 if args.no_train else args.runs):
            order = configs[r % len(configs):] + configs[:r % len(configs)]
            for where, ms in order:
                fault_proxy.control(ctl, "/reset", {})
                if ms:
                    fault_proxy.control(ctl, "/config", {"latency_ms": ms})
                c0 = server_cpu()
                res = _run(worker + (local if where == "local" else urls),
                           env_s3, args.timeout, "SUITE_RESULT")
                st = fault_proxy.control(ctl, "/stats")
                res.update(where=where, latency_ms=ms, round=r, server_cpu_s=server_cpu() - c0,
                           requests=st["requests"], by_method=st["by_method"])
                results["train"].append(res)
                label = "local" if where == "local" else f"s3 +{ms:g} ms"
                if "error" in res:
                    print(f"train {label}: ERROR {res['error']}")
                else:
                    print(f"train {label}: {res['images_per_s']:.0f} images/s, "
                          f"{res['cpu_s'] / res['images'] * 1e3:.2f} ms CPU/image, "
                          f"{st['requests']} requests, load {res['load_avg']:.1f}")

        # ---- peers ----
        fault_proxy.control(ctl, "/reset", {})
        fault_proxy.control(ctl, "/config", {"latency_ms": args.peer_latency})
        read_kinds = [k for k, want in (("recordflow", "read"), ("tfrecord-s3fs",
                                                                 "tfrecord-s3fs"),
                                        ("pipe", "pipe")) if want in args.peers]
        needs = {"recordflow": ["recordflow"], "tfrecord-s3fs": ["s3fs", "tfrecord"],
                 "pipe": []}
        for kind in read_kinds:
            py, why = _python_with(needs[kind] or ["json"], peer_pythons)
            if kind == "pipe" and shutil.which("curl") is None:
                py, why = None, "curl not installed (apt install curl)"
            if py is None:
                results["errors"][kind] = why
                print(f"read {kind}: could not run: {why}")
                continue
            c0 = server_cpu()
            res = _run([py, HERE / "remote.py", "--worker", kind, "--endpoint", proxy.endpoint,
                        "--urls", *urls], env_s3, args.timeout, "REMOTE_RESULT")
            st = fault_proxy.control(ctl, "/stats")
            res.update(latency_ms=args.peer_latency, server_cpu_s=server_cpu() - c0,
                       requests=st["requests"], by_method=st["by_method"])
            fault_proxy.control(ctl, "/reset", {})
            fault_proxy.control(ctl, "/config", {"latency_ms": args.peer_latency})
            results["read"].append(res)
            if "error" in res:
                results["errors"][kind] = res["error"]
                print(f"read {kind}: ERROR {res['error']}")
            else:
                print(f"read {kind}: {res['records_per_s']:.0f} records/s "
                      f"({res['mb_per_s']:.0f} MB/s), "
                      f"{res['cpu_s'] / res['records'] * 1e3:.3f} ms CPU/record, "
                      f"{res['requests']} requests")
        if "cache" in args.peers:
            cache_dir = work / "shard-cache"
            env_cache = dict(env_s3, RECORDFLOW_CACHE_DIR=str(cache_dir),
                             RECORDFLOW_CACHE_SIZE="64G")
            for phase in ("cold", "warm"):
                fault_proxy.control(ctl, "/reset", {})
                fault_proxy.control(ctl, "/config", {"latency_ms": args.peer_latency})
                c0 = server_cpu()
                res = _run([sys.executable, HERE / "remote.py", "--worker", "recordflow",
                            "--endpoint", proxy.endpoint, "--urls", *urls], env_cache,
                           args.timeout, "REMOTE_RESULT")
                st = fault_proxy.control(ctl, "/stats")
                res.update(kind=f"recordflow cache_dir, {phase}", latency_ms=args.peer_latency,
                           server_cpu_s=server_cpu() - c0, requests=st["requests"],
                           by_method=st["by_method"])
                results["read"].append(res)
                if "error" in res:
                    results["errors"][f"cache {phase}"] = res["error"]
                    print(f"read cache {phase}: ERROR {res['error']}")
                else:
                    print(f"read cache {phase}: {res['records_per_s']:.0f} records/s "
                          f"({res['mb_per_s']:.0f} MB/s), {res['requests']} requests "
                          f"{st['by_method']}")
        if "dali" in args.peers:
            py, why = _python_with(["nvidia.dali"], peer_pythons)
            if py is None:
                results["errors"]["dali"] = why
                print(f"dali: could not run: {why}")
            else:
                env_dali = dict(env_s3, S3_USE_VIRTUAL_ADDRESSING="0", S3_ENDPOINT=proxy.endpoint)
                cmd = [py, HERE / "suite_worker.py", "dali", "train", "--warmup-batches",
                       str(args.warmup_batches), "--batches", str(args.batches), "--shuffle",
                       str(args.shuffle), "--files", *urls]
                c0 = server_cpu()
                res = _run(cmd, env_dali, args.timeout, "SUITE_RESULT")
                st = fault_proxy.control(ctl, "/stats")
                res.update(latency_ms=args.peer_latency, server_cpu_s=server_cpu() - c0,
                           requests=st["requests"], by_method=st["by_method"])
                results["dali"].append(res)
                if "error" in res:
                    results["errors"]["dali"] = res["error"]
                    print(f"dali: ERROR {res['error']}")
                else:
                    print(f"dali train s3 +{args.peer_latency:g} ms: "
                          f"{res['images_per_s']:.0f} images/s, {res['requests']} requests")
    finally:
        for srv in (proxy, s3):
            if srv is not None:
                servers.stop(srv)
        shutil.rmtree(work, ignore_errors=True)

    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cores": len(os.sched_getaffinity(0)), "load_avg_end": os.getloadavg()[0],
            "images": data["images"], "shards": len(local), "runs": args.runs,
            "batches": args.batches, "command": " ".join(sys.argv)}
    md = markdown(results, meta)
    (args.out / "remote.json").write_text(json.dumps({"meta": meta, **results}, indent=1))
    (args.out / "remote.md").write_text(md)
    print(md)
    return 0


def _measured(rows: list[dict]) -> list[dict]:
    """The runs that gave figures (a failed run holds only its "error")."""
    return [r for r in rows if "error" not in r]


def _row(*cells: str) -> str:
    """A Markdown table row."""
    return "| " + " | ".join(cells) + " |"


def markdown(res: dict, meta: dict) -> str:
    L = [f"Remote storage benchmark, {meta['date']}: {meta['images']} images in "
         f"{meta['shards']} shards, {meta['runs']} run(s) x {meta['batches']} batches of 256 per "
         f"configuration, {meta['cores']} cores, load average at the end "
         f"{meta['load_avg_end']:.1f}. Command: `{meta['command']}`.", ""]
    groups: dict = {}
    for r in _measured(res["train"]):
        groups.setdefault((r["where"], r["latency_ms"]), []).append(r)
    local = groups.get(("local", None), [])
    local_ips = statistics.median(r["images_per_s"] for r in local) if local else None
    L.append("| train pipeline | images/s (median) | ratio to local | client CPU ms/image | "
             "server CPU ms/image | requests/run | load avg |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    for (where, ms), rs in groups.items():
        ips = statistics.median(r["images_per_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] / r["images"] for r in rs) * 1e3
        srv = statistics.median(r["server_cpu_s"] / r["images"] for r in rs) * 1e3
        req = statistics.median(r["requests"] for r in rs)
        label = "local files" if where == "local" else f"s3:// via proxy +{ms:g} ms/request"
        ratio = f"{ips / local_ips:.2f}x" if local_ips and where != "local" else "-"
        L.append(_row(label, f"{ips:.0f}", ratio, f"{cpu:.2f}",
                      "-" if where == "local" else f"{srv:.2f}",
                      "-" if where == "local" else f"{req:.0f}",
                      f"{statistics.median(r['load_avg'] for r in rs):.1f}"))
    for r in res["train"]:
        if "error" in r:
            L.append(f"\nError ({r['where']} {r['latency_ms']}): {r['error']}")
    if res["read"] or res["dali"] or res["errors"]:
        L += ["", "| peer (same objects, same proxy) | what | rate | CPU per item | requests |",
              "|---|---|---:|---:|---:|"]
        for r in _measured(res["read"]):
            L.append(_row(f"{r['kind']} (+{r['latency_ms']:g} ms)", "read every record once",
                          f"{r['records_per_s']:.0f} records/s ({r['mb_per_s']:.0f} MB/s)",
                          f"{r['cpu_s'] / r['records'] * 1e3:.3f} ms/record",
                          f"{r['requests']} {r.get('by_method', '')}"))
        for r in _measured(res["dali"]):
            L.append(_row(f"DALI fn.readers.tfrecord (+{r['latency_ms']:g} ms)", "train pipeline",
                          f"{r['images_per_s']:.0f} images/s",
                          f"{r['cpu_s'] / r['images'] * 1e3:.2f} ms/image", f"{r['requests']}"))
        for k, why in res["errors"].items():
            L.append(f"\n{k}: could not run: {why}")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
