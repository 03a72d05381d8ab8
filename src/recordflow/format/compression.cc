#include "recordflow/format/compression.h"

#include <zlib.h>

#if defined(RF_HAVE_ISAL)
#include <isa-l/igzip_lib.h>
#endif

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <vector>

#include "recordflow/core/enum_names.h"

namespace recordflow::format {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Result<uint64_t> InputStream::Skip(uint64_t n) {
  std::vector<std::byte> scratch(std::min<uint64_t>(n, 1 << 20));
  uint64_t done = 0;
  while (done < n) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n - done, scratch.size()));
    RF_ASSIGN_OR_RETURN(size_t got, Read(std::span(scratch.data(), want)));
    if (got == 0) break;
    done += got;
  }
  return done;
}

namespace {

class FileInputStream final : public InputStream {
 public:
  explicit FileInputStream(std::unique_ptr<io::RandomAccessFile> file)
      : file_(std::move(file)), name_(file_->path()) {
    file_->AdviseSequential();
  }
  size_t buffer_bytes() const override { return file_->buffered_bytes(); }
  // Reads only up to the size the file had at open: a reader sees a snapshot of a file that
  // another process appends to, instead of a record half written past the size it checks
  // lengths against (which would look like truncation). A file that shrinks while it is read
  // is kDataLoss: ending early at a record boundary would otherwise look like a clean end.
  Result<size_t> Read(std::span<std::byte> dst) override {
    const uint64_t left = file_->size() > offset_ ? file_->size() - offset_ : 0;
    if (dst.size() > left) dst = dst.first(static_cast<size_t>(left));
    RF_ASSIGN_OR_RETURN(size_t n, file_->ReadAt(offset_, dst));
    offset_ += n;
    // Short: the file shrank. The bytes read go out first; the next call reads none and fails.
    if (n < dst.size() && n == 0) {
      return DataLossError("'" + name_ + "' ends at byte " + std::to_string(offset_) + " but was " +
                           std::to_string(file_->size()) +
                           " bytes when opened (truncated while being read?)");
    }
    return n;
  }
  Result<uint64_t> Skip(uint64_t n) override {
    const uint64_t left = file_->size() > offset_ ? file_->size() - offset_ : 0;
    const uint64_t done = std::min(n, left);
    offset_ += done;
    return done;
  }
  std::optional<uint64_t> remaining() const override {
    return file_->size() > offset_ ? file_->size() - offset_ : 0;
  }
  const std::string& name() const override { return name_; }

 private:
  std::unique_ptr<io::RandomAccessFile> file_;
  std::string name_;
  uint64_t offset_ = 0;
};

class MemoryInputStream final : public InputStream {
 public:
  MemoryInputStream(std::span<const std::byte> data, std::string name)
      : data_(data), name_(std::move(name)) {}
  Result<size_t> Read(std::span<std::byte> dst) override {
    size_t n = std::min(dst.size(), data_.size() - offset_);
    if (n > 0) std::memcpy(dst.data(), data_.data() + offset_, n);
    offset_ += n;
    return n;
  }
  std::optional<uint64_t> remaining() const override { return data_.size() - offset_; }
  const std::string& name() const override { return name_; }

 private:
  std::span<const std::byte> data_;
  std::string name_;
  size_t offset_ = 0;
};

Status CorruptStreamError(Compression c, const std::string& name, uint64_t at,
                          const std::string& why) {
  std::string kind(CompressionName(c));
  return DataLossError(kind + " data corrupt in '" + name + "' near compressed byte offset " +
                       std::to_string(at) + ": " + why +
                       (at < 16 ? " (is this file really " + kind + "-compressed?)" : ""));
}

Status TruncatedStreamError(Compression c, const std::string& name, uint64_t compressed) {
  return DataLossError(std::string(CompressionName(c)) + " stream in '" + name +
                       "' ends early after " + std::to_string(compressed) +
                       " compressed bytes (truncated file?)");
}

// A ZLIB file holds one stream; TensorFlow reads up to its end and ignores what follows, which
// would hide damage (a second stream, padding, garbage), so it is reported after the records.
Status TrailingDataError(const std::string& name, uint64_t at) {
  return DataLossError("ZLIB stream in '" + name + "' ends at compressed byte offset " +
                       std::to_string(at) +
                       " but the file goes on: a ZLIB file holds one stream (the records before "
                       "this point were read; TensorFlow ignores the bytes after it)");
}

int WindowBits(Compression c) { return c == Compression::kGzip ? MAX_WBITS + 16 : MAX_WBITS; }

// Inflates a GZIP or ZLIB stream (several concatenated GZIP members are read as one).
class ZlibInputStream final : public InputStream {
 public:
  ZlibInputStream(std::unique_ptr<InputStream> source, Compression compression, size_t read_size)
      : source_(std::move(source)),
        compression_(compression),
        in_(std::max<size_t>(read_size, 4096)) {
    std::memset(&z_, 0, sizeof(z_));
    init_rc_ = inflateInit2(&z_, WindowBits(compression));
  }
  ~ZlibInputStream() override {
    if (init_rc_ == Z_OK) inflateEnd(&z_);
  }

