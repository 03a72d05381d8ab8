// Bindings for the example layer: Example encode/decode and batch parsing into NumPy arrays
// that own recordflow's buffers (no copy of numeric data).
//
// Over 600 lines: Example encode/decode, the two parsers and the columnar batch encoder that
// spark.py calls all convert through the same Feature <-> Python and Column -> NumPy/Arrow
// functions defined at the top; one translation unit keeps those conversions in one place.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "columns.h"
#include "errors.h"
#include "recordflow/core/thread_pool.h"
#include "recordflow/example/composite.h"
#include "recordflow/example/example.h"
#include "recordflow/example/parse.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {
namespace {

using example::Column;
using example::DType;
using example::Feature;
using example::Features;
using example::FeatureSpec;
using example::ListKind;

// Moves `values` to the heap and returns a NumPy array over them, owned by a capsule.
template <typename T>
nb::object ToNumpy(std::vector<T>&& values, std::vector<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner));
}

nb::bytes Bytes(std::string_view s) { return nb::bytes(s.data(), s.size()); }

// Python's typed lists -> Feature: ("int64", ndarray[int64]) / ("float32", ndarray[float32]) /
// ("bytes", list[bytes]) / ("none", None). The type decisions are made in example.py.
Feature ToFeature(nb::handle kind_and_values) {
  nb::tuple t = nb::cast<nb::tuple>(kind_and_values);
  std::string kind = nb::cast<std::string>(t[0]);
  Feature f;
  if (kind == "int64") {
    auto a = nb::cast<nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>>(t[1]);
    f = Feature::Int64s(std::vector<int64_t>(a.data(), a.data() + a.shape(0)));
  } else if (kind == "float32") {
    auto a = nb::cast<nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu>>(t[1]);
    f = Feature::Floats(std::vector<float>(a.data(), a.data() + a.shape(0)));
  } else if (kind == "bytes") {
    std::vector<std::string> values;
    for (nb::handle v : nb::cast<nb::list>(t[1])) {
      char* data;
      Py_ssize_t size;
      if (PyBytes_AsStringAndSize(v.ptr(), &data, &size) != 0) throw nb::python_error();
      values.emplace_back(data, static_cast<size_t>(size));
    }
    f = Feature::Bytes(std::move(values));
  }
  return f;
}

Features ToFeatures(nb::dict d) {
  Features out;
  for (auto [k, v] : d) out[nb::cast<std::string>(k)] = ToFeature(v);
  return out;
}

nb::object FromFeature(Feature&& f) {
  switch (f.kind) {
    case ListKind::kNone:
      return nb::none();
    case ListKind::kInt64: {
      size_t n = f.int64s.size();
      return ToNumpy(std::move(f.int64s), {n});
    }
    case ListKind::kFloat: {
      size_t n = f.floats.size();
      return ToNumpy(std::move(f.floats), {n});
    }
    case ListKind::kBytes: {
      nb::list out;
      for (const auto& v : f.bytes) out.append(Bytes(v));
      return out;
    }
  }
  return nb::none();
}

// A feature key as a Python str. protobuf `string` fields must be UTF-8; a key that is not is
// corrupt data, reported as DataLossError (not a bare decoding error).
nb::str KeyToStr(const std::string& key) {
  PyObject* s = PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "strict");
  if (s == nullptr) {
    PyErr_Clear();
    std::string shown;
    for (unsigned char ch : key) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), ch >= 0x20 && ch < 0x7f ? "%c" : "\\x%02x", ch);
      shown += buf;
    }
    ThrowStatus(DataLossError("feature key b'" + shown + "' is not valid UTF-8"));
  }
  return nb::steal<nb::str>(s);
}

nb::dict FromFeatures(Features&& features) {
  nb::dict out;
  for (auto& [key, f] : features) out[KeyToStr(key)] = FromFeature(std::move(f));
  return out;
}

std::span<const std::byte> SpanOf(nb::handle b) {
  char* data;
  Py_ssize_t size;
  if (PyBytes_AsStringAndSize(b.ptr(), &data, &size) != 0) throw nb::python_error();
  return std::as_bytes(std::span(data, static_cast<size_t>(size)));
}

