#!/usr/bin/env python3
"""Trains a small CNN with PyTorch (CPU) on a synthetic image set, fed by recordflow.

    python examples/train_torch.py [--steps 300] [--batch-size 64] [--data DIR]

The data (6,000 training + 1,000 validation 28x28 images, 10 classes; see synthetic_images.py)
is written once as TFRecord files. The input pipeline runs in recordflow's C++ engine (file
order and shuffle reseeded every epoch by set_epoch, batch, parse) and rf.torch.loader hands
each batch to PyTorch as tensors over recordflow's buffers: no DataLoader worker processes.
Prints the loss and throughput every 50 steps and the validation accuracy at the end.
"""

import argparse
import os
import sys
import tempfile
import time

import torch
from torch import nn

import recordflow as rf
import recordflow.torch as rft

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "recordflow-synthetic-images"))
    args = ap.parse_args()
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
    step, epoch, seen, window_loss, window_steps = 0, 0, 0, 0.0, 0
    start = last = time.perf_counter()
    print(f"training on {len(train_files)} files, batch {args.batch_size}, {args.steps} steps")
    while step < args.steps:
        loader.set_epoch(epoch)  # a new file order and shuffle each epoch, as DistributedSampler
        for batch in loader:
            x = batch["image"].permute(0, 3, 1, 2)  # NHWC -> NCHW, a view
            loss = loss_fn(model(x), batch["label"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            seen += len(x)
            window_loss += loss.item()
            window_steps += 1
            if step % 50 == 0 or step == args.steps:
                now = time.perf_counter()
                print(f"step {step:4d}  epoch {epoch}  loss {window_loss / window_steps:.4f}  "
                      f"{window_steps * args.batch_size / (now - last):8.0f} images/s")
                window_loss, window_steps, last = 0.0, 0, now
            if step == args.steps:
                break
        epoch += 1
    elapsed = time.perf_counter() - start
    print(f"trained {step} steps, {seen} images in {elapsed:.1f} s: {seen / elapsed:.0f} images/s")

    # Input alone: how fast recordflow delivers these batches (the model is the bottleneck).
    t = time.perf_counter()
    n = sum(len(b["label"]) for b in loader)
    print(f"input pipeline alone: {n / (time.perf_counter() - t):.0f} images/s")

    val = rf.Dataset.from_files(val_files).batch(500).parse(SPEC).map(decode)
    correct = total = 0
    model.eval()
    with torch.no_grad():
        for batch in rft.loader(val, keys=["image", "label"]):
            pred = model(batch["image"].permute(0, 3, 1, 2)).argmax(1)
            correct += int((pred == batch["label"]).sum())
            total += len(pred)
    print(f"validation accuracy: {correct / total:.3f} ({total} images)")


if __name__ == "__main__":
    main()