  Result<size_t> Read(std::span<std::byte> dst) override {
    if (init_rc_ != Z_OK) return InternalError("zlib inflateInit2 failed for '" + name() + "'");
    if (!error_.ok()) return error_;
    Result<size_t> got = Inflate(dst);
    if (got.ok()) return got;
    // The bytes inflated before the damage go out first (they may hold whole records); the
    // error comes with the next call.
    error_ = got.status();
    const size_t produced = want_ - z_.avail_out;
    if (produced > 0) return produced;
    return error_;
  }
  const std::string& name() const override { return source_->name(); }
  // The input buffer plus zlib's own allocations: its inflate state (about 7 KiB) and the
  // sliding window (32 KiB for the 15 window bits TFRecord writers use).
  size_t buffer_bytes() const override {
    return in_.capacity() + kZlibStateBytes + source_->buffer_bytes();
  }

 private:
  static constexpr size_t kZlibStateBytes = (7 + 32) * 1024;

  Result<size_t> Inflate(std::span<std::byte> dst) {
    z_.next_out = reinterpret_cast<Bytef*>(dst.data());
    // zlib counts in uInt; large reads are split over calls.
    const size_t want = std::min<size_t>(dst.size(), 1u << 30);
    want_ = want;
    z_.avail_out = static_cast<uInt>(want);
    while (z_.avail_out > 0) {
      if (z_.avail_in == 0 && !source_eof_) {
        RF_ASSIGN_OR_RETURN(size_t n, source_->Read(in_));
        if (n == 0) {
          source_eof_ = true;
        } else {
          z_.next_in = reinterpret_cast<Bytef*>(in_.data());
          z_.avail_in = static_cast<uInt>(n);
          compressed_read_ += n;
        }
      }
      if (stream_end_) {
        if (z_.avail_in == 0) {
          if (source_eof_) break;
          continue;
        }
        if (compression_ == Compression::kZlib)
          return TrailingZlibData(compressed_read_ - z_.avail_in);
        // Another GZIP member follows (as `cat a.gz b.gz` makes).
        inflateReset(&z_);
        stream_end_ = false;
      }
      const uInt in_before = z_.avail_in;
      const uInt out_before = z_.avail_out;
      int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        stream_end_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return Corrupt(z_.msg ? z_.msg : "inflate error");
      } else if (z_.avail_in == in_before && z_.avail_out == out_before) {
        // No progress: zlib needs more input. At the end of the file that is truncation.
        if (in_before > 0) return InternalError("zlib made no progress in '" + name() + "'");
        if (!source_eof_) continue;
        if (want - z_.avail_out > 0) break;
        if (compressed_read_ == 0) return size_t{0};  // a zero-byte file holds no records
        return Truncated();
      }
    }
    return want - z_.avail_out;
  }

  Status Corrupt(const std::string& why) {
    return CorruptStreamError(compression_, name(), compressed_read_ - z_.avail_in, why);
  }
  Status Truncated() { return TruncatedStreamError(compression_, name(), compressed_read_); }
  Status TrailingZlibData(uint64_t at) { return TrailingDataError(name(), at); }

  std::unique_ptr<InputStream> source_;
  Compression compression_;
  std::vector<std::byte> in_;
  z_stream z_;
  int init_rc_;
  bool source_eof_ = false;
  bool stream_end_ = false;
  uint64_t compressed_read_ = 0;
  size_t want_ = 0;  // output bytes asked of the current Inflate call
  Status error_;
};

