// Fuzzes the convert manifests: the JSON parser on the whole input, then ReadManifest on the
// input saved as a CSV and as a JSONL file (ReadManifest reads a path, so the bytes go through
// a per-process scratch file). Manifests are untrusted text: any input must give a listing or
// an error, never a crash, and every listed item must carry a non-empty file name.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "recordflow/convert/json_internal.h"
#include "recordflow/convert/plan.h"

namespace {

// Never destroyed, so that the exit handler that removes the folder can still name it.
const std::string& ScratchDir() {
  static const std::string* dir = [] {
    // tmpfs when there is one: every input is written once as CSV and once as JSONL.
    const char* base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    auto* d =
        new std::string(std::string(base) + "/rf_manifest_fuzz_" + std::to_string(::getpid()));
    ::mkdir(d->c_str(), 0700);
    std::atexit([] {
      const std::string& folder = ScratchDir();
      for (const char* name : {"/m.csv", "/m.jsonl"}) ::unlink((folder + name).c_str());
      ::rmdir(folder.c_str());
    });
    return d;
  }();
  return *dir;
}

void ReadAs(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = ScratchDir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  if (size > 0) std::fwrite(data, 1, size, f);  // data may be null when size is 0
  std::fclose(f);
  recordflow::convert::ConvertOptions options;
  auto listing = recordflow::convert::ReadManifest(path, options);
  if (!listing.ok()) return;
  for (const auto& item : listing->items) {
    if (item.filename.empty()) __builtin_trap();
    for (int64_t label : item.labels) {
      if (listing->named_classes &&
          (label < 0 || static_cast<size_t>(label) >= listing->class_names.size())) {
        __builtin_trap();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)recordflow::convert::internal::ParseJson(
      std::string_view(reinterpret_cast<const char*>(data), size));
  ReadAs("m.csv", data, size);
  ReadAs("m.jsonl", data, size);
  return 0;
}
