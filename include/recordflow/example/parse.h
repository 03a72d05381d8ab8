// Batch parsing of serialized Examples into columns: the work of tf.io.parse_example.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/example/example.h"

namespace recordflow::example {

// What to extract for one key.
struct FeatureSpec {
  // kFixedLenSequence (tf.io.FixedLenSequenceFeature): any number of items of `shape` per
  // record (the value count must be a multiple of prod(shape)); in a SequenceParser, one item
  // of `shape` per step and the feature list is required unless allow_missing is set.
  enum class Kind { kFixedLen, kVarLen, kFixedLenSequence };

  std::string key;
  Kind kind = Kind::kFixedLen;
  DType dtype = DType::kInt64;
  // FixedLen: the shape of one record's value; the record must hold exactly prod(shape) values.
  std::vector<int64_t> shape;
  // FixedLen: used when the key is missing (or holds an empty Feature). One value (broadcast)
  // or prod(shape) values, of `dtype`. nullopt: the feature is required.
  std::optional<Feature> default_value;
  // kFixedLenSequence: a missing feature (or feature list) is zero items instead of an error.
  bool allow_missing = false;

  static FeatureSpec FixedLen(std::string key, DType dtype, std::vector<int64_t> shape = {},
                              std::optional<Feature> default_value = std::nullopt) {
    return {std::move(key),   Kind::kFixedLen,          dtype,
            std::move(shape), std::move(default_value), false};
  }
  static FeatureSpec VarLen(std::string key, DType dtype) {
    return {std::move(key), Kind::kVarLen, dtype, {}, std::nullopt, false};
  }
  // `padding`: one value of `dtype` that pads short records when a caller makes the ragged
  // result dense (TensorFlow's default_value); not used by the parsers themselves.
  static FeatureSpec FixedLenSequence(std::string key, DType dtype, std::vector<int64_t> shape,
                                      bool allow_missing,
                                      std::optional<Feature> padding = std::nullopt) {
    return {std::move(key),   Kind::kFixedLenSequence, dtype,
            std::move(shape), std::move(padding),      allow_missing};
  }
  // Values per record of a FixedLen feature.
  int64_t num_elements() const;
};

// One parsed feature for a whole batch, in contiguous buffers.
//
// FixedLen: dense, shape [batch, *spec.shape]. VarLen: ragged: the values of record i are
// values[row_splits[i] : row_splits[i+1]], shape [row_splits.back()]. FixedLenSequence: ragged
// as VarLen (row_splits count values, each record's count a multiple of prod(spec.shape)), and
// shape [items, *spec.shape]; padding it to [batch, max_items, *spec.shape] is the caller's.
// Numeric values live in `int64s` or `floats`; bytes values are
// bytes_data[bytes_offsets[j] : bytes_offsets[j+1]] for value j.
struct Column {
  std::string key;
  DType dtype = DType::kInt64;
  bool ragged = false;
  std::vector<int64_t> shape;
  std::vector<int64_t> int64s;
  std::vector<float> floats;
  std::vector<int64_t> bytes_offsets;
  std::string bytes_data;
  // Instead of bytes_offsets/bytes_data when ParseOptions::bytes_as_views is set: value j is
  // bytes_views[j], a view into the parsed record (or into the spec's default value).
  std::vector<std::span<const std::byte>> bytes_views;
  std::vector<int64_t> row_splits;
  // SequenceParser VarLen only: values of step j are [step_splits[j], step_splits[j + 1]).
  std::vector<int64_t> step_splits;

