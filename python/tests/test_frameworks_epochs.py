"""Epochs and resumption through the TF / Keras / JAX adapters, on real JPEG shards written by
rf.convert: every iteration of a seeded pipeline is a new, deterministic order with new
augmentations (tf.data's reshuffle_each_iteration); model.fit sees every record once per
epoch; state_dict / load_state_dict resume mid-epoch with every record exactly once."""


import numpy as np
import pytest

import recordflow as rf

N = 24  # records; each image is its own class, so the label is the record's id
SIZE = 16  # output crop


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    Image = pytest.importorskip("PIL.Image")
    root = tmp_path_factory.mktemp("epochs")
    src = root / "images"
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:40, 0:48]
    for i in range(N):
        d = src / f"c{i:02d}"
        d.mkdir(parents=True)
        # Smooth gradients plus noise: different crops give different pixels.
        img = np.stack([(xx * (3 + i % 5)) % 256, (yy * (2 + i % 7)) % 256,
                        ((xx + yy) * 2 + 9 * i) % 256], -1).astype(np.float64)
        img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(d / "img.jpg", quality=90)
    dst = root / "shards"
    rf.convert(str(src), str(dst), shards=3, seed=0)
    return dst


@pytest.fixture(scope="module")
def tf():
    """TensorFlow, imported once for the module (its import takes most of a TF test's time)."""
    return pytest.importorskip("tensorflow")


def pipeline(shards, batch=4):
    return (rf.Dataset.from_files(str(shards / "train-*.tfrecord"), shuffle_files=True, seed=1)
            .shuffle(16, seed=2)
            .batch(batch, drop_remainder=True)
            .map(rf.vision.imagenet_train(SIZE, seed=3)))


def by_label(batches):
    """{label: image} over an epoch's batches, and the label order."""
    images, order = {}, []
    for b in batches:
        for img, label in zip(np.asarray(b["image"]), np.asarray(b["label"]).tolist()):
            images[label] = img
            order.append(label)
    return images, order


def assert_new_epoch(first, second):
    """Both epochs cover every record once, in different orders, with different crops."""
    (img0, order0), (img1, order1) = first, second
    assert sorted(order0) == list(range(N)) and sorted(order1) == list(range(N))
    assert order0 != order1
    differing = sum(not np.array_equal(img0[k], img1[k]) for k in range(N))
    assert differing >= N - 2, f"only {differing} of {N} crops changed between epochs"


def test_each_iteration_of_a_seeded_dataset_is_a_new_deterministic_epoch(shards):
    ds = pipeline(shards)
    e0, e1 = by_label(ds), by_label(ds)
    assert_new_epoch(e0, e1)
    assert ds.epoch == 2
    # Deterministic given the seeds and the iteration: a fresh Dataset repeats both epochs,
    # and iterator(epoch=1) jumps to the second.
    again = pipeline(shards)
    a0, a1 = by_label(again), by_label(again)
    assert a0[1] == e0[1] and a1[1] == e1[1]
    assert all(np.array_equal(a1[0][k], e1[0][k]) for k in range(N))
    jump = pipeline(shards)
    assert by_label(jump.iterator(epoch=1))[1] == e1[1] and jump.epoch == 2
    # A checkpoint of epoch 1 restores epoch 1's order (not epoch 0's), mid-epoch.
    it = pipeline(shards).iterator(epoch=1)
    head = [next(it) for _ in range(2)]
    state = it.checkpoint()
    fresh = pipeline(shards)
    resumed = fresh.restore(state)
    assert by_label(head + list(resumed))[1] == e1[1]
    assert fresh.epoch == 2  # the iteration after the restored one comes next


