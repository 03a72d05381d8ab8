"""The `recordflow` command of the wheel: runs the native CLI shipped in recordflow/_bin/.

The native binary lives inside the package (not in the scripts folder) so that auditwheel can
point it at the libraries vendored beside the package. This module stays outside `recordflow`
so that starting the command does not import the package (NumPy, the extension).
"""

import importlib.util
import os
import sys


def _binary() -> str:
    spec = importlib.util.find_spec("recordflow")
    for base in (spec.submodule_search_locations or []) if spec else []:
        exe = os.path.join(base, "_bin", "recordflow")
        if os.path.isfile(exe):
            return exe
    raise SystemExit("recordflow: the native CLI is missing from the installed package "
                     "(expected recordflow/_bin/recordflow); reinstall recordflow")


def main() -> None:
    exe = _binary()
    # exec, not a child process: exit codes, signals (Ctrl-C) and stdin/stdout are the CLI's own.
    os.execv(exe, [exe, *sys.argv[1:]])


if __name__ == "__main__":
    main()
