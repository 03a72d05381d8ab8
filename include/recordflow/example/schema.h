// Schema inference: what the keys of a stream of serialized tf.train.Example records look like,
// and the FeatureSpecs that would parse them.
//
// Counting rules, chosen to agree with ExampleParser and tf.io.parse_example:
//   - A record's key is "present" when its Feature holds a list (bytes, float or int64), even an
//     empty one. A Feature with no list set is counted apart (`records_empty_feature`): the
//     parsers treat it as missing.
//   - A key repeated inside a record counts once, with its last entry (protobuf map semantics).
//   - Records that do not decode as an Example (truncated varints, lengths past the end, ...)
//     are counted as malformed and contribute nothing else; they are never an error, because a
//     TFRecord file may legitimately carry other payloads. Note that many short byte strings,
//     the empty one included, *are* well-formed Examples with no features: those are counted in
//     `empty_examples`.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/example/example.h"
#include "recordflow/example/parse.h"

namespace recordflow::example {

struct SchemaOptions {
  // Safety limit on distinct keys described. Random bytes can decode as Examples with many
  // keys; features of keys first seen after the limit is reached are only counted, in
  // Schema::untracked_features.
  size_t max_keys = 10000;
};

// What one key looked like across the well-formed records.
struct KeyStats {
  std::string key;
  // Records in which the key holds a list, by kind; indexed by ListKind (the kNone entry
  // stays 0). More than one non-zero entry means the kinds conflict.
  std::array<uint64_t, 4> records_by_kind{};
  // Records in which the key holds an empty Feature (no list set).
  uint64_t records_empty_feature = 0;
  // Over the records where the key is present: values per record, and their sum.
  uint64_t min_values = 0;
  uint64_t max_values = 0;
  uint64_t total_values = 0;
  // Bytes lists only: how many values, and the length of each, over all of them.
  uint64_t bytes_values = 0;
  uint64_t min_value_bytes = 0;
  uint64_t max_value_bytes = 0;
  uint64_t total_value_bytes = 0;

  // Records where the key holds a list (of any kind).
  uint64_t records_present() const;
  // The kinds seen, in ListKind order (empty when the key never held a list).
  std::vector<ListKind> kinds() const;
  bool conflicting() const { return kinds().size() > 1; }
  // Mean values per record where present; 0 when never present.
  double mean_values() const;
  // Mean length of a bytes value; 0 when there were none.
  double mean_value_bytes() const;
};

// The result of a scan: a value, independent of the scanned records.
//
// Thread safety: a value; const methods may be called concurrently.
struct Schema {
  uint64_t records = 0;            // records scanned
  uint64_t examples = 0;           // of which well-formed Examples
  uint64_t empty_examples = 0;     // well-formed, with no features at all
  uint64_t malformed_records = 0;  // records - examples
  // The first malformed record: its 0-based index among the records scanned, and why
  // (kDataLoss, message from the decoder). OK when there was none.
  uint64_t first_malformed_record = 0;
  Status first_malformed_error;
  // Sizes of all scanned records (malformed ones included), in bytes. 0 when none.
  uint64_t min_record_bytes = 0;
  uint64_t max_record_bytes = 0;
  uint64_t total_record_bytes = 0;
  // Sorted by key (bytewise).
  std::vector<KeyStats> keys;
  // Feature entries of keys not described because SchemaOptions::max_keys was reached.
  uint64_t untracked_features = 0;

  double mean_record_bytes() const;
  // Fraction of the well-formed records in which `key` is present; 0 when there were none.
  double presence(const KeyStats& key) const;
  // The spec that parses every well-formed record scanned, for one key:
  //   FixedLen(shape [])  when the key is present in every record with exactly 1 value;
  //   FixedLen(shape [n]) when present in every record with exactly n > 1 values;
  //   VarLen              otherwise (missing somewhere, or varying counts, or always empty:
  //                       a key that never held a value says nothing about its shape);
  // with the dtype of its kind. nullopt when no spec can parse the key: its kinds conflict,
  // or it never held a list (only empty Features), so there is no dtype to propose.
  std::optional<FeatureSpec> ProposeSpec(const KeyStats& key) const;
  // ProposeSpec for every key that has one, in key order. ExampleParser::Create accepts it.
  std::vector<FeatureSpec> ProposeSpecs() const;
};

// Accumulates a Schema over serialized Example records, one record at a time, so a scan of
// any length uses memory in proportion to the number of distinct keys, not of records.
//
// Thread safety: thread-compatible (one SchemaInference per thread).
// Lifetime: keeps no reference to the records passed to Add.
class SchemaInference {
 public:
  explicit SchemaInference(SchemaOptions options = {});

  // Adds one serialized record. Never fails: a record that is not a well-formed Example is
  // counted as malformed (see Schema).
  void Add(std::span<const std::byte> record);

  // The schema of the records added so far.
  Schema schema() const;

  uint64_t records() const { return records_; }
  uint64_t malformed_records() const { return records_ - examples_; }

 private:
  // One feature of the record being observed. Everything is decoded and checked before any
  // of it is committed, so that a record found malformed halfway leaves the statistics as
  // they were.
  struct Entry {
    std::string_view key;  // into the record
    FeatureView feature;
    uint64_t values = 0;
    uint64_t value_bytes = 0;  // bytes lists: sum, min and max of the value lengths
    uint64_t min_value_bytes = 0;
    uint64_t max_value_bytes = 0;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };

  // Decodes `record` into entries_, one per distinct key. Errors: kDataLoss.
  Status Decode(std::span<const std::byte> record);
  void Commit();
  // The KeyStats for `key`, created on first sight; nullptr past SchemaOptions::max_keys.
  KeyStats* FindOrAddKey(std::string_view key);

  SchemaOptions options_;
  uint64_t records_ = 0;
  uint64_t examples_ = 0;
  uint64_t empty_examples_ = 0;
  uint64_t first_malformed_record_ = 0;
  Status first_malformed_error_;
  uint64_t min_record_bytes_ = 0;
  uint64_t max_record_bytes_ = 0;
  uint64_t total_record_bytes_ = 0;
  uint64_t untracked_features_ = 0;
  std::vector<KeyStats> keys_;  // in order of first appearance
  std::unordered_map<std::string, size_t, KeyHash, std::equal_to<>> key_index_;
  // Scratch reused across records to avoid allocating per record.
  std::vector<std::span<const std::byte>> features_;
  std::vector<Entry> entries_;
};

}  // namespace recordflow::example
