// The batch stage's joins: parsed columns and native-map tensors of single elements into one
// batch.
#include <algorithm>
#include <cstring>

#include "stage.h"

namespace recordflow::pipeline::internal {

Status StackTensors(std::vector<std::vector<Tensor>>&& parts, std::vector<Tensor>* out) {
  out->clear();
  if (parts.empty() || parts[0].empty()) return Status();
  const size_t n = parts[0].size();
  for (size_t i = 0; i < n; ++i) {
    Tensor joined = parts[0][i];
    size_t bytes = 0;
    int64_t rows = 0;
    for (const auto& p : parts) {
      if (p.size() != n) return InvalidArgumentError("cannot batch elements of different tensors");
      const Tensor& t = p[i];
      if (t.dtype != joined.dtype || t.shape.size() != joined.shape.size() || t.shape.empty() ||
          !std::equal(t.shape.begin() + 1, t.shape.end(), joined.shape.begin() + 1)) {
        return InvalidArgumentError("cannot batch tensor '" + joined.key +
                                    "': elements differ in type or shape");
      }
      bytes += t.size_bytes;
      rows += t.shape[0];
    }
    joined.data = std::shared_ptr<std::byte[]>(new std::byte[bytes]);
    joined.size_bytes = bytes;
    joined.shape[0] = rows;
    size_t at = 0;
    for (auto& p : parts) {
      std::memcpy(joined.data.get() + at, p[i].data.get(), p[i].size_bytes);
      at += p[i].size_bytes;
      p[i].data.reset();
    }
    out->push_back(std::move(joined));
  }
  return Status();
}

Status ConcatColumns(std::vector<example::Column>& to, std::vector<example::Column>&& from) {
  if (to.empty()) {
    to = std::move(from);
    return Status();
  }
  if (to.size() != from.size())
    return InvalidArgumentError("cannot batch elements of different features");
  for (size_t i = 0; i < to.size(); ++i) {
    example::Column& a = to[i];
    example::Column& b = from[i];
    if (a.dtype != b.dtype || a.ragged != b.ragged || a.shape.size() != b.shape.size() ||
        !std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1)) {
      return InvalidArgumentError(
          "cannot batch feature '" + a.key +
          "': elements differ in type or shape (use padded batching or VarLen)");
    }
    if (a.ragged) {
      const int64_t base = a.row_splits.back();
      for (size_t j = 1; j < b.row_splits.size(); ++j)
        a.row_splits.push_back(base + b.row_splits[j]);
      a.shape[0] += b.shape.empty() ? 0 : b.shape[0];
    } else if (!a.shape.empty()) {
      a.shape[0] += b.shape[0];
    }
    a.int64s.insert(a.int64s.end(), b.int64s.begin(), b.int64s.end());
    a.floats.insert(a.floats.end(), b.floats.begin(), b.floats.end());
    if (!b.bytes_offsets.empty()) {
      if (a.bytes_offsets.empty()) a.bytes_offsets.push_back(0);
      const int64_t base = a.bytes_offsets.back();
      for (size_t j = 1; j < b.bytes_offsets.size(); ++j)
        a.bytes_offsets.push_back(base + b.bytes_offsets[j]);
      a.bytes_data += b.bytes_data;
    }
  }
  return Status();
}

}  // namespace recordflow::pipeline::internal
