// Remote storage hooks for Python: which paths are URLs, and credentials from botocore.
// (Globs, local or remote, go through the one expansion: expand_globs in pipeline.cc.)
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "errors.h"
#include "recordflow/io/filesystem.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {

void RegisterFsspecBridge(nb::module_& m);  // fsspec_bridge.cc

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
}

}  // namespace recordflow::python
