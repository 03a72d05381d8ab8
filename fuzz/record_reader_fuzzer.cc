// Fuzzes the record framing reader over plain, GZIP and ZLIB input with both corruption
// policies. The first input byte picks the mode; the rest is the file.
#include <cstddef>
#include <cstdint>
#include <span>

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
  auto reader =
      RecordReader::FromStream(NewMemoryInputStream(file, compression), options, compression);
  std::span<const std::byte> record;
  uint64_t total = 0;
  for (int i = 0; i < 100000; ++i) {
    auto more = reader->ReadRecord(&record);
    if (!more.ok() || !*more) break;
    for (std::byte b : record) total += static_cast<uint8_t>(b);  // touch every byte
  }
  // Index text parsing shares this target: the same bytes as an index file.
  auto parsed = ParseIndex(
      std::string_view(reinterpret_cast<const char*>(file.data()), file.size()), "fuzz.idx");
  (void)parsed;
  return static_cast<int>(total & 0);
}