#if defined(RF_HAVE_ISAL)
// Inflates a GZIP or ZLIB stream with ISA-L's igzip; same contract as ZlibInputStream.
class IsalInputStream final : public InputStream {
 public:
  IsalInputStream(std::unique_ptr<InputStream> source, Compression compression, size_t read_size)
      : source_(std::move(source)),
        compression_(compression),
        in_(std::max<size_t>(read_size, 4096)),
        state_(std::make_unique<inflate_state>()) {
    Reset();
  }

  Result<size_t> Read(std::span<std::byte> dst) override {
    if (!error_.ok()) return error_;
    Result<size_t> got = Inflate(dst);
    if (got.ok()) return got;
    // As ZlibInputStream: the bytes before the damage first, the error next.
    error_ = got.status();
    const size_t produced = want_ - state_->avail_out;
    if (produced > 0) return produced;
    return error_;
  }

 private:
  Result<size_t> Inflate(std::span<std::byte> dst) {
    inflate_state& st = *state_;
    const size_t want = std::min<size_t>(dst.size(), 1u << 30);
    want_ = want;
    st.next_out = reinterpret_cast<uint8_t*>(dst.data());
    st.avail_out = static_cast<uint32_t>(want);
    while (st.avail_out > 0) {
      if (st.avail_in == 0 && !source_eof_) {
        RF_ASSIGN_OR_RETURN(size_t n, source_->Read(in_));
        if (n == 0) {
          source_eof_ = true;
        } else {
          st.next_in = reinterpret_cast<uint8_t*>(in_.data());
          st.avail_in = static_cast<uint32_t>(n);
          compressed_read_ += n;
        }
      }
      if (st.block_state == ISAL_BLOCK_FINISH) {
        if (st.avail_in == 0) {
          if (source_eof_) break;
          continue;
        }
        if (compression_ == Compression::kZlib) {
          // igzip may hold some of the following bytes in its bit buffer (read_in).
          const uint64_t buffered = static_cast<uint64_t>(std::max(st.read_in_length, 0)) / 8;
          return TrailingDataError(name(), compressed_read_ - st.avail_in - buffered);
        }
        Reset();  // another GZIP member follows
      }
      const uint32_t in_before = st.avail_in;
      const uint32_t out_before = st.avail_out;
      int rc = isal_inflate(&st);
      if (rc < 0) {
        return CorruptStreamError(compression_, name(), compressed_read_ - st.avail_in,
                                  IsalError(rc));
      }
      if (st.block_state != ISAL_BLOCK_FINISH && st.avail_in == in_before &&
          st.avail_out == out_before) {
        if (in_before > 0) return InternalError("igzip made no progress in '" + name() + "'");
        if (!source_eof_) continue;
        if (want - st.avail_out > 0) break;
        if (compressed_read_ == 0) return size_t{0};
        return TruncatedStreamError(compression_, name(), compressed_read_);
      }
    }
    return want - st.avail_out;
  }

 public:
  const std::string& name() const override { return source_->name(); }
  size_t buffer_bytes() const override {
    return in_.capacity() + sizeof(inflate_state) + source_->buffer_bytes();
  }

 private:
  void Reset() {
    // Keeps the caller's input and output positions across the reset.
    inflate_state& st = *state_;
    uint8_t* next_in = st.next_in;
    uint32_t avail_in = st.avail_in;
    uint8_t* next_out = st.next_out;
    uint32_t avail_out = st.avail_out;
    std::memset(&st, 0, sizeof(inflate_state));
    isal_inflate_init(&st);
    st.crc_flag = compression_ == Compression::kGzip ? ISAL_GZIP : ISAL_ZLIB;
    st.next_in = next_in;
    st.avail_in = avail_in;
    st.next_out = next_out;
    st.avail_out = avail_out;
  }
  static std::string IsalError(int rc) {
    switch (rc) {
      case ISAL_INVALID_BLOCK:
        return "invalid deflate block";
      case ISAL_INVALID_SYMBOL:
        return "invalid deflate symbol";
      case ISAL_INVALID_LOOKBACK:
        return "invalid lookback distance";
      case ISAL_INVALID_WRAPPER:
        return "invalid gzip/zlib header";
      case ISAL_UNSUPPORTED_METHOD:
        return "unsupported compression method";
      case ISAL_INCORRECT_CHECKSUM:
        return "checksum mismatch";
      default:
        return "igzip error " + std::to_string(rc);
    }
  }

