#include "recordflow/format/record_reader.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>

#include "recordflow/core/enum_names.h"
#include "recordflow/core/thread_pool.h"
#include "recordflow/format/record_format.h"

namespace recordflow::format {
namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08" PRIx32, v);
  return buf;
}

}  // namespace

namespace {

constexpr EnumName<CorruptionPolicy> kCorruptionPolicyNames[] = {
    {CorruptionPolicy::kRaise, "raise"},
    {CorruptionPolicy::kSkip, "skip"},
};

}  // namespace

Result<CorruptionPolicy> ParseCorruptionPolicy(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (std::optional<CorruptionPolicy> policy = FindByName(kCorruptionPolicyNames, lower)) {
    return *policy;
  }
  return InvalidArgumentError("unknown corruption policy '" + std::string(name) + "': expected " +
                              NameList(kCorruptionPolicyNames, "\""));
}

RecordReader::RecordReader(std::unique_ptr<InputStream> stream, RecordReaderOptions options,
                           Compression compression)
    : stream_(std::move(stream)),
      options_(options),
      compression_(compression),
      compressed_(compression != Compression::kNone) {
  options_.buffer_size = std::max<size_t>(options_.buffer_size, 4096);
  options_.max_record_size = std::min<uint64_t>(options_.max_record_size, kMaxRecordSizeLimit);
  // A file smaller than the buffer gets a buffer its size (plus room to see the end in the same
  // read): many small shards open at once then hold what they need, not 1 MiB each.
  size_t initial = options_.buffer_size;
  if (std::optional<uint64_t> left = stream_->remaining(); left.has_value() && *left < initial) {
    initial = std::max<size_t>(static_cast<size_t>(*left) + 1, 4096);
  }
  buffer_.resize(initial);
}

RecordReader::~RecordReader() = default;

Result<std::unique_ptr<RecordReader>> RecordReader::Open(const std::string& path,
                                                         RecordReaderOptions options) {
  Compression compression = options.compression.value_or(CompressionFromPath(path));
  InputStreamOptions stream_options;
  stream_options.read_size = 256 * 1024;
  stream_options.inflater = options.inflater;
  stream_options.max_decompressed_bytes = options.max_decompressed_bytes;
  // The stream's and the reader's first buffers are allocated here: an allocation failure is
  // ResourceExhausted naming the file, never an exception out of the core's API.
  std::unique_ptr<RecordReader> reader;
  RF_RETURN_IF_ERROR(CatchExceptions("opening '" + path + "'", [&]() -> Status {
    RF_ASSIGN_OR_RETURN(auto stream, OpenInputStream(path, compression, stream_options));
    reader.reset(new RecordReader(std::move(stream), options, compression));
    return Status();
  }));
  return reader;
}

std::unique_ptr<RecordReader> RecordReader::FromStream(std::unique_ptr<InputStream> stream,
                                                       RecordReaderOptions options,
                                                       Compression compression) {
  return std::unique_ptr<RecordReader>(new RecordReader(std::move(stream), options, compression));
}

const std::string& RecordReader::path() const { return stream_->name(); }

Status RecordReader::SkipTo(uint64_t offset, uint64_t record_index) {
  if (buffer_offset_ != 0 || end_ != 0 || record_index_ != 0) {
    return FailedPreconditionError("SkipTo on '" + path() + "' after reading");
  }
  RF_ASSIGN_OR_RETURN(uint64_t skipped, stream_->Skip(offset));
  if (skipped != offset) {
    return DataLossError("'" + path() + "' ends at byte " + std::to_string(skipped) +
                         ", before the saved position " + std::to_string(offset) +
                         " (was the file changed?)");
  }
  buffer_offset_ = offset;
  record_index_ = record_index;
  records_read_ = record_index;
  return Status();
}

std::string RecordReader::Where(uint64_t offset) const {
  return "'" + path() + "' at byte offset " + std::to_string(offset) +
         (compressed_ ? " of the decompressed stream" : "") + " (record index " +
         std::to_string(record_index_) + ")";
}

