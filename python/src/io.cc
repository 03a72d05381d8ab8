// Remote storage hooks for Python: which paths are URLs, and credentials from botocore.
// (Globs, local or remote, go through the one expansion: expand_globs in pipeline.cc.)
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <span>
#include <string_view>

#include "errors.h"
#include "recordflow/io/file.h"
#include "recordflow/io/filesystem.h"
#include "recordflow/io/shard_cache.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {

void RegisterFsspecBridge(nb::module_& m);  // fsspec_bridge.cc

void ConfigureShardCache(const std::optional<std::string>& cache_dir, nb::handle cache_size) {
  if (!cache_dir.has_value() && cache_size.is_none()) return;
  io::ShardCacheOptions o = io::GetShardCache();
  if (cache_dir.has_value()) o.dir = *cache_dir;
  if (nb::isinstance<nb::str>(cache_size)) {
    o.max_bytes = ValueOrThrow(io::ParseByteSize(nb::cast<std::string>(cache_size)));
  } else if (!cache_size.is_none()) {
    const int64_t n = nb::cast<int64_t>(cache_size);
    if (n <= 0) {
      ThrowStatus(InvalidArgumentError("cache_size must be above 0, not " + std::to_string(n)));
    }
    o.max_bytes = static_cast<uint64_t>(n);
  }
  ThrowIfError(io::SetShardCache(o));
}

namespace {

// Streams `src` into an atomic writer at `dst` in 8 MiB reads.
Status CopyFile(const std::string& src, const std::string& dst) {
  RF_ASSIGN_OR_RETURN(auto in, io::RandomAccessFile::Open(src));
  in->AdviseSequential();
  RF_ASSIGN_OR_RETURN(auto out, io::AtomicFileWriter::Create(dst));
  std::vector<std::byte> buffer(8 << 20);
  uint64_t offset = 0;
  while (offset < in->size()) {
    RF_ASSIGN_OR_RETURN(size_t n, in->ReadAt(offset, std::span(buffer)));
    if (n == 0) break;
    RF_RETURN_IF_ERROR(out->Append(std::span(buffer.data(), n)));
    offset += n;
  }
  if (offset != in->size()) {
    return DataLossError("'" + src + "' ended at byte offset " + std::to_string(offset) +
                         " while copying it to '" + dst + "' (" + std::to_string(in->size()) +
                         " bytes at open)");
  }
  return out->Commit();
}

}  // namespace

