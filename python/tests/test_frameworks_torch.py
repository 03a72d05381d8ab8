"""rf.torch: DataLoader workers x DDP ranks see every record exactly once per epoch; batches
alias recordflow's memory and outlive the iterator; the GIL is released while waiting."""

import gc

import numpy as np
import pytest

import recordflow as rf

torch = pytest.importorskip("torch")
import recordflow.torch as rft  # noqa: E402

# JAX (imported by other test files in this process) warns on every fork; the DataLoader
# workers never touch JAX.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
from test_frameworks import COUNTS, SPEC, all_ids, write_files  # noqa: E402


def epoch_ids(ds, rank, world_size, num_workers, epoch, even=None):
    ids_ds = rft.IterableDataset(ds, rank=rank, world_size=world_size, seed=11, even=even,
                                 num_workers=num_workers or None)
    ids_ds.set_epoch(epoch)
    # timeout: a worker that hangs fails the test instead of blocking it.
    loader = torch.utils.data.DataLoader(ids_ds, batch_size=None, num_workers=num_workers,
                                         timeout=60 if num_workers else 0)
    out = []
    for batch in loader:
        assert isinstance(batch["id"], torch.Tensor) and batch["id"].dtype == torch.int64
        values, splits = batch["v"]
        assert int(splits[-1] - splits[0]) <= len(values)
        out += batch["id"].tolist()
    return out


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("num_workers", [0, 2, 4])
@pytest.mark.parametrize("files", ["many", "few"])
def test_dataloader_workers_and_ranks_see_every_record_once(tmp_path, num_workers, files):
    # 9 files: by file up to 8 consumers; 3 files: by record from 4 consumers on.
    counts = COUNTS if files == "many" else [50, 7, 31]
    paths = write_files(tmp_path, counts)
    if files == "many":
        ds = rf.Dataset.from_files(paths, shuffle_files=True).shuffle(40).batch(8).parse(SPEC)
    else:
        ds = rf.Dataset.from_files(paths).global_shuffle().batch(8).parse(SPEC)
    seen = []
    for rank in range(2):
        seen += epoch_ids(ds, rank, 2, num_workers, epoch=0)  # even=None: the plain split
    assert sorted(seen) == all_ids(counts)
    assert len(seen) == len(set(seen))
    # The default (even="drop"): at most once, and only the counted records are missing.
    ids_ds = rft.IterableDataset(ds, rank=0, world_size=2, seed=11, num_workers=max(num_workers, 1))
    per_rank = [epoch_ids(ds, rank, 2, num_workers, epoch=0, even="drop") for rank in range(2)]
    seen = per_rank[0] + per_rank[1]
    assert len(seen) == len(set(seen))
    assert len(seen) + ids_ds.dropped_records == len(all_ids(counts))


def test_set_epoch_reshuffles_like_distributed_sampler(tmp_path):
    paths = write_files(tmp_path, [40, 40, 40])
    ds = rf.Dataset.from_files(paths).global_shuffle().batch(10).parse(SPEC)
    # recordflow runs in this process before DataLoader forks its workers: each worker's
    # engine must still run (a forked child starts its own thread pool).
    assert len(list(ds)) == 12
    orders = []
    for epoch in (0, 1, 0):
        ranks = [epoch_ids(ds, rank, 2, 2, epoch) for rank in range(2)]
        assert sorted(ranks[0] + ranks[1]) == all_ids([40, 40, 40])
        orders.append(ranks)
    assert orders[0] != orders[1]   # a new epoch, a new order
    assert orders[0] == orders[2]   # the same epoch, the same order on every run


def test_ranks_from_torch_distributed(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.distributed, "is_available", lambda: True)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 1)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 3)
    ds = rft.IterableDataset(rf.Dataset.from_records([b"x"]))
    assert (ds.rank, ds.world_size) == (1, 3)
    assert rft.distributed_rank(0, 1) == (0, 1)