// Fills a new NumPy object array of `shape` with `items` (bytes stay scalars, not sequences).
nb::object ObjectArray(nb::list items, const std::vector<size_t>& shape) {
  nb::module_ np = nb::module_::import_("numpy");
  nb::object arr = np.attr("empty")(nb::len(items), "dtype"_a = "object");
  arr[nb::slice(nb::none(), nb::none(), nb::none())] = items;
  nb::list dims;
  for (size_t d : shape) dims.append(d);
  return arr.attr("reshape")(nb::tuple(dims));
}

// Bytes values [begin, end) of a column as a NumPy object array (one bytes object each).
// The objects are allocated under the GIL, then filled on the thread pool without it: nobody
// else can see them until they are returned.
nb::object BytesValues(const Column& c, size_t begin, size_t end,
                       const std::vector<size_t>& shape) {
  const size_t n = end - begin;
  std::vector<std::span<const std::byte>> sources(n);
  for (size_t j = 0; j < n; ++j) {
    if (!c.bytes_views.empty()) {
      sources[j] = c.bytes_views[begin + j];
    } else {
      const int64_t from = c.bytes_offsets[begin + j];
      sources[j] = std::as_bytes(std::span(
          c.bytes_data.data() + from, static_cast<size_t>(c.bytes_offsets[begin + j + 1] - from)));
    }
  }
  nb::list items;
  std::vector<char*> targets(n);
  size_t total = 0;
  for (size_t j = 0; j < n; ++j) {
    PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(sources[j].size()));
    if (b == nullptr) throw nb::python_error();
    targets[j] = PyBytes_AS_STRING(b);
    total += sources[j].size();
    items.append(nb::steal(b));
  }
  auto fill = [&](size_t from, size_t to) {
    for (size_t j = from; j < to; ++j) {
      if (!sources[j].empty()) std::memcpy(targets[j], sources[j].data(), sources[j].size());
    }
  };
  if (total >= (1 << 20)) {
    nb::gil_scoped_release release;
    ParallelFor(n, 16, 0, fill);
  } else {
    fill(0, n);
  }
  return ObjectArray(items, shape);
}

// Bytes values of a column parsed with bytes_as_views, as a NumPy object array of read-only
// memoryviews into the input records (no copy). Each memoryview holds its record alive. A value
// that is not inside its record (a FixedLen default) becomes a bytes object.
nb::object MemoryviewValues(const Column& c, nb::list records,
                            const std::vector<std::span<const std::byte>>& spans,
                            const std::vector<size_t>& shape) {
  const size_t n = c.bytes_views.size();
  const size_t batch = spans.size();
  std::vector<nb::object> record_views(batch);
  nb::list items;
  size_t record = 0;
  for (size_t j = 0; j < n; ++j) {
    // The record value j came from: FixedLen columns hold n / batch values a record, ragged
    // ones are split by row_splits.
    if (c.ragged) {
      while (record + 1 < c.row_splits.size() &&
             static_cast<size_t>(c.row_splits[record + 1]) <= j) {
        ++record;
      }
    } else {
      record = j / (n / batch);
    }
    const std::span<const std::byte> v = c.bytes_views[j];
    const std::span<const std::byte> r = spans[record];
    const bool inside =
        !v.empty() && v.data() >= r.data() && v.data() + v.size() <= r.data() + r.size();
    if (!inside) {
      items.append(nb::bytes(reinterpret_cast<const char*>(v.data()), v.size()));
      continue;
    }
    if (!record_views[record].is_valid()) {
      PyObject* mv = PyMemoryView_FromObject(records[record].ptr());
      if (mv == nullptr) throw nb::python_error();
      record_views[record] = nb::steal(mv);
    }
    const Py_ssize_t from = v.data() - r.data();
    nb::object slice = nb::steal(PySlice_New(
        nb::int_(from).ptr(), nb::int_(from + static_cast<Py_ssize_t>(v.size())).ptr(), nullptr));
    PyObject* part = PyObject_GetItem(record_views[record].ptr(), slice.ptr());
    if (part == nullptr) throw nb::python_error();
    items.append(nb::steal(part));
  }
  return ObjectArray(items, shape);
}

