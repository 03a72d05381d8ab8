// Bindings for the format layer: RecordReader, RecordWriter, IndexedRecordReader, index files.
// Just over 600 lines: the four classes share the GIL-free read loop and the error mapping
// defined here.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "errors.h"
#include "object_lock.h"
#include "recordflow/format/crc32c.h"
#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"
#include "recordflow/format/record_writer.h"
#include "recordflow/io/filesystem.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {

// io.cc: cache_dir= / cache_size= arguments into the process-wide shard cache.
void ConfigureShardCache(const std::optional<std::string>& cache_dir, nb::handle cache_size);

namespace {

using format::Compression;
using format::CorruptionPolicy;

std::optional<Compression> ToCompression(const std::optional<std::string>& name) {
  if (!name) return std::nullopt;
  return ValueOrThrow(format::ParseCompression(*name));
}

// A read-only view of any bytes-like object (bytes, bytearray, memoryview, NumPy), or the
// UTF-8 bytes of a str.
class BytesArg {
 public:
  explicit BytesArg(nb::handle obj) {
    if (PyUnicode_Check(obj.ptr())) {
      Py_ssize_t size;
      const char* data = PyUnicode_AsUTF8AndSize(obj.ptr(), &size);
      if (data == nullptr) throw nb::python_error();
      span_ = std::as_bytes(std::span(data, static_cast<size_t>(size)));
      return;
    }
    if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      throw nb::type_error("expected a bytes-like object or str");
    }
    has_view_ = true;
    span_ = std::span(static_cast<const std::byte*>(view_.buf), static_cast<size_t>(view_.len));
  }
  ~BytesArg() {
    if (has_view_) PyBuffer_Release(&view_);
  }
  BytesArg(const BytesArg&) = delete;
  BytesArg& operator=(const BytesArg&) = delete;
  std::span<const std::byte> span() const { return span_; }

 private:
  Py_buffer view_{};
  bool has_view_ = false;
  std::span<const std::byte> span_;
};

nb::bytes ToBytes(std::span<const std::byte> b) {
  return nb::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

// Records as the two buffers of an Arrow binary array: offsets (int32, or int64 when the data
// passes 2 GiB: Arrow's large_binary) and the records back to back, as NumPy arrays owning
// native memory, for pa.Array.from_buffers without a copy and without a Python object per
// record (recordType=ByteArray reads in recordflow.spark).
template <typename T>
nb::object OwnedArray(std::vector<T>&& values) {
  const size_t n = values.size();
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(owned->data(), {n}, owner));
}

nb::object ArrowRecordBuffers(std::vector<int64_t>&& offsets, std::vector<uint8_t>&& data) {
  if (data.empty()) data.push_back(0);  // NumPy over an empty vector has no valid pointer
  nb::object data_array = OwnedArray(std::move(data));
  if (offsets.back() <= INT32_MAX) {
    std::vector<int32_t> narrow(offsets.begin(), offsets.end());
    return nb::make_tuple(OwnedArray(std::move(narrow)), data_array);
  }
  return nb::make_tuple(OwnedArray(std::move(offsets)), data_array);
}

void AppendRecord(std::span<const std::byte> record, std::vector<int64_t>* offsets,
                  std::vector<uint8_t>* data) {
  const auto* from = reinterpret_cast<const uint8_t*>(record.data());
  data->insert(data->end(), from, from + record.size());
  offsets->push_back(static_cast<int64_t>(data->size()));
}

// Reads up to `n` records with the GIL released, handing each to `take` (the view lives until
// the next read). Returns the error that stopped the reads (the records before it were handed
// over), or OK at the end of the file or after `n` records.
template <typename Take>
Status ReadWithoutGil(format::RecordReader& reader, size_t n, Take&& take) {
  return WithoutGil([&]() -> Status {
    std::span<const std::byte> record;
    for (size_t i = 0; i < n; ++i) {
      Result<bool> more = reader.ReadRecord(&record);
      if (!more.ok()) return more.status();
      if (!*more) break;
      take(record);
    }
    return Status::OK();
  });
}