def test_loader_tensors_alias_recordflow_memory_and_outlive_the_iterator(tmp_path):
    paths = write_files(tmp_path, [300])
    ds = rf.Dataset.from_files(paths).batch(64).parse({"id": SPEC["id"], "v": SPEC["v"]})
    it = ds.iterator()
    batch = next(it)
    ids = batch["id"]
    assert ids.base is not None  # a view over the C++ buffer, owned by its capsule
    t = torch.from_numpy(ids)
    assert t.data_ptr() == ids.ctypes.data
    assert torch.from_dlpack(ids).data_ptr() == ids.ctypes.data
    converted = rft.to_torch(batch)
    assert converted["id"].data_ptr() == ids.ctypes.data
    values, splits = converted["v"]
    assert values.data_ptr() == batch["v"].values.ctypes.data
    assert splits.data_ptr() == batch["v"].row_splits.ctypes.data

    # Tensors from the loader stay valid after the loader, iterator and dataset are gone.
    loader = rft.loader(ds)
    kept = [b["id"] for b in loader]
    expected = [k.clone() for k in kept]
    del it, batch, ids, t, converted, values, splits, loader, ds
    gc.collect()
    churn = [np.full(1 << 16, 7, np.int64) for _ in range(64)]  # reuse freed memory, if any
    for k, e in zip(kept, expected):
        assert torch.equal(k, e)
    assert torch.cat(kept).tolist() == list(range(300))
    del churn


def test_loader_keys_ragged_and_bytes(tmp_path):
    paths = write_files(tmp_path, [20])
    ds = rf.Dataset.from_files(paths).batch(5).parse(SPEC)
    first = next(iter(rft.loader(ds)))
    assert isinstance(first["name"], np.ndarray) and first["name"].dtype == object  # bytes stay
    assert first["name"][1] == b"f0r1"
    assert set(next(iter(rft.loader(ds, keys=["id"])))) == {"id"}
    dense = next(iter(rft.loader(ds, keys=["v"], ragged="dense", ragged_pad=-1)))["v"]
    assert dense.tolist() == [[-1, -1], [0, -1], [0, 1], [-1, -1], [0, -1]]
    kept = next(iter(rft.loader(ds, ragged="keep")))["v"]
    assert isinstance(kept, rf.Ragged)
    with pytest.raises(ValueError):
        rft.loader(ds, ragged="nope")


def test_loader_devices_without_cuda(tmp_path):
    paths = write_files(tmp_path, [20])
    ds = rf.Dataset.from_files(paths).batch(5).parse({"id": SPEC["id"]})
    assert torch.cat([b["id"] for b in rft.loader(ds, device="cpu")]).tolist() == list(range(20))
    if not torch.cuda.is_available():
        with pytest.warns(UserWarning, match="pin_memory"):
            loader = rft.loader(ds, pin_memory=True)
        assert torch.cat([b["id"] for b in loader]).tolist() == list(range(20))
    else:  # runs on a CUDA machine: pinned memory, side stream, one batch ahead
        loader = rft.loader(ds, device="cuda", pin_memory=True)
        got = [b["id"] for b in loader]
        assert all(t.is_cuda for t in got)
        assert torch.cat(got).cpu().tolist() == list(range(20))


def test_loader_releases_the_gil(tmp_path):
    from gil_check import progress_during

    path = str(tmp_path / "big.tfrecord")
    with rf.RecordWriter(path) as w:
        record = rf.Example({"x": np.arange(4096, dtype=np.float32), "y": 1}).serialize()
        for _ in range(4000):
            w.write(record)
    spec = {"x": rf.FixedLen([4096], "float32"), "y": rf.FixedLen([], "int64")}
    ds = rf.Dataset.from_files(path).repeat().batch(256).parse(spec).prefetch(1)
    it = iter(rft.loader(ds))
    assert progress_during(lambda: next(it), calls=30) > 0


def test_dataset_pickles_without_iterators(tmp_path):
    import pickle

    paths = write_files(tmp_path, [10])
    src = rf.Dataset.from_files(paths).batch(4).parse(SPEC)
    list(src)  # the user's dataset has run an iterator
    ds = rft.IterableDataset(src, rank=0, world_size=1)
    again = pickle.loads(pickle.dumps(ds))
    assert sorted(i for b in again for i in b["id"].tolist()) == list(range(10))