// Makes at least `n` bytes available at pos_ unless the stream ends first; returns how many
// are available. Reads as much as the buffer holds, so small records cost no syscall each.
Result<size_t> RecordReader::Fill(size_t n) {
  size_t avail = end_ - pos_;
  if (avail >= n || eof_) return avail;
  if (pos_ > 0) {
    if (avail > 0) std::memmove(buffer_.data(), buffer_.data() + pos_, avail);
    buffer_offset_ += pos_;
    pos_ = 0;
    end_ = avail;
  }
  // Give back memory a huge record took once the buffer is empty again.
  if (end_ == 0 && n <= options_.buffer_size && buffer_.size() > 4 * options_.buffer_size) {
    buffer_.resize(options_.buffer_size);
    buffer_.shrink_to_fit();
  }
  while (end_ < n && !eof_) {
    if (end_ == buffer_.size()) {
      // Grow by doubling as data arrives, never by what a length field claims, so a lying
      // length in a compressed stream costs at most twice the bytes actually present.
      RF_RETURN_IF_ERROR(GrowBuffer(buffer_.size() * 2));
    }
    RF_ASSIGN_OR_RETURN(size_t got,
                        stream_->Read(std::span(buffer_.data() + end_, buffer_.size() - end_)));
    if (got == 0) eof_ = true;
    end_ += got;
  }
  return end_ - pos_;
}

// Grows the record buffer to `size` bytes: asks the budget first, and turns an allocation
// failure into kResourceExhausted (a 1 GiB record under an address-space limit must not abort
// the process).
Status RecordReader::GrowBuffer(size_t size) {
  const size_t extra = size - buffer_.size();
  const uint64_t record_offset = buffer_offset_ + pos_;
  if (options_.buffer_budget != nullptr) {
    RF_RETURN_IF_ERROR(
        options_.buffer_budget->Reserve(path(), extra, record_offset, record_index_));
  }
  try {
    buffer_.resize(size);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("cannot allocate a " + std::to_string(size) +
                                  "-byte buffer for the record in " + Where(record_offset) +
                                  " (out of memory)");
  }
  return Status();
}

Status RecordReader::Corruption(uint64_t offset, uint64_t bytes, std::string reason) {
  CorruptionEvent event{path(), offset, record_index_, bytes, reason};
  if (options_.reporter != nullptr) options_.reporter->Report(event);
  if (options_.on_corruption == CorruptionPolicy::kSkip) {
    stats_.records_skipped += 1;
    stats_.bytes_skipped += bytes;
    if (stats_.events.size() < CorruptionStats::kMaxEvents) stats_.events.push_back(event);
    record_index_ += 1;
    return Status::OK();
  }
  std::string msg = "corrupt record in " + Where(offset) + ": " + reason;
  if (offset == 0) {
    msg += ". Is this a TFRecord file?";
    if (!compressed_ && end_ - pos_ >= 2 && buffer_[pos_] == std::byte{0x1f} &&
        buffer_[pos_ + 1] == std::byte{0x8b}) {
      msg += " It starts with the GZIP magic bytes: open it with compression=\"GZIP\".";
    } else if (!compressed_ && end_ - pos_ >= 1 && buffer_[pos_] == std::byte{0x78}) {
      msg += " It may be ZLIB-compressed: try compression=\"ZLIB\".";
    }
  }
  error_ = DataLossError(std::move(msg));
  return error_;
}

// A failure of the byte stream itself (I/O error, or a damaged / truncated compressed stream)
// while reading the record that starts at `offset`.
Result<bool> RecordReader::StreamFailure(uint64_t offset, const Status& status) {
  return StreamFailure(offset, end_ - pos_, status);
}

// The same, with `bytes` of the record read before the failure.
Result<bool> RecordReader::StreamFailure(uint64_t offset, uint64_t bytes, const Status& status) {
  if (status.code() != StatusCode::kDataLoss) {
    error_ = status;
    return error_;
  }
  if (options_.on_corruption == CorruptionPolicy::kSkip) {
    // A deflate stream cannot be resynchronised: drop the rest of the file, counted.
    RF_RETURN_IF_ERROR(
        Corruption(offset, bytes, status.message() + "; the rest of the file is skipped"));
    pos_ = end_;
    eof_ = true;
    return false;
  }
  error_ =
      DataLossError(status.message() + ", inside the record at byte offset " +
                    std::to_string(offset) + (compressed_ ? " of the decompressed stream" : "") +
                    " (record index " + std::to_string(record_index_) + ")");
  return error_;
}