// As ReadWithoutGil, for records [start, end) of an indexed file. `scratch` is per call: threads
// reading one reader at once must not share a buffer.
template <typename Take>
Status ReadRangeWithoutGil(const format::IndexedRecordReader& reader, uint64_t start, uint64_t end,
                           Take&& take) {
  return WithoutGil([&]() -> Status {
    std::vector<std::byte> scratch;
    for (uint64_t i = start; i < end; ++i) {
      Result<std::span<const std::byte>> record = reader.ReadRecord(i, &scratch);
      if (!record.ok()) return record.status();
      take(*record);
    }
    return Status::OK();
  });
}

nb::dict EventToDict(const format::CorruptionEvent& e) {
  nb::dict d;
  d["path"] = e.path;
  d["offset"] = e.offset;
  d["record_index"] = e.record_index;
  d["bytes_skipped"] = e.bytes_skipped;
  d["reason"] = e.reason;
  return d;
}

class PyRecordReader {
 public:
  PyRecordReader(const std::filesystem::path& path, const std::optional<std::string>& compression,
                 const std::string& on_corruption, bool verify_checksums, size_t buffer_size,
                 uint64_t max_record_size, const std::optional<std::string>& cache_dir,
                 nb::handle cache_size) {
    ConfigureShardCache(cache_dir, cache_size);
    format::RecordReaderOptions options;
    options.compression = ToCompression(compression);
    options.on_corruption = ValueOrThrow(format::ParseCorruptionPolicy(on_corruption));
    options.verify_checksums = verify_checksums;
    options.buffer_size = buffer_size;
    options.max_record_size = max_record_size;
    reader_ = ValueOrThrow(
        WithoutGil([&] { return format::RecordReader::Open(path.string(), options); }));
    remote_ = io::IsRemotePath(path.string());
  }

  nb::bytes Next() {
    ObjectLock lock(mu_);  // one call at a time
    std::span<const std::byte> record;
    format::RecordReader& reader = Reader();
    auto read = [&] { return reader.ReadRecord(&record); };
    // A remote refill waits on the network, or on read-ahead threads that call into Python (the
    // fsspec bridge): never with the GIL held.
    Result<bool> more = remote_ ? WithoutGil(read) : read();
    if (!more.ok()) ThrowStatus(more.status());
    if (!*more) throw nb::stop_iteration();
    return ToBytes(record);
  }

  // Reads up to `n` records with the GIL released; an empty list at the end of the file.
  // Small records are gathered into one arena and become bytes objects afterwards; large ones
  // become bytes objects at once (the GIL taken briefly), so each is copied only once.
  nb::list ReadBatch(size_t n) {
    ObjectLock lock(mu_);  // one call at a time
    format::RecordReader& reader = Reader();
    constexpr size_t kDirect = 32 << 10;
    std::vector<std::byte> arena;
    // For each record in order: a bytes object already made, or the end of its arena slice.
    std::vector<std::pair<nb::object, size_t>> items;
    items.reserve(std::min<size_t>(n, 1 << 16));
    const Status status = ReadWithoutGil(reader, n, [&](std::span<const std::byte> record) {
      if (record.size() >= kDirect) {
        nb::gil_scoped_acquire acquire;
        items.emplace_back(ToBytes(record), 0);
      } else {
        arena.insert(arena.end(), record.begin(), record.end());
        items.emplace_back(nb::object(), arena.size());
      }
    });
    // Records read before an error are not lost: they are returned, and the (sticky) error
    // is raised by the next call.
    if (!status.ok() && items.empty()) ThrowStatus(status);
    nb::list out;
    size_t begin = 0;
    for (auto& [obj, end] : items) {
      if (obj.is_valid()) {
        out.append(std::move(obj));
      } else {
        out.append(ToBytes(std::span(arena.data() + begin, end - begin)));
        begin = end;
      }
    }
    return out;
  }

  // Up to `n` records as Arrow binary buffers (offsets, data) (see ArrowRecordBuffers), read
  // and copied once with the GIL released; None at the end of the file. As ReadBatch, records
  // read before an error are returned and the (sticky) error is raised by the next call.
  nb::object ReadBatchArrow(size_t n) {
    ObjectLock lock(mu_);  // one call at a time
    format::RecordReader& reader = Reader();
    std::vector<int64_t> offsets{0};
    std::vector<uint8_t> data;
    const Status status = ReadWithoutGil(reader, n, [&](std::span<const std::byte> record) {
      AppendRecord(record, &offsets, &data);
    });
    if (offsets.size() == 1) {
      if (!status.ok()) ThrowStatus(status);
      return nb::none();
    }
    return ArrowRecordBuffers(std::move(offsets), std::move(data));
  }