  std::unique_ptr<InputStream> source_;
  Compression compression_;
  std::vector<std::byte> in_;
  std::unique_ptr<inflate_state> state_;
  bool source_eof_ = false;
  uint64_t compressed_read_ = 0;
  size_t want_ = 0;  // output bytes asked of the current Inflate call
  Status error_;
};
#endif

// Caps the bytes an inflater may produce (decompression bombs). Asks the inflater for at most
// one byte past the limit, so crossing it costs no more than the limit itself.
class OutputLimitInputStream final : public InputStream {
 public:
  OutputLimitInputStream(std::unique_ptr<InputStream> source, uint64_t limit)
      : source_(std::move(source)), limit_(limit) {}

  Result<size_t> Read(std::span<std::byte> dst) override {
    if (!error_.ok()) return error_;
    const uint64_t room = limit_ - produced_;  // produced_ <= limit_ until the error
    const size_t want = static_cast<size_t>(std::min<uint64_t>(dst.size(), room + 1));
    RF_ASSIGN_OR_RETURN(size_t n, source_->Read(dst.first(want)));
    produced_ += n;
    if (produced_ > limit_) {
      error_ = ResourceExhaustedError("'" + name() + "' inflates to more than " +
                                      std::to_string(limit_) +
                                      " bytes (max_decompressed_bytes limit; a decompression "
                                      "bomb?)");
      return error_;
    }
    return n;
  }
  const std::string& name() const override { return source_->name(); }
  size_t buffer_bytes() const override { return source_->buffer_bytes(); }

 private:
  std::unique_ptr<InputStream> source_;
  uint64_t limit_;
  uint64_t produced_ = 0;
  Status error_;
};

Result<std::unique_ptr<InputStream>> NewInflater(std::unique_ptr<InputStream> raw,
                                                 Compression compression, size_t read_size,
                                                 Inflater inflater,
                                                 uint64_t max_decompressed_bytes) {
  std::unique_ptr<InputStream> stream;
#if defined(RF_HAVE_ISAL)
  if (inflater != Inflater::kZlib) {
    stream = std::make_unique<IsalInputStream>(std::move(raw), compression, read_size);
  }
#else
  if (inflater == Inflater::kIsal) {
    return UnimplementedError("this build of recordflow has no ISA-L inflater");
  }
#endif
  if (!stream) stream = std::make_unique<ZlibInputStream>(std::move(raw), compression, read_size);
  return std::unique_ptr<InputStream>(
      std::make_unique<OutputLimitInputStream>(std::move(stream), max_decompressed_bytes));
}

class RawOutputStream final : public OutputStream {
 public:
  explicit RawOutputStream(std::unique_ptr<io::AtomicFileWriter> file) : file_(std::move(file)) {}
  Status Write(std::span<const std::byte> data) override { return file_->Append(data); }
  Status Flush() override { return Status::OK(); }  // Write is unbuffered.
  Status Close() override { return file_->Commit(); }
  void Abort() override { file_->Abort(); }
  std::optional<io::PendingUpload> pending_upload() const override {
    return file_->pending_upload();
  }

 private:
  std::unique_ptr<io::AtomicFileWriter> file_;
};

class ZlibOutputStream final : public OutputStream {
 public:
  ZlibOutputStream(std::unique_ptr<io::AtomicFileWriter> file, Compression compression, int level)
      : file_(std::move(file)), out_(256 * 1024) {
    std::memset(&z_, 0, sizeof(z_));
    // memLevel 9, as TensorFlow's ZlibCompressionOptions: same bytes as TF's writer.
    init_rc_ = deflateInit2(&z_, level, Z_DEFLATED, WindowBits(compression), 9, Z_DEFAULT_STRATEGY);
  }
  ~ZlibOutputStream() override {
    if (init_rc_ == Z_OK) deflateEnd(&z_);
  }
  Status Init() const {
    if (init_rc_ != Z_OK) {
      return InvalidArgumentError("zlib deflateInit2 failed (bad compression level?) for '" +
                                  file_->path() + "'");
    }
    return Status::OK();
  }
  Status Write(std::span<const std::byte> data) override {
    while (!data.empty()) {
      size_t chunk = std::min<size_t>(data.size(), 1u << 30);
      z_.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(data.data()));
      z_.avail_in = static_cast<uInt>(chunk);
      RF_RETURN_IF_ERROR(Deflate(Z_NO_FLUSH));
      data = data.subspan(chunk);
    }
    return Status::OK();
  }
  Status Flush() override { return Deflate(Z_SYNC_FLUSH); }
  Status Close() override {
    RF_RETURN_IF_ERROR(Deflate(Z_FINISH));
    return file_->Commit();
  }
  void Abort() override { file_->Abort(); }
  std::optional<io::PendingUpload> pending_upload() const override {
    return file_->pending_upload();
  }

 private:
  Status Deflate(int flush) {
    while (true) {
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      int rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR)
        return InternalError("zlib deflate failed for '" + file_->path() + "'");
      size_t produced = out_.size() - z_.avail_out;
      if (produced > 0) RF_RETURN_IF_ERROR(file_->Append(std::span(out_.data(), produced)));
      if (flush == Z_FINISH ? rc == Z_STREAM_END : (z_.avail_in == 0 && z_.avail_out != 0)) {
        return Status::OK();
      }
    }
  }

  std::unique_ptr<io::AtomicFileWriter> file_;
  std::vector<std::byte> out_;
  z_stream z_;
  int init_rc_;
};

}  // namespace

