"""recordType=ByteArray decode, the data sources' read step alone (no Spark): records of one
TFRecord file to one Arrow binary column, by `RecordReader.read_batch` + `pa.array` (one Python
`bytes` object per record) against `RecordReader.read_batch_arrow` + `pa.Array.from_buffers`
(offsets and data built in C++, GIL released; the path Spark's and Ray's readers take).

    python bench/bytearray_decode.py [--records 200000] [--batch 4096] [--runs 5]

Prints the median rows/s of alternated runs and their ratio, with the load average."""

import argparse
import os
import random
import statistics
import tempfile
import time

import pyarrow as pa

import recordflow as rf
from recordflow import _core
from recordflow._arrow_io import RecordBatchDecoder


def decode_all(path, batch, native, decoder):
    rows = 0
    reader = _core.RecordReader(path)
    while True:
        if native:
            got = reader.read_batch_arrow(batch)
            if got is None:
                break
        else:
            got = reader.read_batch(batch)
            if not got:
                break
        rows += decoder(got, path, rows).num_rows
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bytes.tfrecord")
        with rf.RecordWriter(path) as w:
            for _ in range(args.records):
                w.write(rng.randbytes(rng.randrange(50, 250)))
        decoder = RecordBatchDecoder(pa.schema([("byteArray", pa.binary())]), "ByteArray")
        rates = {False: [], True: []}
        print(f"load average at start {os.getloadavg()[0]:.1f}")
        for _ in range(args.runs):
            for native in (False, True):
                start = time.perf_counter()
                rows = decode_all(path, args.batch, native, decoder)
                rates[native].append(rows / (time.perf_counter() - start))
                assert rows == args.records
        objects, buffers = statistics.median(rates[False]), statistics.median(rates[True])
        print(f"{args.records:,} records of 50-249 B, batches of {args.batch}, median of {args.runs}:")
        print(f"  bytes objects (read_batch + pa.array):            {objects:12,.0f} rows/s")
        print(f"  native buffers (read_batch_arrow + from_buffers): {buffers:12,.0f} rows/s")
        print(f"  ratio {buffers / objects:.2f}x; load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
