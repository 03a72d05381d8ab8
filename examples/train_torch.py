#!/usr/bin/env python3
"""Trains a small CNN with PyTorch (CPU) on a synthetic image set, fed by recordflow.

    python examples/train_torch.py [--steps 300] [--batch-size 64] [--data DIR]

The data (6,000 training + 1,000 validation 28x28 images, 10 classes; see synthetic_images.py)
is written once as TFRecord files. The input pipeline runs in recordflow's C++ engine (file
order and shuffle reseeded every epoch by set_epoch, batch, parse) and rf.torch.loader hands
each batch to PyTorch as tensors over recordflow's buffers: no DataLoader worker processes.
Prints the loss and throughput every 50 steps and the validation accuracy at the end.
"""

import os
import sys
import time

import torch
from torch import nn

import recordflow as rf
import recordflow.torch as rft

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import training  # noqa: E402
from synthetic_images import NUM_CLASSES, SPEC, decode, write_dataset  # noqa: E402


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(32 * 7 * 7, NUM_CLASSES)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def main():
    args = training.parse_args(__doc__)
    torch.manual_seed(0)

    train_files, val_files = write_dataset(args.data)
    train = (rf.Dataset.from_files(train_files, shuffle_files=True)
             .shuffle(2048)
             .batch(args.batch_size, drop_remainder=True)
             .parse(SPEC)
             .map(decode)          # raw bytes -> float32 NHWC, once per batch
             .prefetch())
    loader = rft.loader(train, keys=["image", "label"], seed=0)  # DDP ranks: from torch.distributed

    model = SmallCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = nn.CrossEntropyLoss()

    def epoch_batches(epoch):
        loader.set_epoch(epoch)  # a new file order and shuffle each epoch, as DistributedSampler
        return loader

    def train_step(batch):
        x = batch["image"].permute(0, 3, 1, 2)  # NHWC -> NCHW, a view
        loss = loss_fn(model(x), batch["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), len(x)

    print(f"training on {len(train_files)} files, batch {args.batch_size}, {args.steps} steps")
    training.train(epoch_batches, train_step, args.steps, args.batch_size)

    # Input alone: how fast recordflow delivers these batches (the model is the bottleneck).
    t = time.perf_counter()
    n = sum(len(b["label"]) for b in loader)
    print(f"input pipeline alone: {n / (time.perf_counter() - t):.0f} images/s")

    val = rf.Dataset.from_files(val_files).batch(500).parse(SPEC).map(decode)
    model.eval()
    with torch.no_grad():
        training.validate(rft.loader(val, keys=["image", "label"]),
                 lambda image: model(image.permute(0, 3, 1, 2)).argmax(1))


if __name__ == "__main__":
    main()
