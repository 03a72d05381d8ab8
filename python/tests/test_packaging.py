"""How the installed package meets a user: no framework imported by `import recordflow`, the
`recordflow` command from the package's entry point, the demo data generator as an extra."""

import os
import shutil
import subprocess
import sys

import recordflow as rf

# Optional parts (pyproject.toml's extras): importing recordflow must not pull in any of them.
_OPTIONAL = ["torch", "tensorflow", "jax", "keras", "pyspark", "fsspec", "s3fs", "PIL", "skimage",
             "sklearn", "recordflow.datasets", "recordflow.demo", "recordflow.torch",
             "recordflow.jax", "recordflow.tf", "recordflow.keras"]


def test_import_recordflow_imports_no_framework_or_extra():
    code = ("import sys, recordflow\n"
            f"print(','.join(m for m in {_OPTIONAL!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import recordflow imported: {out.stdout.strip()}"


def test_cli_entry_point_runs_the_native_cli_of_this_package():
    cli = shutil.which("recordflow", path=os.path.dirname(sys.executable))
    assert cli is not None, "the recordflow entry point is not installed beside this Python"
    native = os.path.join(os.path.dirname(rf.__file__), "_bin", "recordflow")
    assert os.path.isfile(native)
    out = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert rf.__version__ in out.stdout
    # Exit codes come from the native CLI (exec, not a wrapper that swallows them).
    bad = subprocess.run([cli, "count", "/nonexistent/none.tfrecord"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode != 0
    assert "/nonexistent/none.tfrecord" in bad.stderr


def test_datasets_without_pillow_names_the_extra():
    code = ("import sys\n"
            "sys.modules['PIL'] = None  # as if Pillow were not installed\n"
            "from recordflow import datasets\n"
            "try:\n"
            "    datasets.source_photos()\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=60)
    assert "recordflow[datasets]" in out.stdout
