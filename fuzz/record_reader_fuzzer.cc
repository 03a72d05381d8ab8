// Fuzzes the record framing reader over plain, GZIP and ZLIB input with both corruption
// policies, and its two read paths against each other (views into the buffer, and copies into
// a string that large payloads reach without the buffer). The first input byte picks the mode;
// the rest is the file.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "recordflow/format/record_index.h"
#include "recordflow/format/record_reader.h"

using namespace recordflow::format;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  Compression compression = mode % 3 == 0   ? Compression::kNone
                            : mode % 3 == 1 ? Compression::kGzip
                                            : Compression::kZlib;
  RecordReaderOptions options;
  options.on_corruption = (mode & 4) ? CorruptionPolicy::kSkip : CorruptionPolicy::kRaise;
  options.verify_checksums = (mode & 8) == 0;
  options.buffer_size = (mode & 16) ? 4096 : 1 << 16;
  options.max_record_size = 1 << 24;
  // Bit 5 picks the direct-read threshold of ReadRecord(std::string*): every payload, or
  // the default (rarely reached by small inputs). The string path must see what the buffered
  // span path sees: the same records, the same error, the same skips.
  options.direct_read_bytes = (mode & 32) ? 1 : options.direct_read_bytes;
  auto reader =
      RecordReader::FromStream(NewMemoryInputStream(file, compression), options, compression);
  auto into =
      RecordReader::FromStream(NewMemoryInputStream(file, compression), options, compression);
  std::span<const std::byte> record;
  std::string copy;
  uint64_t total = 0;
  for (int i = 0; i < 100000; ++i) {
    auto more = reader->ReadRecord(&record);
    auto more_into = into->ReadRecord(&copy);
    if (more.ok() != more_into.ok()) __builtin_trap();
    if (!more.ok()) {
      if (more.status().ToString() != more_into.status().ToString()) __builtin_trap();
      break;
    }
    if (*more != *more_into) __builtin_trap();
    if (!*more) break;
    if (copy.size() != record.size() ||
        (!record.empty() && std::memcmp(copy.data(), record.data(), record.size()) != 0) ||
        reader->offset() != into->offset() || reader->records_read() != into->records_read()) {
      __builtin_trap();
    }
    for (std::byte b : record) total += static_cast<uint8_t>(b);  // touch every byte
  }
  if (reader->corruption_stats().records_skipped != into->corruption_stats().records_skipped ||
      reader->corruption_stats().bytes_skipped != into->corruption_stats().bytes_skipped) {
    __builtin_trap();
  }
  // Index text parsing shares this target: the same bytes as an index file.
  auto parsed = ParseIndex(
      std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), "fuzz.idx");
  (void)parsed;
  return static_cast<int>(total & 0);
}