// After a bad length CRC nothing after `bad_offset` can be trusted, so look for the next
// position whose 12 bytes form a header with a valid CRC and a plausible length.
Result<bool> RecordReader::Resynchronize(uint64_t bad_offset) {
  pos_ += 1;
  while (true) {
    Result<size_t> filled = Fill(kHeaderSize);
    if (!filled.ok()) return StreamFailure(bad_offset, filled.status());
    if (*filled < kHeaderSize) {
      pos_ = end_;
      return false;
    }
    for (size_t i = pos_; i + kHeaderSize <= end_; ++i) {
      const std::byte* h = buffer_.data() + i;
      if (HeaderCrcMatches(h) && DecodeFixed64(h) <= options_.max_record_size) {
        pos_ = i;
        return true;
      }
    }
    pos_ = end_ - (kHeaderSize - 1);
  }
}

Result<bool> RecordReader::ReadRecord(std::span<const std::byte>* record) {
  return Next(record, nullptr);
}

Result<bool> RecordReader::ReadRecord(std::string* out) {
  std::span<const std::byte> view;
  return Next(&view, out);
}

// The record at `offset` (its header at pos_, its payload of `length` <= buffer_size bytes
// not all buffered), read into `out`: the buffered part copied, the rest of the payload and
// its footer read from the stream into `out`, in the same read as up to the next 12 bytes,
// which become the buffer (so that a next large record is read the same way). Returns true
// for a record, false after a record skipped (kSkip), nullopt at the end of the stream.
Result<std::optional<bool>> RecordReader::ReadDirect(uint64_t offset, uint64_t length,
                                                     std::string* out) {
  const size_t body = static_cast<size_t>(length) + kFooterSize;
  const size_t have = end_ - pos_ - kHeaderSize;  // of the body, already buffered (< body)
  out->resize(body + kHeaderSize);
  std::memcpy(out->data(), buffer_.data() + pos_ + kHeaderSize, have);
  buffer_offset_ += end_;
  pos_ = end_ = 0;
  size_t got = have;
  while (got < body) {
    Result<size_t> n = stream_->Read(std::as_writable_bytes(std::span(*out)).subspan(got));
    if (!n.ok()) {
      // An error, or (kSkip) the rest of the stream skipped.
      RF_RETURN_IF_ERROR(StreamFailure(offset, kHeaderSize + got, n.status()).status());
      return std::optional<bool>();
    }
    if (*n == 0) {
      eof_ = true;
      break;
    }
    got += *n;
    buffer_offset_ += *n;
  }
  if (got < body) {
    RF_RETURN_IF_ERROR(Corruption(offset, kHeaderSize + got,
                                  "truncated record: it claims " + std::to_string(length) +
                                      " payload bytes but the stream ends after " +
                                      std::to_string(kHeaderSize + got) + " bytes (with framing)"));
    return std::optional<bool>();
  }
  // What was read past the footer starts the next record: it is the buffer now.
  const size_t extra = got - body;
  std::memcpy(buffer_.data(), out->data() + body, extra);
  end_ = extra;
  buffer_offset_ -= extra;
  const auto* payload = reinterpret_cast<const std::byte*>(out->data());
  if (options_.verify_checksums) {
    uint32_t stored = UnmaskCrc(DecodeFixed32(payload + length));
    uint32_t actual = Crc32c(std::span(payload, length));
    if (stored != actual) {
      RF_RETURN_IF_ERROR(Corruption(offset, length + kFramingOverhead,
                                    "payload CRC mismatch (stored " + Hex32(stored) +
                                        ", computed " + Hex32(actual) + ", payload " +
                                        std::to_string(length) + " bytes)"));
      return std::optional<bool>(false);
    }
  }
  out->resize(length);
  last_record_offset_ = offset;
  ++record_index_;
  ++records_read_;
  return std::optional<bool>(true);
}

