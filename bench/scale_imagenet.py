#!/usr/bin/env python3
"""How the ImageNet train pipeline's cost grows with the shard count: the same JPEG records
resharded into 10 ... 2,000 shards, recordflow side by side with tf.data.

    python bench/scale_imagenet.py                       # 10, 100, 500, 2000 shards
    python bench/scale_imagenet.py --shards 10,2000 --runs 3 --markdown out.md

The records are the suite's (bench/data/suite-10x300: `python bench/suite.py --contenders
recordflow bare --runs 1 --no-micro` writes them; --src takes any TFRecord shards of
'image/encoded' JPEGs with 'image/class/label'). `rf.reshard` copies them, in a seeded shuffled
order, into S shards with .idx files under --work. Each measurement is one fresh process of
bench/suite_worker.py (the suite's train pipelines: the same augmentation, batch 256, shuffle
buffer 2048): time to first batch, images/s over --batches batches after --warmup-batches, peak
PSS of the process tree. Prints one markdown table (medians over --runs runs, contenders
alternating) and, with --json, every run.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SRC = os.path.join(HERE, "data", "suite-10x300", "shards", "*.tfrecord")


def reshard(src: list[str], work: str, shards: int) -> list[str]:
    import recordflow as rf

    dst = os.path.join(work, f"shards-{shards}")
    done = os.path.join(dst, "DONE")
    if not os.path.exists(done):
        rf.reshard(src, dst, shards=shards, shuffle=True, seed=0, prefix="train", sync=False)
        with open(done, "w") as f:
            f.write("ok\n")
    files = sorted(glob.glob(os.path.join(dst, "train-*.tfrecord")))
    if len(files) != shards:
        raise SystemExit(f"{dst}: {len(files)} shards, not {shards}")
    return files


def run(contender: str, files: list[str], warmup: int, batches: int, timeout: float) -> dict:
    cmd = [sys.executable, os.path.join(HERE, "suite_worker.py"), contender, "train", "--files",
           *files, "--warmup-batches", str(warmup), "--batches", str(batches)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln.split(" ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("SUITE_RESULT ")]
    if p.returncode != 0 or not lines:
        return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=DEFAULT_SRC, help="glob of the source shards")
    ap.add_argument("--shards", default="10,100,500,2000")
    ap.add_argument("--contenders", default="recordflow,tfdata")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup-batches", type=int, default=2)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=600, help="each run's limit, seconds")
    ap.add_argument("--work", default="/tmp/rf_scale_imagenet")
    ap.add_argument("--markdown")
    ap.add_argument("--json")
    a = ap.parse_args()
    src = sorted(f for f in glob.glob(a.src) if not f.endswith(".idx"))
    if not src:
        raise SystemExit(f"no shards match {a.src!r}: run python bench/suite.py first (see --help)")
    counts = [int(s) for s in a.shards.split(",")]
    contenders = a.contenders.split(",")
    os.makedirs(a.work, exist_ok=True)
    import recordflow as rf

    records = sum(rf.count_records(f) for f in src)
    results: dict[int, dict[str, list[dict]]] = {}
    started = time.time()
    for s in counts:
        files = reshard(src, a.work, s)
        results[s] = {c: [] for c in contenders}
        for r in range(a.runs):
            order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
            for c in order:
                out = run(c, files, a.warmup_batches, a.batches, a.timeout)
                results[s][c].append(out)
                shown = out.get("error") or (f"{out['images_per_s']:.0f} img/s, ttfb "
                                             f"{out['time_to_first_batch_s']:.2f} s")
                print(f"{s:>5} shards run {r} {c:<10} {shown}", flush=True)
    load = os.getloadavg()
    names = {"recordflow": "rf", "tfdata": "tf"}
    head = ["shards", "records/shard"]
    for c in contenders:
        n = names.get(c, c)
        head += [f"{n} TTFB s", f"{n} img/s", f"{n} peak PSS MB"]
    if "recordflow" in contenders and "tfdata" in contenders:
        head.append("rf/tf img/s")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in counts:
        row = [f"{s:,}", f"{records / s:,.1f}"]
        ok = {c: [x for x in results[s][c] if "error" not in x] for c in contenders}
        for c in contenders:
            if not ok[c]:
                row += ["error", "error", "error"]
                continue
            row += [f"{median(ok[c], 'time_to_first_batch_s'):.2f}",
                    f"{median(ok[c], 'images_per_s'):,.0f}",
                    f"{median(ok[c], 'peak_pss_bytes') / 2**20:,.0f}"]
        if "rf/tf img/s" in head:
            rf, tf = ok["recordflow"], ok["tfdata"]
            row.append(f"{median(rf, 'images_per_s') / median(tf, 'images_per_s'):.2f}x"
                       if rf and tf else "-")
        lines.append("| " + " | ".join(row) + " |")
    table = "\n".join(lines)
    note = (f"\n`python bench/scale_imagenet.py --shards {a.shards} --runs {a.runs}` on "
            f"{os.cpu_count()} cores, {(time.time() - started) / 60:.1f} min, load average at the "
            f"end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}; medians of {a.runs} runs.\n")
    print(table + "\n" + note)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(table + "\n" + note)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({str(k): v for k, v in results.items()}, f, indent=1)
    return 0 if all("error" not in x for r in results.values() for v in r.values() for x in v) else 1


if __name__ == "__main__":
    sys.exit(main())
