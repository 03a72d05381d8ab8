// Byte streams under the record framing: plain files and GZIP / ZLIB streams.
//
// I/O composes as layers: file -> (decompression) -> record framing. Each layer here is an
// InputStream or OutputStream and can be tested alone.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "recordflow/core/status.h"
#include "recordflow/io/file.h"

namespace recordflow::format {

enum class Compression { kNone, kGzip, kZlib };

// Parses TensorFlow's names: "" or "NONE" -> kNone, "GZIP", "ZLIB"; case-insensitive.
// Errors: kInvalidArgument for anything else.
Result<Compression> ParseCompression(std::string_view name);
// "" (none), "GZIP" or "ZLIB", as TensorFlow spells them.
std::string_view CompressionName(Compression compression);
// The compression a file name implies: ".gz"/".gzip" -> kGzip, ".zz"/".zlib" -> kZlib, else kNone.
Compression CompressionFromPath(std::string_view path);

// A source of bytes read front to back.
//
// Thread safety: thread-compatible.
class InputStream {
 public:
  virtual ~InputStream() = default;
  // Fills as much of `dst` as it can; returns the count, 0 only at end of stream.
  // Errors: kIOError; kDataLoss for corrupt or truncated compressed data.
  virtual Result<size_t> Read(std::span<std::byte> dst) = 0;
  // Moves `n` bytes forward without returning them; returns how many it skipped (fewer only at
  // the end of the stream). Plain files seek; compressed streams decompress and discard.
  virtual Result<uint64_t> Skip(uint64_t n);
  // Bytes left to read when known without reading (plain files), for sanity checks on lengths.
  virtual std::optional<uint64_t> remaining() const { return std::nullopt; }
  // Human-readable description of where the bytes come from, for messages.
  virtual const std::string& name() const = 0;
  // Bytes of memory this stream holds for its own buffers and state (a decompressor's input
  // buffer, window and state); 0 for streams that read straight into the caller's buffer.
  virtual size_t buffer_bytes() const { return 0; }
};

// A sink of bytes that becomes visible under its final name only on Close().
//
// Thread safety: thread-compatible.
// Lifetime: destroying an unclosed stream discards what was written.
class OutputStream {
 public:
  virtual ~OutputStream() = default;
  // Errors: kResourceExhausted (disk full), kIOError, kFailedPrecondition after Close.
  virtual Status Write(std::span<const std::byte> data) = 0;
  // Pushes buffered and compressed bytes to the OS (a GZIP/ZLIB stream is sync-flushed).
  virtual Status Flush() = 0;
  // Finishes the stream and commits the file under its final name.
  virtual Status Close() = 0;
  // Discards everything; the final name is never created.
  virtual void Abort() = 0;
  // After Close() with OutputStreamOptions::file.defer_completion: the open upload holding
  // the stream's bytes (io::AtomicFileWriter::pending_upload). nullopt otherwise.
  virtual std::optional<io::PendingUpload> pending_upload() const { return std::nullopt; }
};

// Default for InputStreamOptions::max_decompressed_bytes: 1 TiB per compressed file.
inline constexpr uint64_t kDefaultMaxDecompressedBytes = uint64_t{1} << 40;

// Which DEFLATE decoder reads GZIP/ZLIB streams. Both give identical bytes and errors of the
// same codes; ISA-L's igzip is several times faster where it is compiled in.
enum class Inflater { kAuto, kZlib, kIsal };

// True when this binary was built with ISA-L's igzip inflater.
bool IsalInflaterAvailable();

struct InputStreamOptions {
  // Size of each read from the file (compressed bytes, for GZIP/ZLIB).
  size_t read_size = 1 << 20;
  // kAuto: ISA-L when available, else zlib. kIsal without ISA-L is kUnimplemented.
  Inflater inflater = Inflater::kAuto;
  // Safety limit against decompression bombs: a GZIP/ZLIB stream that inflates to more than
  // this many bytes fails with kResourceExhausted (naming the file and the limit) instead of
  // streaming on. DEFLATE expands up to ~1032:1, so a 1 GiB file can carry ~1 TiB. Ignored for
  // uncompressed files (their size is their size).
  uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes;
};

// Opens `path` for sequential reading, decompressing as `compression` says.
Result<std::unique_ptr<InputStream>> OpenInputStream(const std::string& path,
                                                     Compression compression,
                                                     InputStreamOptions options = {});

// Wraps an in-memory buffer (tests, fuzzers). `data` must outlive the stream.
std::unique_ptr<InputStream> NewMemoryInputStream(
    std::span<const std::byte> data, Compression compression, std::string name = "<memory>",
    Inflater inflater = Inflater::kAuto,
    uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes);

struct OutputStreamOptions {
  // zlib level: -1 is zlib's default (6), 0 stores, 9 is smallest.
  int compression_level = -1;
  io::AtomicFileOptions file;
};

// Creates `path` (atomically, see io::AtomicFileWriter) writing `compression`.
Result<std::unique_ptr<OutputStream>> CreateOutputStream(const std::string& path,
                                                         Compression compression,
                                                         OutputStreamOptions options = {});

}  // namespace recordflow::format
