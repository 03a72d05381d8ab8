// The checkpoint codec (checkpoint_codec.h).
#include "checkpoint_codec.h"

#include <span>

#include "recordflow/format/crc32c.h"
#include "recordflow/format/record_format.h"

namespace recordflow::pipeline::internal {

void StateWriter::U64(uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out_.append(b, 8);
}

void StateWriter::Str(std::string_view s) {
  U64(s.size());
  out_.append(s);
}

void StateWriter::RngState(const Rng& rng) {
  for (uint64_t s : rng.state) U64(s);
}

void StateWriter::AppendChecksum() {
  const uint32_t crc = format::MaskCrc(format::Crc32c(std::as_bytes(std::span(out_))));
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(crc >> (8 * i));
  out_.append(b, 4);
}

Status StateReader::VerifyChecksum() {
  if (in_.size() < 4 || in_.size() - 4 < pos_) {
    return DataLossError("checkpoint state is too short to hold its checksum (" +
                         std::to_string(in_.size()) + " bytes)");
  }
  const std::string_view body = in_.substr(0, in_.size() - 4);
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) {
    stored |= static_cast<uint32_t>(static_cast<uint8_t>(in_[body.size() + i])) << (8 * i);
  }
  const uint32_t actual = format::MaskCrc(format::Crc32c(std::as_bytes(std::span(body))));
  if (stored != actual) {
    return DataLossError("checkpoint state is damaged: CRC32C mismatch over its " +
                         std::to_string(body.size()) + " bytes (stored " + std::to_string(stored) +
                         ", computed " + std::to_string(actual) + ")");
  }
  in_ = body;
  return Status();
}

Result<uint64_t> StateReader::U64(const char* what) {
  if (in_.size() - pos_ < 8) {
    return DataLossError(std::string("checkpoint state ends while reading ") + what);
  }
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
  pos_ += 8;
  return v;
}

Result<int64_t> StateReader::I64(const char* what) {
  RF_ASSIGN_OR_RETURN(uint64_t v, U64(what));
  return static_cast<int64_t>(v);
}

Result<bool> StateReader::Bool(const char* what) {
  RF_ASSIGN_OR_RETURN(uint64_t v, U64(what));
  if (v > 1) return DataLossError(std::string("checkpoint state: bad flag for ") + what);
  return v == 1;
}

Result<std::string> StateReader::Str(const char* what) {
  RF_ASSIGN_OR_RETURN(uint64_t n, U64(what));
  if (in_.size() - pos_ < n) {
    return DataLossError(std::string("checkpoint state ends inside ") + what);
  }
  std::string s(in_.substr(pos_, n));
  pos_ += n;
  return s;
}

Status StateReader::RngState(Rng* rng, const char* what) {
  for (uint64_t& s : rng->state) {
    RF_ASSIGN_OR_RETURN(s, U64(what));
  }
  if ((rng->state[0] | rng->state[1] | rng->state[2] | rng->state[3]) == 0) {
    return DataLossError(std::string("checkpoint state: all-zero RNG state for ") + what);
  }
  return Status();
}

}  // namespace recordflow::pipeline::internal