// kNone's name is "" (TensorFlow's compression_type for no compression); ParseCompression also
// takes "NONE" and any letter case.
constexpr EnumName<Compression> kCompressionNames[] = {
    {Compression::kNone, ""},
    {Compression::kGzip, "GZIP"},
    {Compression::kZlib, "ZLIB"},
    {Compression::kNone, "NONE"},
};

Result<Compression> ParseCompression(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (std::optional<Compression> compression = FindByName(kCompressionNames, upper)) {
    return *compression;
  }
  return InvalidArgumentError("unknown compression '" + std::string(name) +
                              "': expected \"\" or \"NONE\", \"GZIP\" or \"ZLIB\"");
}

std::string_view CompressionName(Compression compression) {
  return NameOf(kCompressionNames, compression);
}

Compression CompressionFromPath(std::string_view path) {
  if (EndsWith(path, ".gz") || EndsWith(path, ".gzip")) return Compression::kGzip;
  if (EndsWith(path, ".zz") || EndsWith(path, ".zlib")) return Compression::kZlib;
  return Compression::kNone;
}

Result<std::unique_ptr<InputStream>> OpenInputStream(const std::string& path,
                                                     Compression compression,
                                                     InputStreamOptions options) {
  RF_ASSIGN_OR_RETURN(auto file, io::RandomAccessFile::Open(path));
  std::unique_ptr<InputStream> raw = std::make_unique<FileInputStream>(std::move(file));
  if (compression == Compression::kNone) return raw;
  return NewInflater(std::move(raw), compression, options.read_size, options.inflater,
                     options.max_decompressed_bytes);
}

std::unique_ptr<InputStream> NewMemoryInputStream(std::span<const std::byte> data,
                                                  Compression compression, std::string name,
                                                  Inflater inflater,
                                                  uint64_t max_decompressed_bytes) {
  std::unique_ptr<InputStream> raw = std::make_unique<MemoryInputStream>(data, std::move(name));
  if (compression == Compression::kNone) return raw;
  if (inflater == Inflater::kIsal && !IsalInflaterAvailable()) inflater = Inflater::kZlib;
  return NewInflater(std::move(raw), compression, 64 * 1024, inflater, max_decompressed_bytes)
      .value();
}

bool IsalInflaterAvailable() {
#if defined(RF_HAVE_ISAL)
  return true;
#else
  return false;
#endif
}

Result<std::unique_ptr<OutputStream>> CreateOutputStream(const std::string& path,
                                                         Compression compression,
                                                         OutputStreamOptions options) {
  if (options.compression_level < -1 || options.compression_level > 9) {
    return InvalidArgumentError("compression level must be -1..9, got " +
                                std::to_string(options.compression_level));
  }
  RF_ASSIGN_OR_RETURN(auto file, io::AtomicFileWriter::Create(path, options.file));
  if (compression == Compression::kNone) {
    return std::unique_ptr<OutputStream>(std::make_unique<RawOutputStream>(std::move(file)));
  }
  auto stream =
      std::make_unique<ZlibOutputStream>(std::move(file), compression, options.compression_level);
  RF_RETURN_IF_ERROR(stream->Init());
  return std::unique_ptr<OutputStream>(std::move(stream));
}

}  // namespace recordflow::format
