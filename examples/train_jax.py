#!/usr/bin/env python3
"""Trains a small CNN with JAX (CPU) on a synthetic image set, fed by recordflow.

    python examples/train_jax.py [--steps 300] [--batch-size 64] [--data DIR]

The same data and network as train_torch.py, in plain JAX (no Flax/Optax): the parameters are
a pytree, the update is Adam written out, the train step is jitted. rf.jax.loader reads this
process's shard (jax.process_index() / process_count()), reseeded per epoch, and builds each
batch as a global jax.Array with jax.make_array_from_process_local_data over a 1-D "data" mesh
of all devices (one CPU device here; the same code runs data-parallel on many).
"""

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import recordflow as rf
import recordflow.jax as rfj

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import training  # noqa: E402
from synthetic_images import NUM_CLASSES, SPEC, decode, write_dataset  # noqa: E402


def init_params(key):
    k1, k2, k3 = jax.random.split(key, 3)

    def he(k, shape, fan_in):
        return jax.random.normal(k, shape) * np.sqrt(2.0 / fan_in)
    return {
        "conv1": {"w": he(k1, (3, 3, 1, 16), 9), "b": jnp.zeros(16)},
        "conv2": {"w": he(k2, (3, 3, 16, 32), 9 * 16), "b": jnp.zeros(32)},
        "head": {"w": he(k3, (32 * 7 * 7, NUM_CLASSES), 32 * 7 * 7) * 0.5, "b": jnp.zeros(NUM_CLASSES)},
    }


def conv(x, p):
    y = jax.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y + p["b"])


def pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def logits_of(params, image):
    x = pool(conv(image, params["conv1"]))
    x = pool(conv(x, params["conv2"]))
    return x.reshape(x.shape[0], -1) @ params["head"]["w"] + params["head"]["b"]


def loss_of(params, image, label):
    logp = jax.nn.log_softmax(logits_of(params, image))
    return -jnp.mean(jnp.take_along_axis(logp, label[:, None], axis=1))


@jax.jit
def train_step(params, opt, image, label, lr=2e-3, b1=0.9, b2=0.999, eps=1e-8):
    loss, grads = jax.value_and_grad(loss_of)(params, image, label)
    t = opt["t"] + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
    scale = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    params = jax.tree_util.tree_map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + eps), params, m, v)
    return params, {"t": t, "m": m, "v": v}, loss


def main():
    args = training.parse_args(__doc__)

    train_files, val_files = write_dataset(args.data)
    train = (rf.Dataset.from_files(train_files, shuffle_files=True)
             .shuffle(2048)
             .batch(args.batch_size, drop_remainder=True)  # per-process batch
             .parse(SPEC)
             .map(lambda b: {**decode(b), "label": b["image/class/label"].astype(np.int32)})
             .prefetch())
    # Auto axis: the compiler propagates the batch sharding (no sharding-in-types annotations).
    mesh = jax.make_mesh((jax.device_count(),), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))

    params = init_params(jax.random.key(0))
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    opt = {"t": jnp.zeros((), jnp.int32), "m": zeros, "v": zeros}

    def step(batch):
        nonlocal params, opt
        params, opt, loss = train_step(params, opt, batch["image"], batch["label"])
        return float(loss), batch["label"].shape[0]

    print(f"training on {len(train_files)} files, process {jax.process_index()} of "
          f"{jax.process_count()}, {jax.device_count()} device(s), batch {args.batch_size}, "
          f"{args.steps} steps")
    training.train(lambda epoch: rfj.loader(train, sharding, epoch=epoch, keys=["image", "label"]),
                   step, args.steps, args.batch_size, note=" (incl. compilation)")

    val = rf.Dataset.from_files(val_files).batch(500).parse(SPEC).map(decode)
    predict = jax.jit(lambda p, x: jnp.argmax(logits_of(p, x), axis=1))
    training.validate(rfj.loader(val, keys=["image", "label"]),
                      lambda image: np.asarray(predict(params, jax.device_put(image))))


if __name__ == "__main__":
    main()
