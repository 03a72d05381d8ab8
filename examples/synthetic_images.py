"""A small synthetic image-classification set written as TFRecord files, for the training
examples (no downloads).

Each image is 28x28 grayscale uint8: an oriented grating whose angle depends on the class (10
classes, 18 degrees apart), with a random phase and frequency jitter, a random shift and pixel
noise — easy enough that a small CNN learns it in a few hundred steps, hard enough that the loss
has somewhere to go. Records are tf.train.Examples with the keys of `recordflow convert`:
"image/encoded" (raw pixel bytes here, not JPEG), "image/height", "image/width",
"image/channels", "image/class/label"; files "train-0000i-of-0000N.tfrecord" with .idx files,
and "validation-00000-of-00001.tfrecord".
"""

import os

import numpy as np

import recordflow as rf

SIZE = 28
NUM_CLASSES = 10
SPEC = {
    "image/encoded": rf.FixedLen([], "bytes"),
    "image/class/label": rf.FixedLen([], "int64"),
}


def make_images(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, n)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) - SIZE / 2
    angle = labels * (np.pi / NUM_CLASSES) + rng.normal(0, 0.05, n)
    freq = 0.45 + rng.normal(0, 0.04, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    dx, dy = rng.integers(-3, 4, (2, n))
    proj = ((xx[None] - dx[:, None, None]) * np.cos(angle)[:, None, None]
            + (yy[None] - dy[:, None, None]) * np.sin(angle)[:, None, None])
    img = 0.5 + 0.35 * np.sin(freq[:, None, None] * proj + phase[:, None, None])
    img += rng.normal(0, 0.12, img.shape)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8), labels


def write_dataset(out_dir, num_train=6000, num_val=1000, shards=4):
    """Writes the set under out_dir (once: kept while the files are there); returns
    (train_files, validation_files)."""
    os.makedirs(out_dir, exist_ok=True)
    train = [os.path.join(out_dir, f"train-{i:05d}-of-{shards:05d}.tfrecord") for i in range(shards)]
    val = [os.path.join(out_dir, "validation-00000-of-00001.tfrecord")]
    if all(os.path.exists(p) for p in train + val):
        return train, val
    for files, n, seed in ((train, num_train, 0), (val, num_val, 1)):
        images, labels = make_images(n, seed)
        for s, path in enumerate(files):
            with rf.RecordWriter(path, index=True) as w:
                for i in range(s, n, len(files)):
                    w.write(rf.Example({
                        "image/encoded": images[i].tobytes(),
                        "image/height": SIZE, "image/width": SIZE, "image/channels": 1,
                        "image/class/label": int(labels[i]),
                    }).serialize())
    return train, val


def decode(batch):
    """A parsed batch -> {"image": float32 [B, 28, 28, 1] in [0, 1], "label": int64 [B]}: the
    raw pixel bytes of the whole batch are joined once and viewed as one uint8 array."""
    pixels = np.frombuffer(b"".join(batch["image/encoded"]), np.uint8)
    image = pixels.reshape(-1, SIZE, SIZE, 1).astype(np.float32) * (1 / 255)
    return {"image": image, "label": batch["image/class/label"]}
