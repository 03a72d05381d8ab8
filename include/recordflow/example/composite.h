// Composite features built from parsed VarLen columns: the work of tf.io.SparseFeature and
// tf.io.RaggedFeature (with row partitions) for a whole batch at once.
//
// An ExampleParser (or SequenceParser) parses each key a composite feature reads as a VarLen
// column; the functions here check the columns against each other, record by record, and build
// the composite's index or row-split arrays in one pass over the batch.
//
// Errors are kInvalidArgument and name the composite's key, the feature key at fault and the
// record (and step, for feature lists), so a bad record never yields a malformed result.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"

namespace recordflow::example {

// An int64 VarLen column: unit u (a record, or a step of a feature list) holds
// values[splits[u] : splits[u + 1]]. Views: into the caller's buffers, only read during a call.
struct Int64Rows {
  std::span<const int64_t> values;
  std::span<const int64_t> splits;  // units + 1 entries, non-decreasing, within values
};

// One partition of a RaggedFeature (tf.io.RaggedFeature.RowSplits etc.).
struct RowPartition {
  enum class Kind {
    kRowSplits,    // row i is [s[i], s[i+1]); s starts at 0 and ends at the item count
    kRowLengths,   // the length of each row
    kRowStarts,    // the start of each row; the last row ends at the item count
    kRowLimits,    // the end of each row; the first starts at 0
    kValueRowIds,  // the row of each item, non-decreasing; rows = last id + 1
    kUniformRowLength,
  };
  Kind kind = Kind::kRowSplits;
  std::string key;             // the int64 feature read; unused by kUniformRowLength
  int64_t uniform_length = 0;  // kUniformRowLength only, >= 0
};

struct CompositeOptions {
  // Added to record positions in error messages.
  uint64_t first_record_index = 0;
  // Feature lists: the units are steps and these splits (records + 1 entries) group them into
  // records, so errors name the record and the step. Empty: the units are records.
  std::span<const int64_t> record_splits;
  // Safety limit: a ValueRowIds id at or above it is an error, because ids alone decide how
  // many (possibly empty) rows are allocated.
  int64_t max_value_row_id = int64_t{1} << 26;
};

// Builds the row splits of a RaggedFeature with `partitions` (outermost first) over the units
// of `value_splits` (units + 1 entries). `partition_columns` holds one column per partition
// that reads a feature (all but kUniformRowLength), in partition order, each with the same
// units. On success `levels` has partitions.size() + 1 arrays, outermost first: levels[0]
// (units + 1 entries) splits units into outer rows, levels[i] splits the rows of partition
// i - 1 into the items of the next level (the values, for the last).
// Errors: kInvalidArgument naming `key`, the partition (feature key) and the unit.
Status BuildRaggedRowSplits(std::string_view key, std::span<const RowPartition> partitions,
                            std::span<const int64_t> value_splits,
                            std::span<const Int64Rows> partition_columns,
                            const CompositeOptions& options,
                            std::vector<std::vector<int64_t>>* levels);

// tf.io.SparseFeature: values at explicit indices, from index features and a value feature.
struct SparseSpec {
  std::string key;
  std::vector<std::string> index_keys;  // one int64 feature per dimension
  std::string value_key;
  std::vector<int64_t> sizes;  // one per index key: each index is in [0, size)
  bool already_sorted = false;
};

struct SparseIndices {
  // [entries, 1 + index_keys.size()], row-major: the record, then its indices.
  std::vector<int64_t> indices;
  // Entry j takes value order[j] of the value column; empty when entries are in value order.
  std::vector<int64_t> order;
};

// Builds a SparseFeature's indices over a batch: `index_columns` (one per index key, records as
// units) against the value column's `value_splits`. Entries are sorted by index within each
// record (stable) unless spec.already_sorted.
// Errors: kInvalidArgument naming the index key, the record and spec.key, for an index count
// that differs from the value count or an index outside [0, size).
Status BuildSparseIndices(const SparseSpec& spec, std::span<const Int64Rows> index_columns,
                          std::span<const int64_t> value_splits, uint64_t first_record_index,
                          SparseIndices* out);

}  // namespace recordflow::example