def test_to_tf_dataset_signature_of_vision_presets(shards, tf):
    import recordflow.tf as rftf

    files = str(shards / "train-*.tfrecord")
    after = rf.Dataset.from_files(files).batch(5, drop_remainder=True).map(
        rf.vision.imagenet_eval(SIZE, 20))
    assert rftf.to_tf_dataset(after).element_spec == {
        "image": tf.TensorSpec([5, SIZE, SIZE, 3], tf.float32), "label": tf.TensorSpec([5], tf.int64)}
    ragged_end = rf.Dataset.from_files(files).batch(5).map(rf.vision.imagenet_train(SIZE, seed=0))
    assert rftf.to_tf_dataset(ragged_end).element_spec["image"] == tf.TensorSpec(
        [None, SIZE, SIZE, 3], tf.float32)
    chw = rf.Dataset.from_files(files).batch(4, drop_remainder=True).map(
        rf.vision.imagenet_train(SIZE, seed=0, dtype="float16", layout="CHW"))
    assert rftf.to_tf_dataset(chw).element_spec["image"] == tf.TensorSpec([4, 3, SIZE, SIZE], tf.float16)
    # A preset before batch: the signature comes from a peek, with the batch dimension.
    before = rf.Dataset.from_files(files).map(rf.vision.imagenet_eval(SIZE, 20)).batch(3)
    tfds = rftf.to_tf_dataset(before)
    assert tfds.element_spec["image"].shape.as_list()[1:] == [SIZE, SIZE, 3]
    assert tfds.element_spec["label"].dtype == tf.int64
    assert before.epoch == 0  # the peek ran on a copy
    # The documented map works and yields every record.
    pairs = tfds.map(lambda e: (e["image"], e["label"]))
    labels = sorted(int(v) for _, y in pairs for v in y.numpy())
    assert labels == list(range(N))
    for x, y in rftf.to_tf_dataset(after).map(lambda e: (e["image"], e["label"])).take(1):
        assert x.shape == (5, SIZE, SIZE, 3) and x.dtype == tf.float32 and y.dtype == tf.int64


def _log_ids_per_epoch(tf, keras, tfds):
    """The tf.data pipeline Keras trains on, with every batch's labels and images logged."""
    log = []

    def record(image, label):
        log.append((label.numpy().tolist(), image.numpy()))
        return label

    def tap(e):
        label = tf.py_function(record, [e["image"], e["label"]], tf.int64)
        label.set_shape(e["label"].shape)
        return e["image"], label

    return tfds.map(tap), log


def _model(keras):
    model = keras.Sequential([keras.Input((SIZE, SIZE, 3)), keras.layers.GlobalAveragePooling2D(),
                              keras.layers.Dense(N)])
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class _EpochSplitter:
    def __init__(self, keras, log):
        class Cb(keras.callbacks.Callback):
            def on_epoch_end(cb, epoch, logs=None):
                self.epochs.append(list(log))
                log.clear()
        self.epochs = []
        self.callback = Cb()


def _epoch(entries):
    images, order = {}, []
    for labels, imgs in entries:
        for label, img in zip(labels, imgs):
            images[label] = img
            order.append(label)
    return images, order


def test_keras_fit_on_to_tf_dataset_reshuffles_and_reaugments_every_epoch(shards, tf):
    keras = pytest.importorskip("keras")
    import recordflow.tf as rftf

    tfds = rftf.to_tf_dataset(pipeline(shards))
    train, log = _log_ids_per_epoch(tf, keras, tfds)
    split = _EpochSplitter(keras, log)
    _model(keras).fit(train, epochs=2, verbose=0, callbacks=[split.callback])
    assert len(split.epochs) == 2
    assert_new_epoch(_epoch(split.epochs[0]), _epoch(split.epochs[1]))


def test_keras_resume_at_an_epoch_continues_that_epochs_order(shards, tmp_path, tf):
    keras = pytest.importorskip("keras")
    import recordflow.keras as rfk
    import recordflow.tf as rftf

    tfds = rftf.to_tf_dataset(pipeline(shards))
    train, log = _log_ids_per_epoch(tf, keras, tfds)
    split = _EpochSplitter(keras, log)
    path = tmp_path / "data.state"
    ckpt = rfk.DataCheckpoint(tfds, path)
    _model(keras).fit(train, epochs=1, verbose=0, callbacks=[split.callback, ckpt])
    # A new process: new objects, the saved state.
    tfds2 = rftf.to_tf_dataset(pipeline(shards))
    train2, log2 = _log_ids_per_epoch(tf, keras, tfds2)
    split2 = _EpochSplitter(keras, log2)
    resume = rfk.DataCheckpoint(tfds2, path)
    initial_epoch = resume.restore()
    assert initial_epoch == 1
    _model(keras).fit(train2, epochs=2, initial_epoch=initial_epoch, verbose=0,
                      callbacks=[split2.callback, resume])
    uninterrupted = pipeline(shards)
    by_label(uninterrupted)
    expected = by_label(uninterrupted)  # epoch 1
    assert _epoch(split2.epochs[0])[1] == expected[1]
    assert _epoch(split2.epochs[0])[1] != _epoch(split.epochs[0])[1]


