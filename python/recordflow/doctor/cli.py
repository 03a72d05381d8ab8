"""`recordflow doctor GLOB... [options]` in Python (``python -m recordflow.doctor``): the same
options, presets and exit codes as the native command (tools/recordflow/doctor.cc)."""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from recordflow.dataset import Dataset
from recordflow.doctor.measure import _cores, _source_paths
from recordflow.doctor.rules import error_name
from recordflow.doctor.run import diagnose

PRESETS = ("imagenet_train", "imagenet_eval", "records", "parse")


def _infer_spec(path: str, compression: str | None) -> dict:
    """A VarLen spec of every feature of the first record (dtype from its values)."""
    from recordflow import Example, RecordReader, VarLen
    for record in RecordReader(path, compression):
        spec = {}
        for key, value in Example.parse(record).items():
            values = value if isinstance(value, (list, tuple, np.ndarray)) else [value]
            first = values[0] if len(values) else None
            if isinstance(first, (bytes, str)):
                spec[key] = VarLen("bytes")
            elif isinstance(first, (float, np.floating)):
                spec[key] = VarLen("float32")
            else:
                spec[key] = VarLen("int64")
        return spec
    raise ValueError(f"'{path}' has no records: cannot infer the features to parse")


def build_preset(paths: list[str], preset: str, batch: int, interleave: int | None = None,
                 compression: str | None = None) -> Dataset:
    """The pipeline `recordflow doctor --preset` diagnoses: the files read with interleave
    (``interleave`` files at once; 0: one at a time; None: min(files, cores)), repeated, then
    the preset's work, batched, prefetched (autotuned)."""
    from recordflow import vision
    ds = Dataset.from_files(paths, compression=compression, shuffle_files=preset == "imagenet_train",
                            seed=0)
    files = _source_paths(ds)
    cycle = min(len(files), _cores()) if interleave is None else interleave
    if cycle > 1:
        ds = ds.interleave(cycle_length=cycle)
    ds = ds.repeat()
    if preset == "imagenet_train":
        ds = (ds.shuffle(1024, seed=0).batch(batch, drop_remainder=True)
              .map(vision.imagenet_train(224, seed=0)))
    elif preset == "imagenet_eval":
        ds = ds.batch(batch).map(vision.imagenet_eval(224, 256))
    elif preset == "parse":
        ds = ds.batch(batch).parse(_infer_spec(files[0], compression))
    elif preset == "records":
        ds = ds.batch(batch)
    else:
        raise ValueError(f"unknown preset '{preset}' (one of {', '.join(PRESETS)})")
    return ds.prefetch()


_EXIT_OK, _EXIT_ERROR, _EXIT_USAGE, _EXIT_DATA_LOSS = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    """Usage errors as the other subcommands print them (docs/cli.md), exit status 2."""

    def error(self, message: str):
        self.exit(_EXIT_USAGE, f"recordflow: usage error: {message}\n"
                               f"Run '{self.prog} --help' for usage.\n")


def main(argv: list[str] | None = None, prog: str = "recordflow doctor") -> int:
    """`recordflow doctor GLOB... [options]` (the C++ `recordflow doctor` runs this)."""
    parser = _Parser(
        prog=prog,
        description="Runs an input pipeline over the given TFRecord files alone and with a "
                    "(simulated) training step; reports its ceiling, whether the step waits "
                    "on data, the slowest stage, and what would help, with gains measured by "
                    "trying variants. See docs/doctor.md.",
        epilog="exit codes: 0 report written; 1 error (no files, unreadable data, ...); "
               "2 usage error; 3 corrupt data found")
    parser.add_argument("files", nargs="+", metavar="GLOB", help="TFRecord files or glob patterns")
    parser.add_argument("--preset", choices=PRESETS, default="records",
                        help="the pipeline's work: imagenet_train (shuffle, random-resized-crop "
                             "224, flip, normalize), imagenet_eval (resize 256, center crop 224), "
                             "records (batches of raw records), parse (batches parsed with every "
                             "feature of the first record). Default: records")
    parser.add_argument("--batch", type=int, default=256, metavar="N", help="batch size (default 256)")
    parser.add_argument("--step-ms", type=float, default=None, metavar="MS",
                        help="simulate a training step of MS milliseconds (a sleep: no CPU, like "
                             "a step on a GPU); without it only the ceiling is measured")
    parser.add_argument("--seconds", type=float, default=3.0, metavar="S",
                        help="seconds for each main phase (default 3; variants run min(S, 2))")
    parser.add_argument("--interleave", type=int, default=None, metavar="N",
                        help="files read at once (0 or 1: one at a time; default min(files, cores))")
    parser.add_argument("--compression", choices=("GZIP", "ZLIB", "NONE"), default=None,
                        help="compression of the files (default: from each file name)")
    parser.add_argument("--no-variants", action="store_true",
                        help="do not try variants: estimates only (faster)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--html", metavar="PATH", help="also write an HTML report with a "
                                                       "per-step wait/compute timeline")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.batch <= 0:
        parser.error("--batch must be > 0")
    if args.seconds <= 0:
        parser.error("--seconds must be > 0")
    if args.step_ms is not None and args.step_ms < 0:
        parser.error("--step-ms must be >= 0")

    from recordflow import errors
    compression = None if args.compression is None else ("" if args.compression == "NONE" else args.compression)
    # A path that is not there is a mistake on the command line: said here, naming it, before
    # anything is read. (Patterns that match nothing are reported by from_files: exit 1.)
    for path in args.files:
        if any(c in path for c in "*?["):
            continue
        if "://" in path and not path.startswith("file://"):
            continue  # a URL: a missing object is NotFound naming it (exit 1), from from_files
        if not os.path.exists(path):
            parser.error(f"no such file: '{path}'")
        if os.path.isdir(path):
            parser.error(f"'{path}' is a folder: give the TFRecord files in it "
                         f"(e.g. '{os.path.join(path, '*.tfrecord')}')")
    try:
        ds = build_preset(args.files, args.preset, args.batch, args.interleave, compression)
        report = diagnose(ds, step_seconds=None if args.step_ms is None else args.step_ms / 1e3,
                          seconds=args.seconds, try_variants=not args.no_variants,
                          verbose=not args.quiet and not args.json)
        if args.html:
            report.write_html(args.html)
        if args.json:
            out = report.to_dict()
            out["preset"] = args.preset
            out["files"] = len(_source_paths(ds) or [])
            sys.stdout.write(json.dumps(out, indent=2) + "\n")
        else:
            sys.stdout.write(str(report))
            if args.html:
                sys.stdout.write(f"timeline: {args.html}\n")
        sys.stdout.flush()
    except errors.DataLossError as e:
        print(f"recordflow: DataLoss: {e}", file=sys.stderr)
        return _EXIT_DATA_LOSS
    except (errors.Error, OSError, ValueError) as e:
        print(f"recordflow: {error_name(e)}: {e}", file=sys.stderr)
        return _EXIT_ERROR
    return _EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