// Bytes values of a column as the two buffers of an Arrow binary array: offsets (int32, or
// int64 when the values pass 2 GiB: Arrow's large_binary) and the values back to back, both
// as NumPy arrays owning native memory. Built without the GIL and without a Python object per
// value; pyarrow wraps them without a copy (recordflow.spark).
nb::object ArrowBinaryValues(const Column& c) {
  const bool views = !c.bytes_views.empty() || c.bytes_offsets.empty();
  const size_t n = views ? c.bytes_views.size() : c.bytes_offsets.size() - 1;
  std::vector<int64_t> offsets(n + 1, 0);
  std::vector<uint8_t> data;
  {
    nb::gil_scoped_release release;
    if (views) {
      for (size_t j = 0; j < n; ++j) {
        offsets[j + 1] = offsets[j] + static_cast<int64_t>(c.bytes_views[j].size());
      }
      data.resize(static_cast<size_t>(offsets[n]));
      auto fill = [&](size_t from, size_t to) {
        for (size_t j = from; j < to; ++j) {
          const auto v = c.bytes_views[j];
          if (!v.empty()) std::memcpy(data.data() + offsets[j], v.data(), v.size());
        }
      };
      if (data.size() >= (1 << 20)) {
        ParallelFor(n, 16, 0, fill);
      } else {
        fill(0, n);
      }
    } else {
      const int64_t base = c.bytes_offsets[0];
      for (size_t j = 0; j <= n; ++j) offsets[j] = c.bytes_offsets[j] - base;
      const auto* from = reinterpret_cast<const uint8_t*>(c.bytes_data.data()) + base;
      data.assign(from, from + offsets[n]);
    }
  }
  if (data.empty()) data.push_back(0);  // NumPy over an empty vector has no valid pointer
  const size_t data_size = data.size();
  nb::object data_array = ToNumpy(std::move(data), {data_size});
  if (offsets[n] <= INT32_MAX) {
    std::vector<int32_t> narrow(offsets.begin(), offsets.end());
    return nb::make_tuple(ToNumpy(std::move(narrow), {n + 1}), data_array);
  }
  return nb::make_tuple(ToNumpy(std::move(offsets), {n + 1}), data_array);
}

// {"values": ..., "row_splits": ...} for ragged, or the dense array.
}  // namespace

// With `records` set, bytes values become memoryviews into them (see MemoryviewValues).
nb::object ColumnToPython(Column&& c, const nb::list* records,
                          const std::vector<std::span<const std::byte>>* spans,
                          bool bytes_as_arrow) {
  std::vector<size_t> shape(c.shape.begin(), c.shape.end());
  nb::object values;
  if (c.dtype == DType::kBytes && bytes_as_arrow) {
    values = ArrowBinaryValues(c);
  } else if (c.dtype == DType::kBytes && records != nullptr && !c.bytes_views.empty()) {
    values = MemoryviewValues(c, *records, *spans, shape);
  } else if (c.dtype == DType::kBytes) {
    values = BytesValues(c, 0, static_cast<size_t>(c.num_values()), shape);
  } else if (c.dtype == DType::kInt64) {
    values = ToNumpy(std::move(c.int64s), shape);
  } else {
    values = ToNumpy(std::move(c.floats), shape);
  }
  if (!c.ragged) return values;
  size_t n = c.row_splits.size();
  if (!c.step_splits.empty()) {
    size_t steps = c.step_splits.size();
    return nb::make_tuple(values, ToNumpy(std::move(c.step_splits), {steps}),
                          ToNumpy(std::move(c.row_splits), {n}));
  }
  return nb::make_tuple(values, ToNumpy(std::move(c.row_splits), {n}));
}

