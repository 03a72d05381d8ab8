"""CPU-ms per image of the ImageNet train and eval presets against a bare full decode.

    taskset -c 0 python bench/cpu_per_image.py [--images 600] [--rounds 5]

Same JPEGs as bench/bench_image.py (scikit-image photographs, Pillow quality 98, shorter side
300-500). "bare": rf.vision.decode_image of each JPEG (libjpeg-turbo full decode to RGB, ISLOW
IDCT, fancy upsampling). "train" / "eval": rf.vision.imagenet_train(224) / imagenet_eval(224,
256) mapped over batches of 32 records. The three run in turn, --rounds times; the figures are
the medians of process CPU time per image, so another job on the host moves them less than
wall time. For an A/B of two builds, run this alternately with each (PYTHONPATH=<other build>).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import bench_image  # noqa: E402

import recordflow as rf  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    jpegs = bench_image.make_images(a.images)
    records = [rf.Example({"image/encoded": j, "image/class/label": k}).serialize()
               for k, j in enumerate(jpegs)]

    def bare():
        for j in jpegs:
            rf.vision.decode_image(j)

    def preset(op):
        def run():
            for _ in rf.Dataset.from_records(records).batch(32).map(op):
                pass
        return run

    fns = {"bare": bare, "train": preset(rf.vision.imagenet_train(224, seed=0)),
           "eval": preset(rf.vision.imagenet_eval(224, 256))}
    for f in fns.values():
        f()  # warm-up
    load0 = os.getloadavg()[0]
    ms = {k: [] for k in fns}
    for _ in range(a.rounds):
        for k, f in fns.items():
            c = time.process_time()
            f()
            ms[k].append((time.process_time() - c) * 1000 / len(jpegs))
    med = {k: statistics.median(v) for k, v in ms.items()}
    print(f"{len(jpegs)} JPEGs, {a.rounds} rounds, kernels {rf.vision.kernel_backend()}, "
          f"load {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    print("CPU-ms per image (median): " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()))
    print(f"bare / train {med['bare'] / med['train']:.3f}x, bare / eval {med['bare'] / med['eval']:.3f}x")


if __name__ == "__main__":
    main()
