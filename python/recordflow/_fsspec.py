"""Every URL scheme recordflow does not serve natively (not local, s3, gs, http, https) goes
through fsspec when it is installed: memory://, hdfs://, az://, sftp://, a registered custom
class, ... (docs/remote-storage.md).

The native layer calls the bridge below from its own threads. Reads of byte ranges go through
the same read-ahead as s3:// (dedicated threads fetch parts ahead of the reader); each call
holds the GIL only while fsspec runs and its bytes are copied. Writes go to a temporary
sibling object, moved onto the final path on commit and removed on abort, so nothing appears
half-written under the final path.
"""
from __future__ import annotations

import uuid

_installed = False


def _split(url: str):
    import fsspec.core

    return fsspec.core.url_to_fs(url)


class _Writer:
    def __init__(self, url: str):
        self.fs, self.path = _split(url)
        self.tmp = f"{self.path}.rf-tmp-{uuid.uuid4().hex[:12]}"
        self.f = self.fs.open(self.tmp, "wb")

    def write(self, data: bytes) -> None:
        self.f.write(data)

    def commit(self) -> None:
        self.f.close()
        self.fs.mv(self.tmp, self.path)

    def abort(self) -> None:
        try:
            self.f.close()
        finally:
            try:
                self.fs.rm_file(self.tmp)
            except FileNotFoundError:
                pass


class _Bridge:
    """What the native FsspecFileSystem calls (python/src/io.cc)."""

    def handles(self, scheme: str) -> bool:
        import fsspec

        try:
            fsspec.get_filesystem_class(scheme)
        except (ValueError, ImportError):
            return False
        return True

    def stat(self, url: str):
        """(size, etag, is_directory); FileNotFoundError when nothing is there."""
        fs, path = _split(url)
        info = fs.info(path)
        is_dir = info.get("type") == "directory"
        etag = info.get("ETag") or info.get("etag") or ""
        return int(info.get("size") or 0), str(etag), is_dir

    def read(self, url: str, offset: int, n: int) -> bytes:
        fs, path = _split(url)
        return fs.cat_file(path, start=offset, end=offset + n)

    def list(self, prefix: str) -> list[str]:
        """Every file whose URL starts with `prefix`, as URLs in the prefix's spelling."""
        fs, _ = _split(prefix)
        cut = prefix.rfind("/")
        root_url = prefix[: cut + 1] if cut > prefix.find("://") + 2 else prefix
        root = fs._strip_protocol(root_url).rstrip("/")
        try:
            found = fs.find(root) if root else fs.find("")
        except FileNotFoundError:
            return []
        out = []
        for p in found:
            if not p.startswith(root):
                continue
            url = root_url.rstrip("/") + p[len(root):]
            if url.startswith(prefix):
                out.append(url)
        return sorted(out)

    def delete(self, url: str) -> None:
        fs, path = _split(url)
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass

    def open_writer(self, url: str) -> _Writer:
        return _Writer(url)


def install() -> bool:
    """Registers the bridge with the native layer once; False when fsspec is not installed."""
    global _installed
    if _installed:
        return True
    import importlib.util

    # Found, not imported: `import recordflow` imports no optional package; fsspec is imported
    # on the first URL with a scheme recordflow does not serve itself.
    if importlib.util.find_spec("fsspec") is None:
        return False
    from recordflow import _core

    _core._set_fsspec_bridge(_Bridge())
    _installed = True
    return True