  void Close() {
    ObjectLock lock(mu_);  // one call at a time
    reader_.reset();
  }
  bool closed() const {
    ObjectLock lock(mu_);  // one call at a time
    return reader_ == nullptr;
  }
  const format::RecordReader& reader() const { return const_cast<PyRecordReader*>(this)->Reader(); }

  nb::list CorruptionEvents() const {
    ObjectLock lock(mu_);  // one call at a time
    nb::list out;
    for (const auto& e : reader().corruption_stats().events) out.append(EventToDict(e));
    return out;
  }

 private:
  format::RecordReader& Reader() {
    if (!reader_) ThrowStatus(FailedPreconditionError("I/O operation on a closed RecordReader"));
    return *reader_;
  }
  // Serializes the calls: the reader is a stream with one position, read with the GIL released
  // (remote files, read_batch) or with no GIL at all.
  mutable std::mutex mu_;
  std::unique_ptr<format::RecordReader> reader_;
  bool remote_ = false;
};

class PyRecordWriter {
 public:
  PyRecordWriter(const std::filesystem::path& path, const std::optional<std::string>& compression,
                 int compression_level, bool index,
                 const std::optional<std::filesystem::path>& index_path, bool sync,
                 size_t buffer_size, bool defer_completion)
      : path_(path.string()) {
    format::RecordWriterOptions options;
    options.compression = ToCompression(compression);
    options.compression_level = compression_level;
    options.write_index = index || index_path.has_value();
    if (index_path) options.index_path = index_path->string();
    options.sync = sync;
    options.buffer_size = buffer_size;
    options.defer_completion = defer_completion;
    writer_ = ValueOrThrow(WithoutGil([&] { return format::RecordWriter::Open(path_, options); }));
  }

  ~PyRecordWriter() {
    if (writer_ && !writer_->closed()) {
      // Dropping an unclosed writer discards its file (nothing half-written may appear under
      // the final name); say so instead of failing silently.
      if (PyErr_WarnFormat(PyExc_ResourceWarning, 1,
                           "recordflow.RecordWriter for '%s' was garbage-collected without "
                           "close(): the unfinished file was discarded",
                           path_.c_str()) != 0) {
        PyErr_WriteUnraisable(nullptr);
      }
    }
  }

  void Write(nb::handle data) {
    BytesArg bytes(data);
    ObjectLock lock(mu_);  // one call at a time
    format::RecordWriter& writer = Writer();
    auto write = [&] { return writer.WriteRecord(bytes.span()); };
    ThrowIfError(bytes.span().size() >= (64 << 10) ? WithoutGil(write) : write());
  }

  // Records i = data[offsets[i], offsets[i + 1]) (an Arrow binary column's buffers, or
  // serialize_columns(as_buffers=True)), all written with the GIL released.
  void WriteBuffers(nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> offsets,
                    nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> data) {
    ObjectLock lock(mu_);  // one call at a time
    format::RecordWriter& writer = Writer();
    const size_t n = offsets.shape(0);
    const int64_t* o = offsets.data();
    const auto limit = static_cast<int64_t>(data.shape(0));
    for (size_t i = 0; i + 1 < n; ++i) {
      if (o[i] < 0 || o[i + 1] < o[i] || o[i + 1] > limit) {
        throw nb::value_error(("RecordWriter.write_buffers for '" + path_ + "': offsets " +
                               std::to_string(i) + ".." + std::to_string(i + 1) +
                               " are not within the data")
                                  .c_str());
      }
    }
    ThrowIfError(WithoutGil([&] {
      Status s;
      const auto* bytes = reinterpret_cast<const std::byte*>(data.data());
      for (size_t i = 0; i + 1 < n && s.ok(); ++i) {
        s = writer.WriteRecord(std::span(bytes + o[i], static_cast<size_t>(o[i + 1] - o[i])));
      }
      return s;
    }));
  }

  void Flush() {
    ObjectLock lock(mu_);  // one call at a time
    format::RecordWriter& writer = Writer();
    ThrowIfError(WithoutGil([&] { return writer.Flush(); }));
  }

  void Close() {
    ObjectLock lock(mu_);  // one call at a time
    if (!writer_) return;
    ThrowIfError(WithoutGil([&] { return writer_->Close(); }));
  }