@pytest.mark.parametrize("every", [1, 16, 0])
def test_to_tf_dataset_state_dict_resumes_mid_epoch_exactly_once(shards, tf, every):
    import recordflow.tf as rftf

    ds = pipeline(shards)
    full = [by_label([{k: v.numpy() for k, v in e.items()}])[1]
            for e in rftf.to_tf_dataset(pipeline(shards))]
    tfds = rftf.to_tf_dataset(ds, cardinality=False, checkpoint_every=every)
    it = iter(tfds)
    head = [by_label([{k: v.numpy() for k, v in next(it).items()}])[1] for _ in range(3)]
    # The position after 2 elements (a consumer one element behind), and after 3.
    state = tfds.state_dict(consumed=2)
    assert state["epoch"] == 0 and state["elements"] == 2
    assert state["checkpoint_elements"] == (2 if every == 1 else 0)
    assert (state["checkpoint"] is None) == (every == 0)
    assert tfds.state_dict()["elements"] == 3
    head = head[:2]
    del it
    again = rftf.to_tf_dataset(pipeline(shards), cardinality=False, checkpoint_every=every)
    again.load_state_dict(state)
    rest = [by_label([{k: v.numpy() for k, v in e.items()}])[1] for e in again]
    assert head + rest == full
    # The next iteration is epoch 1, whole.
    nxt = [lab for e in again for lab in e["label"].numpy().tolist()]
    assert sorted(nxt) == list(range(N)) and nxt != [x for b in full for x in b]


def test_keras_pydataset_trains_on_convert_output_with_a_vision_map(shards):
    keras = pytest.importorskip("keras")
    import recordflow.keras as rfk

    seen = {}

    class Logged(rfk.PyDataset):
        def __getitem__(self, index):
            x, y = super().__getitem__(index)
            seen[(self.epoch, index)] = (y.tolist(), np.array(x))
            return x, y

    ds = Logged(str(shards / "train-*"), batch_size=4, x="image", y="label", seed=5,
                map=rf.vision.imagenet_train(SIZE, seed=3))
    assert len(ds) == N // 4 + (N % 4 > 0)
    x, y = ds[0]
    assert x.shape == (4, SIZE, SIZE, 3) and x.dtype == np.float32 and y.dtype == np.int64
    model = _model(keras)
    # Keras reads batches and calls on_epoch_end once while building the model: the callback
    # sets the data to each epoch Keras runs.
    history = model.fit(ds, epochs=2, verbose=0, callbacks=[rfk.DataCheckpoint(ds)])
    assert len(history.history["loss"]) == 2
    epochs = []
    for e in range(2):
        entries = [seen[(e, i)] for i in range(len(ds))]
        epochs.append(_epoch(entries))
    assert_new_epoch(epochs[0], epochs[1])
    # A batch reads the same crops whenever it is read (Keras may read one twice).
    ds.set_epoch(1)
    np.testing.assert_array_equal(ds[2][0], seen[(1, 2)][1])


def test_keras_pydataset_state_resumes_mid_epoch_exactly_once(shards):
    pytest.importorskip("keras")
    import recordflow.keras as rfk

    def make():
        return rfk.PyDataset(str(shards / "train-*"), batch_size=5, x="image", y="label",
                             seed=5, map=rf.vision.imagenet_eval(SIZE, 20))

    ds = make()
    ds.set_epoch(1)
    full = [ds[i][1].tolist() for i in range(len(ds))]
    ds2 = make()
    ds2.load_state_dict({"epoch": 1, "batch": 2, "seed": 5, "num_records": N})
    assert len(ds2) == len(full) - 2
    rest = [ds2[i][1].tolist() for i in range(len(ds2))]
    assert full[:2] + rest == full
    assert sorted(v for b in full for v in b) == list(range(N))
    ds2.on_epoch_end()
    assert len(ds2) == len(full) and ds2.epoch == 2
    with pytest.raises(rf.InvalidArgumentError):
        ds2.load_state_dict({"epoch": 0, "batch": 0, "seed": 6, "num_records": N})


def test_jax_jit_step_over_loader_epochs_and_mid_epoch_resume(shards):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import recordflow.jax as rfj

    @jax.jit
    def step(w, image, label):
        def loss(w):
            logits = image.reshape(image.shape[0], -1) @ w
            return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(label.shape[0]), label])
        return w - 0.01 * jax.grad(loss)(w)

    ds = pipeline(shards)
    w = jnp.zeros((SIZE * SIZE * 3, N))
    epochs = []
    for _ in range(2):  # no epoch= given: the dataset's next iteration each time
        batches = []
        for b in rfj.loader(ds):
            w = step(w, jnp.asarray(b["image"]), jnp.asarray(b["label"]))
            batches.append(b)
        epochs.append(by_label(batches))
    assert bool(jnp.all(jnp.isfinite(w))) and float(jnp.abs(w).sum()) > 0
    assert_new_epoch(epochs[0], epochs[1])
    # Mid-epoch: the state after 2 batches, loaded into a new loader of the same epoch.
    ld = rfj.loader(pipeline(shards), epoch=1)
    head = [next(ld) for _ in range(2)]
    state = ld.state_dict()
    ld.close()
    resumed = rfj.loader(pipeline(shards), epoch=1)
    resumed.load_state_dict(state)
    order = by_label(head + list(resumed))[1]
    assert order == by_label(list(rfj.loader(pipeline(shards), epoch=1)))[1]
    assert sorted(order) == list(range(N))
    # A state taken after the epoch ended (and one loaded but not started) resumes to nothing.
    done = rfj.loader(pipeline(shards), epoch=1)
    assert len(list(done)) == N // 4
    state = done.state_dict()
    again = rfj.loader(pipeline(shards), epoch=1)
    again.load_state_dict(state)
    assert again.state_dict().get("done") is True
    assert list(again) == []


