"""The command line, training loop and validation that train_torch.py and train_jax.py share;
each brings its framework's work as functions (one step, one prediction)."""

import argparse
import os
import tempfile
import time


def parse_args(doc: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "recordflow-synthetic-images"))
    return ap.parse_args()


def train(epoch_batches, train_step, steps: int, batch_size: int, note: str = "") -> None:
    """Runs `train_step(batch) -> (loss, images)` over `epoch_batches(epoch)`, epoch after epoch,
    for `steps` steps. Prints the mean loss and images/s every 50 steps and the total at the end
    (`note` says what the total includes besides training, e.g. compilation)."""
    step, epoch, seen, window_loss, window_steps = 0, 0, 0, 0.0, 0
    start = last = time.perf_counter()
    while step < steps:
        for batch in epoch_batches(epoch):
            loss, images = train_step(batch)
            step += 1
            seen += images
            window_loss += loss
            window_steps += 1
            if step % 50 == 0 or step == steps:
                now = time.perf_counter()
                print(f"step {step:4d}  epoch {epoch}  loss {window_loss / window_steps:.4f}  "
                      f"{window_steps * batch_size / (now - last):8.0f} images/s")
                window_loss, window_steps, last = 0.0, 0, now
            if step == steps:
                break
        epoch += 1
    elapsed = time.perf_counter() - start
    print(f"trained {step} steps, {seen} images in {elapsed:.1f} s{note}: "
          f"{seen / elapsed:.0f} images/s")


def validate(batches, predict) -> None:
    """Prints the share of `batches` whose "label" equals `predict(batch["image"])`."""
    correct = total = 0
    for batch in batches:
        pred = predict(batch["image"])
        correct += int((pred == batch["label"]).sum())
        total += len(pred)
    print(f"validation accuracy: {correct / total:.3f} ({total} images)")
