"""What the fuzz seed scripts in this folder share: writing a seed corpus."""

from __future__ import annotations

import os


def write_seeds(seeds: dict[str, bytes], *outs: str) -> None:
    """Writes each seed as the file `name` into every folder of `outs` (created if missing)."""
    for out in outs:
        os.makedirs(out, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
    print(f"wrote {len(seeds)} seeds to {', '.join(outs)}")