// Python spec tuples -> FeatureSpecs.
std::vector<FeatureSpec> ToSpecs(nb::list specs) {
  std::vector<FeatureSpec> out;
  for (nb::handle h : specs) {
    nb::tuple t = nb::cast<nb::tuple>(h);
    FeatureSpec s;
    s.key = nb::cast<std::string>(t[0]);
    const std::string kind = nb::cast<std::string>(t[1]);
    s.kind = kind == "var"        ? FeatureSpec::Kind::kVarLen
             : kind == "fixedseq" ? FeatureSpec::Kind::kFixedLenSequence
                                  : FeatureSpec::Kind::kFixedLen;
    // ("fixedseq" tuples carry allow_missing as a sixth item.)
    if (nb::len(t) > 5) s.allow_missing = nb::cast<bool>(t[5]);
    Result<DType> dtype = example::ParseDType(nb::cast<std::string>(t[2]));
    if (!dtype.ok()) ThrowSchemaStatus(dtype.status());
    s.dtype = *dtype;
    s.shape = nb::cast<std::vector<int64_t>>(t[3]);
    if (!t[4].is_none()) s.default_value = ToFeature(t[4]);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// Binds ExampleParser and SequenceParser alike: records in, columns out, GIL released.
template <typename Parser>
class PyParser {
 public:
  explicit PyParser(nb::list specs) {
    Result<Parser> parser = Parser::Create(ToSpecs(specs));
    if (!parser.ok()) ThrowSchemaStatus(parser.status());
    parser_ = std::make_unique<Parser>(std::move(parser).value());
  }

  // bytes_as: "bytes" (a new bytes object per value), "memoryview" (zero-copy views into
  // `records`; ExampleParser only) or "arrow" (an (offsets, data) pair of NumPy arrays: an
  // Arrow binary array's buffers).
  nb::list Parse(nb::handle records, uint64_t first_record_index, const std::string& bytes_as) {
    const bool as_memoryview = bytes_as == "memoryview";
    const bool as_arrow = bytes_as == "arrow";
    if (!as_memoryview && !as_arrow && bytes_as != "bytes") {
      ThrowSchemaStatus(
          InvalidArgumentError("bytes_as must be \"bytes\", \"memoryview\" or "
                               "\"arrow\", not \"" +
                               bytes_as + "\""));
    }
    std::vector<std::span<const std::byte>> spans;
    nb::list as_list = nb::list(records);  // holds every record alive during the parse
    spans.reserve(nb::len(as_list));
    for (nb::handle r : as_list) spans.push_back(SpanOf(r));
    std::vector<Column> columns;
    example::ParseOptions options;
    options.first_record_index = first_record_index;
    options.bytes_as_views = true;  // values are copied once, into Python bytes, below
    const Status s = WithoutGil([&] { return parser_->Parse(spans, &columns, options); });
    if (!s.ok()) ThrowSchemaStatus(s);
    nb::list out;
    for (Column& c : columns) {
      out.append(as_memoryview ? ColumnToPython(std::move(c), &as_list, &spans)
                               : ColumnToPython(std::move(c), nullptr, nullptr, as_arrow));
    }
    return out;
  }

 private:
  std::unique_ptr<Parser> parser_;
};

// One column of a batch, as python/recordflow/spark.py lays it out from Arrow buffers: row r
// holds items [row_splits[r], row_splits[r+1]) (steps, for a feature list, whose values are
// [step_splits[i], step_splits[i+1])); present[r] == 0 leaves the feature out.
struct ColumnIn {
  std::string key;
  ListKind kind = ListKind::kNone;
  bool sequence = false;
  std::vector<uint8_t> present;
  std::vector<int64_t> row_splits, step_splits;
  nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> int64s;
  nb::ndarray<const float, nb::ndim<1>, nb::c_contig, nb::device::cpu> floats;
  std::vector<int64_t> item_offsets;  // bytes: item i is data[item_offsets[i], item_offsets[i+1])
  nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> data;
};

template <typename T>
std::vector<T> ToVector(nb::handle h) {
  auto a = nb::cast<nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>>(h);
  return std::vector<T>(a.data(), a.data() + a.shape(0));
}

// Splits must start at >= 0, never decrease and end within `limit` items.
void CheckSplits(const std::vector<int64_t>& splits, size_t expected, int64_t limit,
                 const std::string& key, const char* what) {
  if (splits.size() != expected) {
    throw nb::value_error(("feature '" + key + "': " + what + " has " +
                           std::to_string(splits.size()) + " entries, expected " +
                           std::to_string(expected))
                              .c_str());
  }
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0 || splits[i] > limit || (i > 0 && splits[i] < splits[i - 1])) {
      throw nb::value_error(
          ("feature '" + key + "': " + what + " out of order or range at " + std::to_string(i))
              .c_str());
    }
  }
}