void RegisterIo(nb::module_& m) {
  RegisterFsspecBridge(m);
  m.def(
      "is_remote_path", [](const std::string& p) { return io::IsRemotePath(p); }, "path"_a);
  m.def(
      "set_s3_credentials",
      [](std::string access_key, std::string secret_key, std::string token) {
        io::SetS3Credentials(std::move(access_key), std::move(secret_key), std::move(token));
      },
      "access_key"_a, "secret_key"_a, "session_token"_a = "",
      "Credentials for s3:// (over the environment and ~/.aws); an empty key clears them.");
  // Object-store commit protocols (recordflow.spark): uploads left open by
  // RecordWriter(defer_completion=True), completed or aborted by the driver.
  m.def(
      "complete_upload",
      [](std::string url, std::string upload_id, std::vector<std::string> etags) {
        io::PendingUpload u{std::move(url), std::move(upload_id), std::move(etags), 0};
        ThrowIfError(WithoutGil([&] { return io::CompletePendingUpload(u); }));
      },
      "url"_a, "upload_id"_a, "etags"_a, "Completes an open multipart upload: `url` appears.");
  m.def(
      "abort_upload",
      [](const std::string& url, const std::string& upload_id) {
        ThrowIfError(WithoutGil([&] { return io::AbortPendingUpload(url, upload_id); }));
      },
      "url"_a, "upload_id"_a, "Aborts an open multipart upload (an unknown one is OK).");
  m.def(
      "list_uploads",
      [](const std::string& prefix) {
        Result<std::vector<io::PendingUpload>> r =
            WithoutGil([&] { return io::ListPendingUploads(prefix); });
        std::vector<std::pair<std::string, std::string>> out;
        for (io::PendingUpload& u : ValueOrThrow(std::move(r))) {
          out.emplace_back(std::move(u.url), std::move(u.upload_id));
        }
        return out;
      },
      "prefix"_a, "Open multipart uploads under `prefix` (a URL) as (url, upload_id) pairs.");
  m.def(
      "list_prefix",
      [](const std::string& prefix) {
        return ValueOrThrow(WithoutGil([&] { return io::ListPath(prefix); }));
      },
      "prefix"_a, "Every file / object whose path starts with `prefix`, sorted.");
  m.def(
      "delete_path",
      [](const std::string& path) {
        ThrowIfError(WithoutGil([&] { return io::DeletePath(path); }));
      },
      "path"_a, "Removes one file or object; a missing one is OK.");
  m.def(
      "read_file",
      [](const std::string& path) {
        std::string data = ValueOrThrow(WithoutGil([&] { return io::ReadFileToString(path); }));
        return nb::bytes(data.data(), data.size());
      },
      "path"_a, "A whole (small) file or object as bytes.");
  m.def(
      "write_file",
      [](const std::string& path, nb::bytes data) {
        std::string_view view(data.c_str(), data.size());
        ThrowIfError(WithoutGil([&] { return io::WriteStringToFileAtomic(path, view); }));
      },
      "path"_a, "data"_a, "Writes a whole file or object atomically.");
  m.def(
      "file_size",
      [](const std::string& path) -> std::optional<uint64_t> {
        Result<io::FileInfo> r = WithoutGil([&] { return io::StatPath(path); });
        if (!r.ok() && r.status().code() == StatusCode::kNotFound) return std::nullopt;
        io::FileInfo info = ValueOrThrow(std::move(r));
        if (info.is_directory) return std::nullopt;
        return info.size;
      },
      "path"_a, "The size of a file or object; None when there is none (or a folder).");
  m.def(
      "copy_file",
      [](const std::string& src, const std::string& dst) {
        ThrowIfError(WithoutGil([&] { return CopyFile(src, dst); }));
      },
      "src"_a, "dst"_a,
      "Copies a file or object to another (local or URL), streaming; `dst` appears whole or "
      "not at all.");
  // Tests: small parts and chunks exercise multi-part paths with small objects. Returns the
  // previous values, to restore.
  m.def(
      "_set_remote_part_sizes",
      [](uint64_t part_size, uint64_t upload_part_size) {
        io::RemoteOptions o = io::GetRemoteOptions();
        nb::tuple old = nb::make_tuple(o.part_size, o.upload_part_size);
        o.part_size = part_size;
        o.upload_part_size = upload_part_size;
        io::SetRemoteOptions(o);
        return old;
      },
      "part_size"_a, "upload_part_size"_a);
  // Tests: fixes the part size (no autotuning above part_size). Returns the previous value.
  m.def(
      "_set_remote_part_size_max",
      [](uint64_t part_size_max) {
        io::RemoteOptions o = io::GetRemoteOptions();
        const uint64_t old = o.part_size_max;
        o.part_size_max = part_size_max;
        io::SetRemoteOptions(o);
        return old;
      },
      "part_size_max"_a);
  m.def(
      "set_shard_cache",
      [](std::string dir, uint64_t max_bytes) {
        ThrowIfError(io::SetShardCache({std::move(dir), max_bytes}));
      },
      "dir"_a, "max_bytes"_a,
      "Process-wide local cache of whole remote shards (io/shard_cache.h); empty dir: off.");
  m.def("configure_shard_cache", &ConfigureShardCache, "cache_dir"_a.none(), "cache_size"_a.none(),
        "Sets the process-wide shard cache's folder and/or size (int bytes or '20G'); None "
        "keeps the current value.");
  m.def("shard_cache", [] {
    io::ShardCacheOptions o = io::GetShardCache();
    return nb::make_tuple(o.dir, o.max_bytes);
  });
  m.def(
      "parse_byte_size",
      [](const std::string& text) { return ValueOrThrow(io::ParseByteSize(text)); }, "text"_a);
  m.def("shard_cache_stats", [] {
    io::ShardCacheStats s = io::GetShardCacheStats();
    nb::dict d;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["bytes_fetched"] = s.bytes_fetched;
    d["evictions"] = s.evictions;
    d["invalidated"] = s.invalidated;
    d["bypassed"] = s.bypassed;
    return d;
  });
}

}  // namespace recordflow::python
