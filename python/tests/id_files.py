"""TFRecord files of small Examples keyed by "id" (record i of file f has id f * 1000 + i), which
the dataset, stage, framework-adapter and DDP tests write and check their outputs against."""

import numpy as np

import recordflow as rf


def write_id_files(directory, counts, *, features, stem="part", suffix=".tfrecord",
                   index=True) -> list[str]:
    """File f, `directory/{stem}-{f:03d}{suffix}`, holds counts[f] Examples
    {"id": f * 1000 + i, **features(f, i)} (with a .idx file when `index`); returns the paths."""
    paths = []
    for f, n in enumerate(counts):
        path = str(directory / f"{stem}-{f:03d}{suffix}")
        with rf.RecordWriter(path, index=index) as w:
            for i in range(n):
                w.write(rf.Example({"id": f * 1000 + i, **features(f, i)}).serialize())
        paths.append(path)
    return paths


def all_ids(counts) -> list[int]:
    """Every id of files with `counts` records, in file order (which is sorted)."""
    return [f * 1000 + i for f, n in enumerate(counts) for i in range(n)]


def ids(elements) -> list[int]:
    """The ids in a dataset's elements, in order: parsed elements or batches (dicts), or
    serialized Examples (one, or a list of them for a batch)."""
    out = []
    for e in elements:
        if isinstance(e, dict):
            out += np.atleast_1d(e["id"]).tolist()
        else:
            recs = e if isinstance(e, list) else [e]
            out += [int(rf.Example.parse(r)["id"][0]) for r in recs]
    return out