Feature SliceFeature(const ColumnIn& c, int64_t begin, int64_t end) {
  switch (c.kind) {
    case ListKind::kInt64:
      return Feature::Int64s(std::vector<int64_t>(c.int64s.data() + begin, c.int64s.data() + end));
    case ListKind::kFloat:
      return Feature::Floats(std::vector<float>(c.floats.data() + begin, c.floats.data() + end));
    default: {
      std::vector<std::string> values;
      values.reserve(static_cast<size_t>(end - begin));
      const char* base = reinterpret_cast<const char*>(c.data.data());
      for (int64_t i = begin; i < end; ++i) {
        values.emplace_back(base + c.item_offsets[i],
                            static_cast<size_t>(c.item_offsets[i + 1] - c.item_offsets[i]));
      }
      return Feature::Bytes(std::move(values));
    }
  }
}

// Serializes `num_rows` Examples (or SequenceExamples when `sequence_example`) from columns:
// the bounds are checked with the GIL held, the encoding runs without it.
nb::object SerializeColumns(size_t num_rows, nb::list columns, bool sequence_example,
                            bool as_buffers) {
  std::vector<ColumnIn> cols;
  for (nb::handle h : columns) {
    nb::tuple t = nb::cast<nb::tuple>(h);
    if (t.size() != 8)
      throw nb::value_error(
          "column tuple: (key, kind, sequence, present, row_splits, step_splits, values, data)");
    ColumnIn c;
    c.key = nb::cast<std::string>(t[0]);
    const std::string kind = nb::cast<std::string>(t[1]);
    c.kind = kind == "int64"     ? ListKind::kInt64
             : kind == "float32" ? ListKind::kFloat
             : kind == "bytes"   ? ListKind::kBytes
                                 : ListKind::kNone;
    if (c.kind == ListKind::kNone)
      throw nb::value_error(("feature '" + c.key + "': unknown kind " + kind).c_str());
    c.sequence = nb::cast<bool>(t[2]);
    if (c.sequence && !sequence_example) {
      throw nb::value_error(
          ("feature '" + c.key + "': a feature list needs a SequenceExample").c_str());
    }
    c.present = ToVector<uint8_t>(t[3]);
    c.row_splits = ToVector<int64_t>(t[4]);
    if (c.present.size() != num_rows)
      throw nb::value_error(("feature '" + c.key + "': present has the wrong length").c_str());
    int64_t items = 0;
    if (c.kind == ListKind::kInt64) {
      c.int64s = nb::cast<decltype(c.int64s)>(t[6]);
      items = static_cast<int64_t>(c.int64s.shape(0));
    } else if (c.kind == ListKind::kFloat) {
      c.floats = nb::cast<decltype(c.floats)>(t[6]);
      items = static_cast<int64_t>(c.floats.shape(0));
    } else {
      c.item_offsets = ToVector<int64_t>(t[6]);
      c.data = nb::cast<decltype(c.data)>(t[7]);
      if (c.item_offsets.empty())
        throw nb::value_error(("feature '" + c.key + "': empty item offsets").c_str());
      CheckSplits(c.item_offsets, c.item_offsets.size(), static_cast<int64_t>(c.data.shape(0)),
                  c.key, "item offsets");
      items = static_cast<int64_t>(c.item_offsets.size()) - 1;
    }
    if (c.sequence) {
      if (t[5].is_none())
        throw nb::value_error(("feature '" + c.key + "': step_splits missing").c_str());
      c.step_splits = ToVector<int64_t>(t[5]);
      if (c.step_splits.empty())
        throw nb::value_error(("feature '" + c.key + "': empty step splits").c_str());
      CheckSplits(c.step_splits, c.step_splits.size(), items, c.key, "step splits");
      CheckSplits(c.row_splits, num_rows + 1, static_cast<int64_t>(c.step_splits.size()) - 1, c.key,
                  "row splits");
    } else {
      CheckSplits(c.row_splits, num_rows + 1, items, c.key, "row splits");
    }
    cols.push_back(std::move(c));
  }
  std::vector<std::string> out(num_rows);
  {
    nb::gil_scoped_release release;
    for (size_t r = 0; r < num_rows; ++r) {
      example::SequenceExample se;
      for (const ColumnIn& c : cols) {
        if (c.present[r] == 0) continue;
        if (!c.sequence) {
          se.context[c.key] = SliceFeature(c, c.row_splits[r], c.row_splits[r + 1]);
          continue;
        }
        std::vector<Feature>& steps = se.feature_lists[c.key];
        for (int64_t s = c.row_splits[r]; s < c.row_splits[r + 1]; ++s) {
          steps.push_back(SliceFeature(c, c.step_splits[s], c.step_splits[s + 1]));
        }
      }
      out[r] = sequence_example ? example::SerializeSequenceExample(se)
                                : example::SerializeExample(se.context);
    }
  }
  if (as_buffers) {
    // One buffer for the batch: no Python object per record (RecordWriter.write_buffers).
    std::vector<int64_t> offsets(num_rows + 1, 0);
    std::vector<uint8_t> data;
    {
      nb::gil_scoped_release release;
      for (size_t r = 0; r < num_rows; ++r) {
        offsets[r + 1] = offsets[r] + static_cast<int64_t>(out[r].size());
      }
      data.resize(static_cast<size_t>(offsets[num_rows]) + 1);
      for (size_t r = 0; r < num_rows; ++r) {
        if (!out[r].empty()) std::memcpy(data.data() + offsets[r], out[r].data(), out[r].size());
      }
    }
    const size_t data_size = data.size();
    return nb::make_tuple(ToNumpy(std::move(offsets), {num_rows + 1}),
                          ToNumpy(std::move(data), {data_size}));
  }
  nb::list result;
  for (const std::string& rec : out) result.append(Bytes(rec));
  return result;
}