Result<bool> RecordReader::Next(std::span<const std::byte>* record, std::string* out) {
  if (!error_.ok()) return error_;
  while (true) {
    const uint64_t offset = buffer_offset_ + pos_;
    Result<size_t> filled = Fill(kHeaderSize);
    if (!filled.ok()) return StreamFailure(offset, filled.status());
    size_t avail = *filled;
    if (avail == 0) return false;
    if (avail < kHeaderSize) {
      RF_RETURN_IF_ERROR(Corruption(offset, avail,
                                    "truncated record header: the file ends " +
                                        std::to_string(avail) + " bytes into a 12-byte header"));
      pos_ = end_;
      return false;
    }
    const std::byte* header = buffer_.data() + pos_;
    const uint64_t length = DecodeFixed64(header);
    if (options_.verify_checksums && !HeaderCrcMatches(header)) {
      uint32_t stored = UnmaskCrc(DecodeFixed32(header + kLengthSize));
      uint32_t actual = Crc32c(std::span(header, kLengthSize));
      std::string reason =
          "length CRC mismatch (stored " + Hex32(stored) + ", computed " + Hex32(actual) + ")";
      if (options_.on_corruption == CorruptionPolicy::kRaise) {
        return Corruption(offset, 0, std::move(reason));
      }
      RF_ASSIGN_OR_RETURN(bool found, Resynchronize(offset));
      uint64_t resume = buffer_offset_ + pos_;
      RF_RETURN_IF_ERROR(Corruption(offset, resume - offset, std::move(reason)));
      if (!found) return false;
      continue;
    }
    // For plain files the length is checked against the file before anything is allocated
    // (written so that no addition can overflow, whatever the length field says).
    // (Only needed when the record is not already in the buffer.)
    const size_t buffered = end_ - pos_;
    const bool in_buffer = length <= buffered && buffered - length >= kFramingOverhead;
    std::optional<uint64_t> left = in_buffer ? std::nullopt : stream_->remaining();
    const uint64_t have = left ? *left + buffered : 0;
    if (left && (length > have || have - length < kFramingOverhead)) {
      RF_RETURN_IF_ERROR(Corruption(offset, have,
                                    "truncated record: it claims " + std::to_string(length) +
                                        " payload bytes but only " + std::to_string(have) +
                                        " bytes (with framing) are left in the file"));
      pos_ = end_;
      eof_ = true;
      return false;
    }
    if (length > options_.max_record_size) {
      error_ = ResourceExhaustedError(
          "record in " + Where(offset) + " claims " + std::to_string(length) +
          " bytes, over the max_record_size limit of " + std::to_string(options_.max_record_size));
      return error_;
    }
    const uint64_t framed = length + kFramingOverhead;
    if (out != nullptr && options_.direct_read_bytes > 0 && length >= options_.direct_read_bytes &&
        length <= options_.buffer_size && end_ - pos_ < framed) {
      RF_ASSIGN_OR_RETURN(std::optional<bool> direct, ReadDirect(offset, length, out));
      if (!direct.has_value()) return false;
      if (!*direct) continue;  // skipped
      *record = std::as_bytes(std::span(*out));
      return true;
    }
    filled = Fill(framed);
    if (!filled.ok()) return StreamFailure(offset, filled.status());
    avail = *filled;
    if (avail < framed) {
      RF_RETURN_IF_ERROR(Corruption(offset, avail,
                                    "truncated record: it claims " + std::to_string(length) +
                                        " payload bytes but the stream ends after " +
                                        std::to_string(avail) + " bytes (with framing)"));
      pos_ = end_;
      return false;
    }
    header = buffer_.data() + pos_;  // Fill may have moved the buffer.
    const std::byte* payload = header + kHeaderSize;
    if (options_.verify_checksums) {
      uint32_t stored = UnmaskCrc(DecodeFixed32(payload + length));
      uint32_t actual = Crc32c(std::span(payload, length));
      if (stored != actual) {
        RF_RETURN_IF_ERROR(Corruption(offset, framed,
                                      "payload CRC mismatch (stored " + Hex32(stored) +
                                          ", computed " + Hex32(actual) + ", payload " +
                                          std::to_string(length) + " bytes)"));
        pos_ += framed;
        continue;
      }
    }
    pos_ += framed;
    last_record_offset_ = offset;
    ++record_index_;
    ++records_read_;
    *record = std::span<const std::byte>(payload, length);
    if (out != nullptr) out->assign(reinterpret_cast<const char*>(payload), length);
    return true;
  }
}

}  // namespace recordflow::format