  void Abort() {
    ObjectLock lock(mu_);  // one call at a time
    if (writer_) writer_->Abort();
  }

  bool Exit(nb::handle exc_type, nb::handle, nb::handle) {
    if (exc_type.is_none()) {
      Close();
    } else {
      Abort();
    }
    return false;
  }

  const std::string& path() const { return path_; }
  bool closed() const { return !writer_ || writer_->closed(); }
  uint64_t records_written() const { return writer_ ? writer_->records_written() : 0; }
  uint64_t bytes_written() const { return writer_ ? writer_->bytes_written() : 0; }
  nb::list pending_uploads() const {
    nb::list out;
    if (!writer_) return out;
    for (const io::PendingUpload& u : writer_->pending_uploads()) {
      nb::dict d;
      d["url"] = u.url;
      d["upload_id"] = u.upload_id;
      d["etags"] = u.etags;
      d["size"] = u.size;
      out.append(d);
    }
    return out;
  }

 private:
  format::RecordWriter& Writer() {
    if (!writer_ || writer_->closed()) {
      ThrowStatus(FailedPreconditionError("write to a closed RecordWriter for '" + path_ + "'"));
    }
    return *writer_;
  }
  // Serializes the calls that write: the writer appends at one position, with the GIL released
  // for large records or with no GIL at all. Exit() calls Close()/Abort(), so it takes no lock
  // itself.
  std::mutex mu_;
  std::string path_;
  std::unique_ptr<format::RecordWriter> writer_;
};

class PyIndexedRecordReader {
 public:
  PyIndexedRecordReader(const std::filesystem::path& path,
                        const std::optional<std::filesystem::path>& index_path) {
    reader_ = ValueOrThrow(WithoutGil([&] {
      return format::IndexedRecordReader::Open(path.string(),
                                               index_path ? index_path->string() : "");
    }));
  }
  size_t size() const { return reader_->size(); }
  nb::bytes Get(int64_t i) {
    int64_t n = static_cast<int64_t>(reader_->size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) throw nb::index_error("record index out of range");
    // Per call, not per reader: ReadRecord is const and thread-safe, and threads reading one
    // reader at once (the GIL is released during the read) must not share a buffer.
    std::vector<std::byte> scratch;
    return ToBytes(ValueOrThrow(
        WithoutGil([&] { return reader_->ReadRecord(static_cast<uint64_t>(i), &scratch); })));
  }
  // Records [start, start + count) clipped to the file, read with the GIL released (one
  // call per range keeps a partition's reads out of the interpreter loop).
  nb::list ReadRange(uint64_t start, uint64_t count) {
    const uint64_t n = reader_->size();
    const uint64_t end = start >= n ? start : std::min(n, start + count);
    std::vector<std::string> records;
    records.reserve(end > start ? end - start : 0);
    ThrowIfError(ReadRangeWithoutGil(*reader_, start, end, [&](std::span<const std::byte> record) {
      records.emplace_back(reinterpret_cast<const char*>(record.data()), record.size());
    }));
    nb::list out;
    for (const std::string& r : records) out.append(nb::bytes(r.data(), r.size()));
    return out;
  }
  // Records [start, start + count) clipped to the file as Arrow binary buffers (offsets, data)
  // (see ArrowRecordBuffers), read and copied once with the GIL released.
  nb::object ReadRangeArrow(uint64_t start, uint64_t count) {
    const uint64_t n = reader_->size();
    const uint64_t end = start >= n ? start : std::min(n, start + count);
    std::vector<int64_t> offsets{0};
    std::vector<uint8_t> data;
    offsets.reserve(end - start + 1);
    ThrowIfError(ReadRangeWithoutGil(*reader_, start, end, [&](std::span<const std::byte> record) {
      AppendRecord(record, &offsets, &data);
    }));
    return ArrowRecordBuffers(std::move(offsets), std::move(data));
  }
  nb::list Entries() const {
    nb::list out;
    for (const auto& e : reader_->entries()) out.append(nb::make_tuple(e.offset, e.size));
    return out;
  }

 private:
  std::unique_ptr<format::IndexedRecordReader> reader_;
};

}  // namespace