using Int64Array = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

std::span<const int64_t> SpanOf(const Int64Array& a) {
  return {a.data(), static_cast<size_t>(a.shape(0))};
}

// (values, splits) pairs of int64 arrays -> Int64Rows; `held` keeps the arrays alive.
std::vector<example::Int64Rows> ToInt64Rows(nb::list columns, std::vector<Int64Array>* held) {
  std::vector<example::Int64Rows> rows;
  held->reserve(2 * nb::len(columns));
  for (nb::handle h : columns) {
    nb::tuple t = nb::cast<nb::tuple>(h);
    held->push_back(nb::cast<Int64Array>(t[0]));
    held->push_back(nb::cast<Int64Array>(t[1]));
  }
  for (size_t i = 0; i < held->size(); i += 2) {
    rows.push_back({SpanOf((*held)[i]), SpanOf((*held)[i + 1])});
  }
  return rows;
}

// RaggedFeature partitions: [(kind, key, uniform_length)], kind one of "row_splits",
// "row_lengths", "row_starts", "row_limits", "value_rowids", "uniform_row_length".
nb::list RaggedRowSplits(const std::string& key, nb::list partitions,
                         const Int64Array& value_splits, nb::list columns,
                         std::optional<Int64Array> record_splits, uint64_t first_record_index) {
  using Kind = example::RowPartition::Kind;
  std::vector<example::RowPartition> parts;
  for (nb::handle h : partitions) {
    nb::tuple t = nb::cast<nb::tuple>(h);
    const std::string kind = nb::cast<std::string>(t[0]);
    example::RowPartition p;
    p.kind = kind == "row_splits"     ? Kind::kRowSplits
             : kind == "row_lengths"  ? Kind::kRowLengths
             : kind == "row_starts"   ? Kind::kRowStarts
             : kind == "row_limits"   ? Kind::kRowLimits
             : kind == "value_rowids" ? Kind::kValueRowIds
                                      : Kind::kUniformRowLength;
    if (p.kind == Kind::kUniformRowLength && kind != "uniform_row_length") {
      throw nb::value_error(("unknown partition kind " + kind).c_str());
    }
    p.key = nb::cast<std::string>(t[1]);
    p.uniform_length = nb::cast<int64_t>(t[2]);
    parts.push_back(std::move(p));
  }
  std::vector<Int64Array> held;
  std::vector<example::Int64Rows> rows = ToInt64Rows(columns, &held);
  example::CompositeOptions options;
  options.first_record_index = first_record_index;
  if (record_splits) options.record_splits = SpanOf(*record_splits);
  std::vector<std::vector<int64_t>> levels;
  const Status s = WithoutGil([&] {
    return example::BuildRaggedRowSplits(key, parts, SpanOf(value_splits), rows, options, &levels);
  });
  if (!s.ok()) ThrowSchemaStatus(s);
  nb::list out;
  for (auto& level : levels) {
    const size_t n = level.size();
    out.append(ToNumpy(std::move(level), {n}));
  }
  return out;
}

