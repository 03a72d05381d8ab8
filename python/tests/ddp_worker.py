"""One rank of the real DDP job of test_torch_ddp.py (run by torch.distributed.run).

argv: DATA_DIR OUT_DIR. Reads DATA_DIR/part-*.tfrecord (an uneven split over 2 ranks) with the
documented recipe (shuffled files and records, batch(drop_remainder=True), rf.torch.loader) and
an all_reduce after every step, as a DDP backward does: ranks with different step counts would
hang here until the gloo timeout. Writes OUT_DIR/rank<r>.json with what the rank saw.
"""

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist

import recordflow as rf
import recordflow.torch as rft

SPEC = {"id": rf.FixedLen([], "int64")}
BATCH = 8


def run_epoch(loader, epoch, stop_after=None):
    """Steps of one epoch (all of them, or the first stop_after), each followed by a
    collective; returns the ids in order."""
    if epoch is not None:
        loader.set_epoch(epoch)
    ids = []
    for step, batch in enumerate(loader):
        assert batch["id"].shape[0] == BATCH
        ids += batch["id"].tolist()
        t = torch.ones(1)
        dist.all_reduce(t)  # hangs (then times out) if the other rank has stopped
        if stop_after is not None and step + 1 == stop_after:
            break  # before pulling another batch: the state is after this one
    return ids


def main():
    data, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    ds = (rf.Dataset.from_files(os.path.join(data, "part-*.tfrecord"), shuffle_files=True)
          .shuffle(64).batch(BATCH, drop_remainder=True).parse(SPEC))
    loader = rft.loader(ds, seed=7)  # rank and world size from torch.distributed
    result = {"rank": rank, "len": len(loader), "dropped": loader.dataset.dropped_records,
              "epochs": []}
    for epoch in range(2):
        result["epochs"].append(run_epoch(loader, epoch))

    # Mid-epoch checkpoint of epoch 2 through state_dict(), restored into a new loader in a
    # "new job", then the uninterrupted epoch 2 for comparison.
    first = run_epoch(loader, 2, stop_after=3)
    state = loader.state_dict()
    fresh = rft.loader(ds, seed=7)
    fresh.load_state_dict(state)
    rest = run_epoch(fresh, None)
    result["resumed"] = [first, rest]
    result["full_epoch2"] = run_epoch(loader, 2)

    # The same through torchdata's StatefulDataLoader with 2 workers per rank (when installed).
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError:
        StatefulDataLoader = None
    if StatefulDataLoader is None:
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
        dist.barrier()
        dist.destroy_process_group()
        return

    ids_ds = rft.IterableDataset(ds, seed=7, num_workers=2)
    ids_ds.set_epoch(3)
    dl = StatefulDataLoader(ids_ds, batch_size=None, num_workers=2)
    first = run_epoch(dl, None, stop_after=3)
    state = dl.state_dict()
    del dl
    ids_ds2 = rft.IterableDataset(ds, seed=7, num_workers=2)
    dl2 = StatefulDataLoader(ids_ds2, batch_size=None, num_workers=2)
    dl2.load_state_dict(state)
    rest = run_epoch(dl2, None)
    result["workers_len"] = len(ids_ds)
    result["workers_dropped"] = ids_ds.dropped_records
    result["workers_resumed"] = [first, rest]
    full = StatefulDataLoader(ids_ds, batch_size=None, num_workers=2)
    result["workers_full"] = run_epoch(full, None)

    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
