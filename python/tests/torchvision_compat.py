"""torchvision's pure-Python transforms where its compiled ops do not load.

scripts/setup.sh installs a torchvision whose compiled ops (_C.so) want the CUDA torch beside the
CPU torch; `import torchvision` then fails in torchvision/__init__ (which registers those ops),
although transforms.v2, its functional ops and tv_tensors are pure Python over torch. Used by
the tests and by bench/ (stdlib only: it also runs in the benchmarks' peers virtualenv).
"""

import importlib.util
import sys
import types


def ensure_torchvision() -> bool:
    """Makes `import torchvision.transforms.v2` (and tv_tensors) work: the plain import, else
    the package loaded without its __init__. False when torchvision is not installed."""
    try:
        import torchvision.transforms.v2  # noqa: F401
        return True
    except (ImportError, RuntimeError, OSError):
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        spec = importlib.util.find_spec("torchvision")
        if spec is None:
            return False
        pkg = types.ModuleType("torchvision")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__file__ = spec.origin
        sys.modules["torchvision"] = pkg
        return True
