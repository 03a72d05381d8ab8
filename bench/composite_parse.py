"""SparseFeature / RaggedFeature parse time: ms per batch of 1,024 records (median of 30),
with plain VarLen as the reference measured in the same run.

    python bench/composite_parse.py
"""
import time

import numpy as np

import recordflow as rf

R = rf.RaggedFeature


def main() -> None:
    records = []
    for i in range(1024):
        n = i % 7
        records.append(rf.Example({
            "v": np.arange(2 * n, dtype=np.float32),
            "s": np.array([0, n, 2 * n], np.int64),
            "ids": np.repeat(np.arange(n), 2).astype(np.int64),
            "idx": np.arange(2 * n, dtype=np.int64)[::-1].copy(),
        }).serialize())
    cases = {
        "RaggedFeature RowSplits": {"r": R("float32", value_key="v", partitions=[R.RowSplits("s")])},
        "RaggedFeature UniformRowLength + ValueRowIds": {
            "r": R("float32", value_key="v", partitions=[R.UniformRowLength(1), R.ValueRowIds("ids")])},
        "SparseFeature (unsorted indices)": {"sp": rf.SparseFeature("idx", "v", "float32", 64)},
        "VarLen (reference)": {"v": rf.VarLen("float32")},
    }
    for name, spec in cases.items():
        parser = rf.Parser(spec)
        parser(records)
        times = []
        for _ in range(30):
            t = time.perf_counter()
            parser(records)
            times.append(time.perf_counter() - t)
        print(f"{name}: {np.median(times) * 1e3:.2f} ms per 1,024 records")


if __name__ == "__main__":
    main()