void RegisterFormat(nb::module_& m) {
  nb::class_<PyRecordReader>(m, "RecordReader",
                             "Reads the records of one TFRecord file as bytes.\n\n"
                             "compression: None (from the extension: .gz GZIP, .zz ZLIB), \"\", "
                             "\"GZIP\" or \"ZLIB\".\n"
                             "on_corruption: \"raise\" (DataLossError naming path, offset and "
                             "record index) or \"skip\" (skipped records are counted in "
                             "skipped_records / skipped_bytes / corruption_events).")
      .def(nb::init<const std::filesystem::path&, const std::optional<std::string>&,
                    const std::string&, bool, size_t, uint64_t, const std::optional<std::string>&,
                    nb::handle>(),
           "path"_a, "compression"_a = nb::none(), "on_corruption"_a = "raise", nb::kw_only(),
           "verify_checksums"_a = true, "buffer_size"_a = size_t{1} << 20,
           "max_record_size"_a = uint64_t{1} << 30, "cache_dir"_a = nb::none(),
           "cache_size"_a = nb::none())
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &PyRecordReader::Next)
      .def("read_batch", &PyRecordReader::ReadBatch, "n"_a,
           "Up to n records (GIL released while reading); [] at the end of the file.")
      .def("read_batch_arrow", &PyRecordReader::ReadBatchArrow, "n"_a,
           "Up to n records as the buffers of an Arrow binary array: (offsets, data) NumPy "
           "arrays (int32 offsets, int64 past 2 GiB; uint8 data), GIL released, no Python "
           "object per record; None at the end of the file.")
      .def("close", &PyRecordReader::Close)
      .def("__enter__", [](nb::handle self) { return self; })
      .def("__exit__", [](PyRecordReader& r, nb::args) { r.Close(); })
      .def_prop_ro("closed", &PyRecordReader::closed)
      .def_prop_ro("path", [](const PyRecordReader& r) { return r.reader().path(); })
      .def_prop_ro(
          "offset", [](const PyRecordReader& r) { return r.reader().offset(); },
          "Byte offset just past the last record read (decompressed stream offset "
          "for compressed files).")
      .def_prop_ro("records_read",
                   [](const PyRecordReader& r) { return r.reader().records_read(); })
      .def_prop_ro(
          "skipped_records",
          [](const PyRecordReader& r) { return r.reader().corruption_stats().records_skipped; })
      .def_prop_ro(
          "skipped_bytes",
          [](const PyRecordReader& r) { return r.reader().corruption_stats().bytes_skipped; })
      .def_prop_ro("corruption_events", &PyRecordReader::CorruptionEvents,
                   "The first 100 corrupt regions skipped: dicts with path, offset, "
                   "record_index, bytes_skipped, reason.");

  nb::class_<PyRecordWriter>(m, "RecordWriter",
                             "Writes records to one TFRecord file, byte-identical to "
                             "TensorFlow's writer.\n\n"
                             "The file is written under a temporary name and appears under "
                             "`path` only when close() succeeds; leaving a `with` block by an "
                             "exception, or dropping the writer unclosed, discards it.\n"
                             "index=True also writes `path + '.idx'` (DALI's `offset size` "
                             "lines; uncompressed files only).\n"
                             "defer_completion=True (s3:// only): close() uploads everything "
                             "but leaves the file and index as open multipart uploads, listed "
                             "by `pending_uploads`, for a commit protocol to complete "
                             "(complete_upload) or abort (abort_upload).")
      .def(nb::init<const std::filesystem::path&, const std::optional<std::string>&, int, bool,
                    const std::optional<std::filesystem::path>&, bool, size_t, bool>(),
           "path"_a, "compression"_a = nb::none(), nb::kw_only(), "compression_level"_a = -1,
           "index"_a = false, "index_path"_a = nb::none(), "sync"_a = true,
           "buffer_size"_a = size_t{1} << 20, "defer_completion"_a = false)
      .def("write", &PyRecordWriter::Write, "record"_a, "Appends one record (bytes-like or str).")
      .def("write_buffers", &PyRecordWriter::WriteBuffers, "offsets"_a, "data"_a,
           "Appends records data[offsets[i]:offsets[i + 1]] for each i (int64 offsets, uint8 "
           "data), GIL released.")
      .def("flush", &PyRecordWriter::Flush,
           "Pushes buffered records to the OS (the file keeps its temporary name until close).")
      .def("close", &PyRecordWriter::Close, "Finishes the file and publishes it. Idempotent.")
      .def("abort", &PyRecordWriter::Abort, "Discards everything written.")
      .def("__enter__", [](nb::handle self) { return self; })
      .def("__exit__", &PyRecordWriter::Exit, "exc_type"_a.none(), "exc"_a.none(), "tb"_a.none())
      .def_prop_ro("path", &PyRecordWriter::path)
      .def_prop_ro("closed", &PyRecordWriter::closed)
      .def_prop_ro("records_written", &PyRecordWriter::records_written)
      .def_prop_ro("bytes_written", &PyRecordWriter::bytes_written)
      .def_prop_ro("pending_uploads", &PyRecordWriter::pending_uploads,
                   "After close() with defer_completion: dicts (url, upload_id, etags, size), "
                   "the records file's first, then its index's.");

  nb::class_<PyIndexedRecordReader>(m, "IndexedRecordReader",
                                    "Random access to the records of an uncompressed TFRecord "
                                    "file through its index (`path + '.idx'` by default).")
      .def(nb::init<const std::filesystem::path&, const std::optional<std::filesystem::path>&>(),
           "path"_a, "index_path"_a = nb::none())
      .def("__len__", &PyIndexedRecordReader::size)
      .def("__getitem__", &PyIndexedRecordReader::Get, "i"_a)
      .def("read", &PyIndexedRecordReader::Get, "i"_a)
      .def("read_range", &PyIndexedRecordReader::ReadRange, "start"_a, "count"_a,
           "Records [start, start + count) (clipped to the file) as a list of bytes; CRCs "
           "checked, GIL released while reading.")
      .def("read_range_arrow", &PyIndexedRecordReader::ReadRangeArrow, "start"_a, "count"_a,
           "Records [start, start + count) (clipped to the file) as the buffers of an Arrow "
           "binary array: (offsets, data) NumPy arrays as RecordReader.read_batch_arrow.")
      .def_prop_ro("entries", &PyIndexedRecordReader::Entries);

  m.def(
      "count_records",
      [](const std::filesystem::path& path, const std::optional<std::string>& compression,
         bool verify_checksums, const std::string& on_corruption) {
        format::RecordReaderOptions options;
        options.compression = ToCompression(compression);
        options.verify_checksums = verify_checksums;
        options.on_corruption = ValueOrThrow(format::ParseCorruptionPolicy(on_corruption));
        return ValueOrThrow(WithoutGil([&]() -> Result<uint64_t> {
          RF_ASSIGN_OR_RETURN(auto reader, format::RecordReader::Open(path.string(), options));
          std::span<const std::byte> record;
          while (true) {
            RF_ASSIGN_OR_RETURN(bool more, reader->ReadRecord(&record));
            if (!more) return reader->records_read();
          }
        }));
      },
      "path"_a, "compression"_a = nb::none(), nb::kw_only(), "verify_checksums"_a = true,
      "on_corruption"_a = "raise",
      "Counts the records of a TFRecord file in native code, checking CRCs.");

  m.def(
      "build_index",
      [](const std::filesystem::path& path) {
        const std::vector<format::IndexEntry> entries =
            ValueOrThrow(WithoutGil([&] { return format::BuildIndex(path.string()); }));
        nb::list out;
        for (const auto& e : entries) {
          out.append(nb::make_tuple(e.offset, e.size));
        }
        return out;
      },
      "path"_a, "[(offset, size), ...] for every record of an uncompressed TFRecord file.");

  m.def(
      "write_index",
      [](const std::filesystem::path& path,
         const std::optional<std::filesystem::path>& index_path) {
        return ValueOrThrow(WithoutGil([&]() -> Result<size_t> {
          RF_ASSIGN_OR_RETURN(auto entries, format::BuildIndex(path.string()));
          RF_RETURN_IF_ERROR(format::WriteIndexFile(
              index_path ? index_path->string() : path.string() + ".idx", entries));
          return entries.size();
        }));
      },
      "path"_a, "index_path"_a = nb::none(),
      "Writes the index file (DALI's `offset size` format); returns the record count.");

  m.def(
      "crc32c",
      [](nb::handle data, uint32_t value) {
        BytesArg bytes(data);
        return format::Crc32cExtend(value, bytes.span());
      },
      "data"_a, "value"_a = 0, "CRC32C of data, extending `value` (a previous CRC32C).");
  m.def("crc32c_backend", [] { return std::string(format::Crc32cBackendName()); });
}

}  // namespace recordflow::python
