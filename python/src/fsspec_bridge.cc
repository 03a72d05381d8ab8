// The fsspec fallback (recordflow/_fsspec.py): a native FileSystem whose operations call a
// Python bridge object. Native threads (read-ahead, pipeline workers) take the GIL only for the
// Python call and the copy of its bytes; reads of whole parts run on the read-ahead threads of
// NewRangedRandomAccessFile, so the thread that consumes records never waits on Python I/O.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "recordflow/io/custom_filesystem.h"
#include "recordflow/io/filesystem.h"

namespace nb = nanobind;

namespace recordflow::python {
namespace {

// The Python error as a Status: FileNotFoundError -> kNotFound, PermissionError ->
// kPermissionDenied, anything else kIOError; the message names the URL. Requires the GIL.
Status FromPython(const nb::python_error& e, const std::string& what, const std::string& url) {
  std::string msg = what + " " + url + " (fsspec): " + e.what();
  if (e.matches(PyExc_FileNotFoundError)) return NotFoundError("no such object: " + msg);
  if (e.matches(PyExc_PermissionError)) return PermissionDeniedError("access denied: " + msg);
  return IOError(msg);
}

// Interpreter shutdown: no more calls into Python.
bool PythonGone() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() == 0 || Py_IsFinalizing() != 0;
#else
  return Py_IsInitialized() == 0 || _Py_IsFinalizing() != 0;
#endif
}

Status Gone(const std::string& url) {
  return FailedPreconditionError("cannot reach fsspec for " + url + ": Python is shutting down");
}

class FsspecWriter final : public io::AtomicFileWriter {
 public:
  FsspecWriter(std::string url, nb::object writer)
      : AtomicFileWriter(std::move(url), ""), writer_(std::move(writer)) {}
  ~FsspecWriter() override {
    FsspecWriter::Abort();
    if (PythonGone()) {
      (void)writer_.release();  // leaked: Python cannot take it back now
      return;
    }
    nb::gil_scoped_acquire gil;
    writer_.reset();
  }

  Status Append(std::span<const std::byte> data) override {
    if (closed_) return FailedPreconditionError("write to closed file '" + path() + "'");
    if (PythonGone()) return Gone(path());
    nb::gil_scoped_acquire gil;
    try {
      writer_.attr("write")(nb::bytes(reinterpret_cast<const char*>(data.data()), data.size()));
    } catch (nb::python_error& e) {
      return FromPython(e, "cannot write", path());
    }
    bytes_written_ += data.size();
    return Status::OK();
  }

  Status Commit() override {
    if (closed_) return FailedPreconditionError("commit of closed file '" + path() + "'");
    if (PythonGone()) return Gone(path());
    Status s;
    {
      nb::gil_scoped_acquire gil;
      try {
        writer_.attr("commit")();
        closed_ = true;
      } catch (nb::python_error& e) {
        s = FromPython(e, "cannot commit", path());
      }
    }
    if (!s.ok()) Abort();
    return s;
  }

  void Abort() override {
    if (closed_) return;
    closed_ = true;
    if (PythonGone()) return;
    nb::gil_scoped_acquire gil;
    try {
      writer_.attr("abort")();
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("recordflow: aborting an fsspec write");
    }
  }

 private:
  nb::object writer_;
  bool closed_ = false;
};

class FsspecFileSystem final : public io::FileSystem {
 public:
  // `bridge` is a strong reference kept until process exit (never released: native threads may
  // use it at any time).
  explicit FsspecFileSystem(nb::handle bridge) : bridge_(bridge) { bridge_.inc_ref(); }

  bool Handles(const std::string& scheme) {
    if (PythonGone()) return false;
    nb::gil_scoped_acquire gil;
    try {
      return nb::cast<bool>(bridge_.attr("handles")(scheme));
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("recordflow: asking fsspec about a URL scheme");
      return false;
    }
  }

  Result<std::unique_ptr<io::RandomAccessFile>> OpenRandomAccess(const std::string& path) override {
    RF_ASSIGN_OR_RETURN(io::FileInfo info, Stat(path));
    if (info.is_directory) return InvalidArgumentError("'" + path + "' is a directory");
    nb::handle bridge = bridge_;
    auto read = [bridge, path](uint64_t offset, std::span<std::byte> dst) -> Result<size_t> {
      if (PythonGone()) return Gone(path);
      nb::gil_scoped_acquire gil;
      try {
        nb::object got = bridge.attr("read")(path, offset, dst.size());
        nb::bytes b = nb::cast<nb::bytes>(got);
        const size_t n = std::min(b.size(), dst.size());
        std::memcpy(dst.data(), b.c_str(), n);
        return n;
      } catch (nb::python_error& e) {
        return FromPython(e, "cannot read at byte offset " + std::to_string(offset) + " of", path);
      }
    };
    return io::NewRangedRandomAccessFile(path, info.size, std::move(read));
  }

  Result<std::unique_ptr<io::AtomicFileWriter>> OpenWritable(
      const std::string& path, io::AtomicFileOptions options) override {
    if (PythonGone()) return Gone(path);
    if (options.defer_completion) {
      return UnimplementedError("'" + path + "': fsspec file systems have no deferred uploads");
    }
    nb::gil_scoped_acquire gil;
    try {
      nb::object w = bridge_.attr("open_writer")(path);
      return std::unique_ptr<io::AtomicFileWriter>(
          std::make_unique<FsspecWriter>(path, std::move(w)));
    } catch (nb::python_error& e) {
      return FromPython(e, "cannot open for writing", path);
    }
  }

  Result<io::FileInfo> Stat(const std::string& path) override {
    if (PythonGone()) return Gone(path);
    nb::gil_scoped_acquire gil;
    try {
      auto [size, etag, is_dir] =
          nb::cast<std::tuple<uint64_t, std::string, bool>>(bridge_.attr("stat")(path));
      io::FileInfo info;
      info.size = size;
      info.etag = etag;
      info.is_directory = is_dir;
      return info;
    } catch (nb::python_error& e) {
      return FromPython(e, "cannot stat", path);
    }
  }

  Result<std::vector<std::string>> ListPrefix(const std::string& prefix) override {
    if (PythonGone()) return Gone(prefix);
    nb::gil_scoped_acquire gil;
    try {
      return nb::cast<std::vector<std::string>>(bridge_.attr("list")(prefix));
    } catch (nb::python_error& e) {
      return FromPython(e, "cannot list", prefix);
    }
  }

  Status Delete(const std::string& path) override {
    if (PythonGone()) return Gone(path);
    nb::gil_scoped_acquire gil;
    try {
      bridge_.attr("delete")(path);
      return Status::OK();
    } catch (nb::python_error& e) {
      return FromPython(e, "cannot delete", path);
    }
  }

 private:
  nb::handle bridge_;
};

}  // namespace

void RegisterFsspecBridge(nb::module_& m) {
  m.def(
      "_set_fsspec_bridge",
      [](nb::object bridge) {
        auto fs = std::make_shared<FsspecFileSystem>(bridge);
        FsspecFileSystem* raw = fs.get();
        io::SetFallbackFileSystem([raw](const std::string& scheme) { return raw->Handles(scheme); },
                                  std::move(fs));
      },
      "bridge", "Routes every URL scheme recordflow does not serve natively to `bridge`.");
}

}  // namespace recordflow::python
