// Helpers shared by the Example parser's tests.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "recordflow/example/parse.h"

namespace recordflow::example::testing {

// Views of `records` as the byte spans ExampleParser::Parse takes.
inline std::vector<std::span<const std::byte>> Spans(const std::vector<std::string>& records) {
  std::vector<std::span<const std::byte>> out;
  for (const auto& r : records) out.push_back(std::as_bytes(std::span(r.data(), r.size())));
  return out;
}

// Value `j` of a bytes column.
inline std::string Str(const Column& c, size_t j) {
  return c.bytes_data.substr(c.bytes_offsets[j], c.bytes_offsets[j + 1] - c.bytes_offsets[j]);
}

}  // namespace recordflow::example::testing