  int64_t num_values() const;
};

struct ParseOptions {
  // Records are parsed on the default thread pool in chunks of at least this many records.
  size_t min_records_per_thread = 128;
  // 0: one chunk per core.
  int max_parallelism = 0;
  // Added to record positions in error messages (the batch's place in a larger stream).
  uint64_t first_record_index = 0;
  // ExampleParser: hand bytes values out as views into the records (Column::bytes_views)
  // instead of copying them into Column::bytes_data. The views live as long as the records
  // and the parser. Callers that copy the values anyway (into Python bytes objects) save a copy.
  bool bytes_as_views = false;
  // When set: a Parse that fails on a record stores that record's index in `records` here (the
  // record the message names, minus first_record_index); left as it was for errors that concern
  // no single record.
  uint64_t* error_record = nullptr;
};

// Parses batches of serialized tf.train.Example against a fixed set of FeatureSpecs.
//
// Errors (each names the feature key and the record index): kInvalidArgument for a required
// feature that is missing (FixedLen without a default, FixedLenSequence without allow_missing),
// a feature of the wrong type, a FixedLen feature with the wrong number of values, or a
// FixedLenSequence feature whose value count is not a multiple of prod(shape); kDataLoss for
// malformed protobuf bytes. When several records are bad, the error of the first one is returned.
//
// Thread safety: thread-safe (Parse is const). Lifetime: independent of the parsed records.
class ExampleParser {
 public:
  // Validates the specs: non-empty unique keys, non-negative dimensions, defaults of the right
  // type and size. Errors: kInvalidArgument.
  static Result<ExampleParser> Create(std::vector<FeatureSpec> specs);

  // Parses `records` into one Column per spec, in spec order.
  Status Parse(std::span<const std::span<const std::byte>> records, std::vector<Column>* columns,
               const ParseOptions& options = {}) const;

  const std::vector<FeatureSpec>& specs() const { return specs_; }

  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };

  // Open-addressing key -> spec index table with a cheap hash: the hot lookup of pass 1.
  class KeyTable {
   public:
    void Build(const std::vector<FeatureSpec>& specs);
    // -1 when absent.
    int Find(std::string_view key) const;

   private:
    struct Slot {
      uint64_t hash = 0;
      int index = -1;
    };
    std::vector<Slot> slots_;
    std::vector<std::string_view> keys_;  // views into the specs' keys
    uint64_t mask_ = 0;
  };

 private:
  explicit ExampleParser(std::vector<FeatureSpec> specs);
  std::vector<FeatureSpec> specs_;
  KeyTable keys_;
};

// The sequence part of a batch of tf.train.SequenceExample (its context is parsed by an
// ExampleParser: a SequenceExample's `context` has the wire layout of an Example's `features`).
//
// Each spec is a FeatureSpec applied to every step of the feature list of that key:
// FixedLen(shape) and FixedLenSequence(shape) require prod(shape) values per step; VarLen allows
// any number. A record without the key has zero steps, except for a FixedLenSequence spec
// without allow_missing (TensorFlow's required feature list): then it is kInvalidArgument naming
// the key and the record. Defaults are not allowed (a step is never missing); a
// FixedLenSequence padding value is.
//
// Output per spec: a Column whose values are all steps of all records in order, with
// row_splits [batch + 1] splitting steps by record, and, for VarLen, step_splits
// [total_steps + 1] splitting values by step. FixedLen and FixedLenSequence columns have shape
// [total_steps, *spec.shape].
//
// Thread safety: thread-safe (Parse is const).
class SequenceParser {
 public:
  // Errors: kInvalidArgument (duplicate keys, negative dimensions, defaults).
  static Result<SequenceParser> Create(std::vector<FeatureSpec> specs);

  // Errors as ExampleParser::Parse; messages name the key, record index and step.
  Status Parse(std::span<const std::span<const std::byte>> records, std::vector<Column>* columns,
               const ParseOptions& options = {}) const;

  const std::vector<FeatureSpec>& specs() const { return specs_; }

 private:
  explicit SequenceParser(std::vector<FeatureSpec> specs);
  std::vector<FeatureSpec> specs_;
  std::unordered_map<std::string, int, ExampleParser::KeyHash, std::equal_to<>> index_;
};

}  // namespace recordflow::example
