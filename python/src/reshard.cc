// Binding of convert::Reshard: `_core.reshard(files, dst, options)`. The keyword signature and
// its documentation live in python/recordflow/reshard.py; the summary goes back as JSON text.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "errors.h"
#include "recordflow/convert/reshard.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {
namespace {

Result<format::Compression> CompressionArg(const std::string& name, const char* what) {
  Result<format::Compression> c = format::ParseCompression(name.empty() ? "NONE" : name);
  if (!c.ok()) return InvalidArgumentError(std::string(what) + ": " + c.status().message());
  return c;
}

std::string Reshard(const std::vector<std::string>& files, const std::string& dst, int shards,
                    bool shuffle, uint64_t seed, const std::string& compression,
                    nb::object input_compression, const std::string& prefix, bool index,
                    bool resume, bool sync) {
  convert::ReshardOptions o;
  o.num_shards = shards;
  o.shuffle = shuffle;
  o.seed = seed;
  o.compression = ValueOrThrow(CompressionArg(compression, "compression"));
  if (!input_compression.is_none()) {
    o.input_compression =
        ValueOrThrow(CompressionArg(nb::cast<std::string>(input_compression), "input_compression"));
  }
  o.prefix = prefix;
  o.write_index = index;
  o.resume = resume;
  o.sync = sync;
  return ValueOrThrow(WithoutGil([&] { return convert::Reshard(files, dst, o); })).ToJson();
}

}  // namespace

void RegisterReshard(nb::module_& m) {
  m.def("reshard", &Reshard, "files"_a, "dst"_a, "shards"_a, "shuffle"_a, "seed"_a, "compression"_a,
        "input_compression"_a.none(), "prefix"_a, "index"_a, "resume"_a, "sync"_a);
}

}  // namespace recordflow::python
