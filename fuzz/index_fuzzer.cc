// Fuzzes index files (`offset size` lines, DALI's tfrecord2idx format): parsing, then random
// access through the parsed entries into a small valid TFRecord file written once. A read that
// succeeds must return the true payload of a true record: a wrong index is an error, never
// wrong bytes.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/format/record_index.h"
#include "recordflow/format/record_writer.h"

using namespace recordflow::format;

namespace {

// Payload sizes 1, 0, 100, 1000, 3: framed sizes 17, 16, 116, 1016, 19 at offsets 0, 17, 33,
// 149, 1165 (the seeds in fuzz/corpus/index use these).
struct Fixture {
  std::string path;
  std::map<uint64_t, std::vector<std::byte>> payload_at;  // header offset -> payload
};

const Fixture& TheFile() {
  static const Fixture* fixture = [] {
    auto* f = new Fixture;
    const char* dir = std::getenv("TMPDIR");
    f->path = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/rf_index_fuzz_" +
              std::to_string(getpid()) + ".tfrecord";
    auto writer = RecordWriter::Open(f->path);
    if (!writer.ok()) std::abort();
    uint64_t offset = 0;
    for (size_t n : {1, 0, 100, 1000, 3}) {
      std::vector<std::byte> payload(n);
      for (size_t i = 0; i < n; ++i) payload[i] = static_cast<std::byte>((i * 7 + n) % 251);
      if (!(*writer)->WriteRecord(payload).ok()) std::abort();
      f->payload_at[offset] = payload;
      offset += 16 + n;
    }
    if (!(*writer)->Close().ok()) std::abort();
    std::atexit([] { std::remove(TheFile().path.c_str()); });
    return f;
  }();
  return *fixture;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& file = TheFile();
  auto entries =
      ParseIndex(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.idx");
  if (!entries.ok() || entries->size() > 4096) return 0;
  auto reader = IndexedRecordReader::Open(file.path, *entries);
  if (!reader.ok()) return 0;
  std::vector<std::byte> scratch;
  for (uint64_t i = 0; i <= (*reader)->size(); ++i) {  // one past the end: kOutOfRange
    auto record = (*reader)->ReadRecord(i, &scratch);
    if (!record.ok()) continue;
    if (i >= (*reader)->size()) std::abort();  // read past the last entry succeeded
    auto truth = file.payload_at.find((*entries)[i].offset);
    if (truth == file.payload_at.end() || truth->second.size() != record->size() ||
        (!record->empty() &&
         std::memcmp(truth->second.data(), record->data(), record->size()) != 0)) {
      std::abort();  // wrong bytes for a wrong index
    }
  }
  return 0;
}