// SparseFeature: (indices [n, 1 + dims], order or None); see example::BuildSparseIndices.
nb::tuple SparseIndices(const std::string& key, std::vector<std::string> index_keys,
                        const std::string& value_key, std::vector<int64_t> sizes,
                        bool already_sorted, nb::list index_columns, const Int64Array& value_splits,
                        uint64_t first_record_index) {
  example::SparseSpec spec;
  spec.key = key;
  spec.index_keys = std::move(index_keys);
  spec.value_key = value_key;
  spec.sizes = std::move(sizes);
  spec.already_sorted = already_sorted;
  std::vector<Int64Array> held;
  std::vector<example::Int64Rows> rows = ToInt64Rows(index_columns, &held);
  example::SparseIndices result;
  const Status s = WithoutGil([&] {
    return example::BuildSparseIndices(spec, rows, SpanOf(value_splits), first_record_index,
                                       &result);
  });
  if (!s.ok()) ThrowSchemaStatus(s);
  const size_t width = spec.index_keys.size() + 1;
  const size_t n = result.indices.size() / width;
  nb::object order = nb::none();
  if (!result.order.empty()) order = ToNumpy(std::move(result.order), {n});
  return nb::make_tuple(ToNumpy(std::move(result.indices), {n, width}), order);
}

}  // namespace

void RegisterExample(nb::module_& m) {
  m.def("serialize_columns", &SerializeColumns, "num_rows"_a, "columns"_a,
        "sequence_example"_a = false, "as_buffers"_a = false,
        "Serializes a batch of Examples / SequenceExamples from column buffers (see "
        "recordflow.spark); GIL released while encoding. A list of bytes, or with as_buffers "
        "(offsets int64[num_rows + 1], data uint8) for RecordWriter.write_buffers.");
  m.def(
      "serialize_example",
      [](nb::dict features) { return Bytes(example::SerializeExample(ToFeatures(features))); },
      "features"_a);
  m.def(
      "parse_example_single",
      [](nb::handle record) {
        return FromFeatures(ValueOrThrow(example::ParseExample(SpanOf(record))));
      },
      "record"_a);
  m.def(
      "serialize_sequence_example",
      [](nb::dict context, nb::dict feature_lists) {
        example::SequenceExample se;
        se.context = ToFeatures(context);
        for (auto [k, v] : feature_lists) {
          std::vector<Feature> list;
          for (nb::handle f : nb::cast<nb::list>(v)) list.push_back(ToFeature(f));
          se.feature_lists[nb::cast<std::string>(k)] = std::move(list);
        }
        return Bytes(example::SerializeSequenceExample(se));
      },
      "context"_a, "feature_lists"_a);
  m.def(
      "parse_sequence_example_single",
      [](nb::handle record) {
        example::SequenceExample se = ValueOrThrow(example::ParseSequenceExample(SpanOf(record)));
        nb::dict lists;
        for (auto& [key, list] : se.feature_lists) {
          nb::list steps;
          for (auto& f : list) steps.append(FromFeature(std::move(f)));
          lists[KeyToStr(key)] = steps;
        }
        return nb::make_tuple(FromFeatures(std::move(se.context)), lists);
      },
      "record"_a);
  m.def("ragged_row_splits", &RaggedRowSplits, "key"_a, "partitions"_a, "value_splits"_a,
        "columns"_a, "record_splits"_a = nb::none(), "first_record_index"_a = 0,
        "RaggedFeature row splits, outermost first, for a batch; GIL released.");
  m.def("sparse_indices", &SparseIndices, "key"_a, "index_keys"_a, "value_key"_a, "sizes"_a,
        "already_sorted"_a, "index_columns"_a, "value_splits"_a, "first_record_index"_a = 0,
        "SparseFeature indices (and value order) for a batch; GIL released.");
  using PyExampleParser = PyParser<example::ExampleParser>;
  using PySequenceParser = PyParser<example::SequenceParser>;
  nb::class_<PyExampleParser>(m, "ExampleParser")
      .def(nb::init<nb::list>(), "specs"_a)
      .def("parse", &PyExampleParser::Parse, "records"_a, "first_record_index"_a = 0,
           "bytes_as"_a = "bytes");
  nb::class_<PySequenceParser>(m, "SequenceParser")
      .def(nb::init<nb::list>(), "specs"_a)
      .def("parse", &PySequenceParser::Parse, "records"_a, "first_record_index"_a = 0,
           "bytes_as"_a = "bytes");
}

}  // namespace recordflow::python
