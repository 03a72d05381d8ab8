"""One quick look at the ImageNet train (or eval) pipeline of whichever recordflow this Python imports.

For A/B checks between two builds (run them alternately, several times: the host drifts):

    python bench/train_probe.py "bench/data/suite-10x300/shards/*.tfrecord" --images 3072
    python bench/train_probe.py "bench/data/suite-10x300/shards/*.tfrecord" --preset eval

Prints the time to first batch, images/s and process CPU-ms per image over the measured
batches (after one warm-up batch), minor page faults per image, peak RSS, and how long
closing an iterator takes right after its first batch (median of --closes). Not part of the
suite: its figures are the suite's (`python bench/suite.py`).
"""
import argparse
import glob
import resource
import statistics
import sys
import time

import recordflow as rf


def pipeline(files, preset="train"):
    if preset == "eval":  # the suite's eval pipeline, repeated
        return (rf.Dataset.from_files(files).repeat().batch(256, drop_remainder=True)
                .map(rf.vision.imagenet_eval(224, 256)).prefetch())
    return (rf.Dataset.from_files(files, shuffle_files=True, seed=0).interleave()
            .shuffle(2048, seed=0).repeat().batch(256, drop_remainder=True)
            .map(rf.vision.imagenet_train(224, seed=0)).prefetch())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", help="glob of TFRecord shards with 'image/encoded' JPEGs")
    ap.add_argument("--images", type=int, default=3072, help="images measured")
    ap.add_argument("--closes", type=int, default=5, help="iterators opened and closed")
    ap.add_argument("--preset", choices=["train", "eval"], default="train",
                    help="imagenet_train(224) after a shuffle, or imagenet_eval(224, 256) in order")
    a = ap.parse_args()
    files = sorted(glob.glob(a.files))
    if not files:
        sys.exit(f"no files match {a.files!r}")
    start = time.perf_counter()
    it = iter(pipeline(files, a.preset))
    next(it)
    ttfb = time.perf_counter() - start
    next(it)  # warm-up
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    cpu0, t0, n = time.process_time(), time.perf_counter(), 0
    for batch in it:
        n += batch["image"].shape[0]
        if n >= a.images:
            break
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    it.close()
    del batch
    closes = []
    for _ in range(a.closes):
        it = iter(pipeline(files, a.preset))
        next(it)
        t = time.perf_counter()
        it.close()
        closes.append(time.perf_counter() - t)
    print(f"time to first batch {ttfb:.2f} s; {n / wall:.0f} images/s; "
          f"{cpu * 1000 / n:.2f} CPU-ms per image; "
          f"{(usage.ru_minflt - faults0) / n:.1f} minor faults per image; "
          f"peak RSS {usage.ru_maxrss / 1024:.0f} MiB; "
          f"close after the first batch {statistics.median(closes) * 1000:.0f} ms (median of {len(closes)})")


if __name__ == "__main__":
    main()
