// The checkpoint codec: little-endian fixed words, length-prefixed strings and a trailing
// masked CRC32C. Every stage saves its state through it; the layout of a whole pipeline
// checkpoint (RFCKPT02) is in executor_checkpoint.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "recordflow/core/status.h"
#include "rng.h"

namespace recordflow::pipeline::internal {

class StateWriter {
 public:
  void U64(uint64_t v);
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Bool(bool v) { U64(v ? 1 : 0); }
  void Str(std::string_view s);
  void RngState(const Rng& rng);
  // Appends the masked CRC32C of everything written so far (4 bytes, little-endian); call last.
  void AppendChecksum();
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

// Errors: kDataLoss naming what was being read when the state ends early.
class StateReader {
 public:
  explicit StateReader(std::string_view in) : in_(in) {}
  Result<uint64_t> U64(const char* what);
  Result<int64_t> I64(const char* what);
  Result<bool> Bool(const char* what);
  Result<std::string> Str(const char* what);
  Status RngState(Rng* rng, const char* what);
  // Checks the trailing masked CRC32C (StateWriter::AppendChecksum) against every byte before
  // it, then leaves it out of what is read. Errors: kDataLoss for a mismatch or a state too
  // short to hold one.
  Status VerifyChecksum();
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace recordflow::pipeline::internal