def test_to_tf_dataset_cardinality_gives_keras_its_steps(shards, tf):
    keras = pytest.importorskip("keras")
    import recordflow.tf as rftf

    ds = pipeline(shards)  # 24 records, batches of 4 with drop_remainder
    tfds = rftf.to_tf_dataset(ds)
    assert int(tfds.cardinality()) == len(ds) == N // 4
    assert int(rftf.to_tf_dataset(ds.repeat()).cardinality()) == tf.data.INFINITE_CARDINALITY
    filtered = rf.Dataset.from_files(str(shards / "train-*.tfrecord")).filter(lambda r: True)
    assert int(rftf.to_tf_dataset(filtered).cardinality()) == tf.data.UNKNOWN_CARDINALITY
    assert int(rftf.to_tf_dataset(ds, cardinality=False).cardinality()) == tf.data.UNKNOWN_CARDINALITY
    history = _model(keras).fit(tfds.map(lambda e: (e["image"], e["label"])), epochs=1, verbose=0)
    assert history.params["steps"] == N // 4


def test_keras_fit_resumes_mid_epoch_on_pydataset_exactly_once(shards, tmp_path):
    keras = pytest.importorskip("keras")
    import recordflow.keras as rfk

    class Crash(Exception):
        pass

    def make(log):
        class Logged(rfk.PyDataset):
            def __getitem__(self, index):
                x, y = super().__getitem__(index)
                log[(self.epoch, index + self._start)] = y.tolist()
                return x, y
        return Logged(str(shards / "train-*"), batch_size=4, x="image", y="label", seed=5,
                      map=rf.vision.imagenet_train(SIZE, seed=3))

    class CrashAfter(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:  # 3 batches trained, the data state saved after 2 (save_freq=2)
                raise Crash()

    path = tmp_path / "data.state"
    first = {}
    ds = make(first)
    with pytest.raises(Crash):
        _model(keras).fit(ds, epochs=2, verbose=0,
                          callbacks=[rfk.DataCheckpoint(ds, path, save_freq=2), CrashAfter()])
    resumed_log = {}
    ds2 = make(resumed_log)
    ckpt = rfk.DataCheckpoint(ds2, path, save_freq=2)
    assert ckpt.restore() == 0 and len(ds2) == N // 4 - 2
    resumed_log.clear()  # restore() reads nothing, but be explicit: only fit's reads count
    # Keras fixes the steps per epoch when fit starts: the rest of the epoch is one fit call,
    # the next epochs another.
    model = _model(keras)
    model.fit(ds2, epochs=1, initial_epoch=0, verbose=0, callbacks=[ckpt])
    model.fit(ds2, epochs=2, initial_epoch=1, verbose=0, callbacks=[ckpt])
    # Epoch 0: batches 0-1 before the crash (as saved), 2-5 after the resume; epoch 1 whole.
    reference = make({})
    reference.set_epoch(0)
    epoch0 = [reference[i][1].tolist() for i in range(len(reference))]
    assert [first[(0, i)] for i in range(2)] + [resumed_log[(0, i)] for i in range(2, 6)] == epoch0
    assert sorted(v for i in range(6) for v in resumed_log[(1, i)]) == list(range(N))


def test_torch_loader_reshuffles_and_reaugments_every_epoch(shards):
    """rf.torch.loader: each pass without set_epoch is the next epoch (new order, new crops), and
    set_epoch(k) gives back epoch k's batches exactly."""
    pytest.importorskip("torch")
    import recordflow.torch as rft

    def epoch(loader):
        return by_label({k: v.numpy() for k, v in b.items()} for b in loader)

    loader = rft.loader(pipeline(shards))
    first, second = epoch(loader), epoch(loader)
    assert_new_epoch(first, second)
    again = rft.loader(pipeline(shards))
    again.set_epoch(1)
    images, order = epoch(again)
    assert order == second[1]
    assert all(np.array_equal(images[k], second[0][k]) for k in images)
