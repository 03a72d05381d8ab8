"""The static optimisation pass (docs/pipeline.md, "Static optimisation"): `map(preset).batch(n)`,
the order tf.data users write, runs as `batch(n).map(preset)` with the same bytes out, the same
skip counts, and checkpoints that restore across the rewrite; describe() shows the plan run."""

import numpy as np
import pytest

import recordflow as rf


def _jpeg(i):
    h, w = 48 + 8 * (i % 5), 64 + 6 * (i % 7)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([(127 + 120 * np.sin(xx / (5 + c + i % 3) + yy / (7 + c))) for c in range(3)], -1)
    return rf.encode_jpeg(img.astype(np.uint8), 90)


@pytest.fixture(scope="module")
def records():
    out = []
    for i in range(29):
        data = _jpeg(i)
        if i in (6, 20):
            data = data[:200]  # truncated: DataLoss, or skipped under on_corruption="skip"
        out.append(rf.Example({"image/encoded": data, "image/class/label": i}).serialize())
    return out


def _all(ds):
    return [(b["image"].copy(), b["label"].copy()) for b in ds]


def _same(a, b):
    assert len(a) == len(b)
    for (ia, la), (ib, lb) in zip(a, b):
        assert ia.dtype == ib.dtype and ia.shape == ib.shape
        assert ia.tobytes() == ib.tobytes()
        np.testing.assert_array_equal(la, lb)


def test_map_then_batch_runs_as_batch_then_map_and_describe_says_so(records):
    op = rf.vision.imagenet_train(32, seed=3, on_corruption="skip")
    ds = rf.Dataset.from_records(records).map(op).batch(8)
    plan = ds.describe()
    assert "records(29) -> batch(8) -> map(imagenet_train(32))" in plan, plan
    assert "[rewrites: map(imagenet_train(32)) -> batch(8) runs as batch(8) -> map(imagenet_train(32))" in plan
    best = rf.Dataset.from_records(records).batch(8).map(op)
    assert "rewrites" not in best.describe()
    it = ds.iterator()
    assert len(list(it)) == 4
    # The executor's stage is named after what ran: the map after the batch.
    names = [s["name"] for s in it.stats()["stages"]]
    assert "batch(8) -> map(imagenet_train(32))" in names, names


@pytest.mark.parametrize("preset", ["train", "eval"])
def test_both_orders_give_the_same_bytes_and_skip_counts(records, preset):
    def make():
        if preset == "train":
            return rf.vision.imagenet_train(40, seed=11, on_corruption="skip")
        return rf.vision.imagenet_eval(40, 48, on_corruption="skip")
    a_op, b_op = make(), make()
    src = rf.Dataset.from_records(records).repeat(2)
    written = _all(src.map(a_op).batch(8, drop_remainder=True))
    best = _all(src.batch(8, drop_remainder=True).map(b_op))
    _same(written, best)
    assert len(written) == 7  # 58 records, drop_remainder
    assert a_op.skipped_records == b_op.skipped_records == 4  # records 6 and 20, two epochs
    # The rows of each batch: 8 minus the corrupt ones it held.
    assert sum(len(l) for _, l in written) == 56 - 4


def test_errors_name_the_same_record_in_both_orders(records):
    op = rf.vision.imagenet_train(24, seed=1)
    for ds in (rf.Dataset.from_records(records).map(op).batch(8),
               rf.Dataset.from_records(records).batch(8).map(op)):
        with pytest.raises(rf.DataLossError, match="record 6 of file #0"):
            _all(ds)


def test_checkpoint_of_the_rewritten_pipeline_restores_exactly(records):
    op = rf.vision.imagenet_train(24, seed=5, on_corruption="skip")
    src = rf.Dataset.from_records(records).repeat(2).shuffle(9, seed=4)
    ds = src.map(op).batch(4)
    want = _all(src.batch(4).map(op))
    for at in (0, 3, 11):
        it = ds.iterator(epoch=0)
        got = []
        for _ in range(at):
            b = next(it)
            got.append((b["image"].copy(), b["label"].copy()))
        state = it.checkpoint()
        it.close()
        got += _all(ds.restore(state))
        _same(got, want)
