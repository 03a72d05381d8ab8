#!/usr/bin/env bash
# Installs a built recordflow wheel the way a user meets it and runs a smoke test with it: a clean
# Debian 12 root filesystem (debootstrap) holding only python3, python3-venv and pip (no compiler,
# no -dev packages, no libjpeg/libpng/giflib/libwebp/ISA-L/libcurl/OpenSSL beyond what python3
# itself pulls in), a venv inside it (chroot), `pip install` of the wheel, then
# scripts/wheel_smoke.py and the `recordflow` CLI from the wheel's entry point.
#
#   scripts/wheel_test.sh [WHEEL]    default: the newest dist/recordflow-*manylinux*.whl
#   scripts/wheel_test.sh --prepare  only create the cached root filesystem (scripts/test.sh
#                                    does this in the background while it builds)
#
# Needs root (debootstrap, chroot) and Debian's mirror. The root filesystem is cached in
# $RF_ROOTFS_CACHE (default /var/cache/recordflow/rootfs-bookworm): the first run creates it (a few minutes), later runs
# copy it into a scratch directory, so every run starts from the same clean system.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${RF_ROOTFS_CACHE:-/var/cache/recordflow/rootfs-bookworm}
MIRROR=${RF_DEBIAN_MIRROR:-http://deb.debian.org/debian}

prepare=0
[[ "${1:-}" == "--prepare" ]] && prepare=1 && shift
if [[ $(id -u) -ne 0 ]]; then
  echo "wheel_test: needs root for debootstrap and chroot" >&2
  exit 2
fi
for tool in debootstrap chroot; do
  command -v "$tool" >/dev/null || { echo "wheel_test: $tool not found (scripts/setup.sh --wheel)" >&2; exit 2; }
done

start=$SECONDS
if [[ ! -f "$CACHE/.complete" ]]; then
  echo "== wheel_test: creating the clean Debian 12 root filesystem in $CACHE =="
  rm -rf "$CACHE.tmp"
  mkdir -p "$(dirname "$CACHE")"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip \
      bookworm "$CACHE.tmp" "$MIRROR" >"$(dirname "$CACHE")/debootstrap.log" 2>&1 ||
    { tail -n 30 "$(dirname "$CACHE")/debootstrap.log"; exit 1; }
  # Keep it small: the package cache is not part of the system a user has.
  rm -rf "$CACHE.tmp/var/cache/apt/archives/"*.deb "$CACHE.tmp/var/lib/apt/lists/"*
  touch "$CACHE.tmp/.complete"
  rm -rf "$CACHE"
  mv "$CACHE.tmp" "$CACHE"
  echo "root filesystem created in $((SECONDS - start))s"
fi

[[ $prepare == 1 ]] && { echo "wheel_test: root filesystem ready in $CACHE"; exit 0; }

wheel=${1:-$(ls -t dist/recordflow-*manylinux*.whl 2>/dev/null | head -n 1 || true)}
if [[ -z "$wheel" || ! -f "$wheel" ]]; then
  echo "wheel_test: no wheel given and none in dist/ (build one with scripts/wheel.sh)" >&2
  exit 2
fi

scratch=$(mktemp -d /var/tmp/recordflow-wheel-test.XXXXXX)
cleanup() {
  for m in proc dev; do
    mountpoint -q "$scratch/root/$m" && umount -l "$scratch/root/$m"
  done
  rm -rf "$scratch"
}
trap cleanup EXIT
cp -a "$CACHE" "$scratch/root"
chroot_dir=$scratch/root
mount -t proc proc "$chroot_dir/proc"
mount --bind /dev "$chroot_dir/dev"
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf" 2>/dev/null || true

# The system really is clean: none of the libraries the wheel vendors, no compiler, no headers.
for lib in libjpeg libpng16 libgif libwebp libisal libcurl; do
  if compgen -G "$chroot_dir/usr/lib/x86_64-linux-gnu/${lib}*.so*" >/dev/null; then
    echo "wheel_test: the root filesystem unexpectedly has $lib" >&2
    exit 1
  fi
done
for tool in cc gcc g++ c++ cmake; do
  if chroot "$chroot_dir" sh -c "command -v $tool" >/dev/null 2>&1; then
    echo "wheel_test: the root filesystem unexpectedly has $tool" >&2
    exit 1
  fi
done

mkdir -p "$chroot_dir/work"
cp "$wheel" "$chroot_dir/work/"
cp scripts/wheel_smoke.py "$chroot_dir/work/"
cp -r testdata/golden "$chroot_dir/work/golden"
wheel_name=$(basename "$wheel")

# The wheel's dependencies (NumPy) are fetched by the host's pip into a folder, so the clean
# system needs no index configuration and the test no network from inside the chroot.
mkdir -p "$chroot_dir/work/deps"
pyver=$(chroot "$chroot_dir" python3 -c 'import sys; print("%d%d" % sys.version_info[:2])')
mapfile -t requires < <("${PYTHON:-python3}" - "$wheel" <<'PYEOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            print(line.split(":", 1)[1].split(";")[0].strip())
PYEOF
)
platforms=()
for p in manylinux2014_x86_64 manylinux_2_{17..36}_x86_64; do platforms+=(--platform "$p"); done
"${PYTHON:-python3}" -m pip download -q --disable-pip-version-check --only-binary=:all: \
    --python-version "$pyver" --implementation cp --abi "cp$pyver" "${platforms[@]}" \
    -d "$chroot_dir/work/deps" "${requires[@]}"

echo "== wheel_test: venv + pip install $wheel_name inside the clean system =="
chroot "$chroot_dir" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    sh -euc "
  python3 -m venv /work/venv
  /work/venv/bin/pip install -q --disable-pip-version-check --no-index --find-links /work/deps \
      /work/$wheel_name
  cd /work
  /work/venv/bin/python wheel_smoke.py /work/venv/bin/recordflow /work/golden
"
echo "wheel_test: OK in $((SECONDS - start))s"
