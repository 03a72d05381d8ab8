#include "recordflow/example/schema.h"

#include <algorithm>
#include <limits>

namespace recordflow::example {
namespace {

constexpr size_t KindIndex(ListKind kind) { return static_cast<size_t>(kind); }

double Mean(uint64_t total, uint64_t count) {
  return count == 0 ? 0.0 : static_cast<double>(total) / static_cast<double>(count);
}

DType DTypeOf(ListKind kind) {
  switch (kind) {
    case ListKind::kFloat:
      return DType::kFloat32;
    case ListKind::kInt64:
      return DType::kInt64;
    case ListKind::kBytes:
    case ListKind::kNone:
      break;
  }
  return DType::kBytes;
}

}  // namespace

uint64_t KeyStats::records_present() const {
  return records_by_kind[KindIndex(ListKind::kBytes)] +
         records_by_kind[KindIndex(ListKind::kFloat)] +
         records_by_kind[KindIndex(ListKind::kInt64)];
}

std::vector<ListKind> KeyStats::kinds() const {
  std::vector<ListKind> out;
  for (ListKind kind : {ListKind::kBytes, ListKind::kFloat, ListKind::kInt64}) {
    if (records_by_kind[KindIndex(kind)] > 0) out.push_back(kind);
  }
  return out;
}

double KeyStats::mean_values() const { return Mean(total_values, records_present()); }

double KeyStats::mean_value_bytes() const { return Mean(total_value_bytes, bytes_values); }

double Schema::mean_record_bytes() const { return Mean(total_record_bytes, records); }

double Schema::presence(const KeyStats& key) const { return Mean(key.records_present(), examples); }

std::optional<FeatureSpec> Schema::ProposeSpec(const KeyStats& key) const {
  const std::vector<ListKind> kinds = key.kinds();
  if (kinds.size() != 1) return std::nullopt;
  const DType dtype = DTypeOf(kinds[0]);
  // An empty Feature counts as missing to the parsers, so it rules out a required FixedLen
  // just as an absent key does.
  const bool always_present = key.records_present() == examples && key.records_empty_feature == 0;
  if (always_present && key.min_values == key.max_values && key.min_values > 0) {
    if (key.min_values == 1) return FeatureSpec::FixedLen(key.key, dtype, {});
    return FeatureSpec::FixedLen(key.key, dtype, {static_cast<int64_t>(key.min_values)});
  }
  return FeatureSpec::VarLen(key.key, dtype);
}

std::vector<FeatureSpec> Schema::ProposeSpecs() const {
  std::vector<FeatureSpec> specs;
  for (const KeyStats& key : keys) {
    if (std::optional<FeatureSpec> spec = ProposeSpec(key)) specs.push_back(*std::move(spec));
  }
  return specs;
}

SchemaInference::SchemaInference(SchemaOptions options) : options_(options) {}

void SchemaInference::Add(std::span<const std::byte> record) {
  const uint64_t size = record.size();
  if (records_ == 0) {
    min_record_bytes_ = max_record_bytes_ = size;
  } else {
    min_record_bytes_ = std::min(min_record_bytes_, size);
    max_record_bytes_ = std::max(max_record_bytes_, size);
  }
  total_record_bytes_ += size;
  const uint64_t index = records_++;

  Status status = Decode(record);
  if (!status.ok()) {
    if (first_malformed_error_.ok()) {
      first_malformed_record_ = index;
      first_malformed_error_ = std::move(status);
    }
    return;
  }
  ++examples_;
  if (entries_.empty()) ++empty_examples_;
  Commit();
}

Status SchemaInference::Decode(std::span<const std::byte> record) {
  entries_.clear();
  RF_RETURN_IF_ERROR(ExampleFeatures(record, &features_));
  for (std::span<const std::byte> features : features_) {
    RF_RETURN_IF_ERROR(ForEachFeature(features, [&](std::string_view key, const FeatureView& f) {
      entries_.push_back(Entry{key, f});
    }));
  }
  // Every list is checked, also those a later entry of the same key replaces: protobuf rejects
  // the whole message when any part of it is malformed.
  for (Entry& entry : entries_) {
    if (entry.feature.kind == ListKind::kBytes) {
      entry.min_value_bytes = std::numeric_limits<uint64_t>::max();
      RF_RETURN_IF_ERROR(ForEachBytes(entry.feature, [&](std::span<const std::byte> value) {
        ++entry.values;
        entry.value_bytes += value.size();
        entry.min_value_bytes = std::min<uint64_t>(entry.min_value_bytes, value.size());
        entry.max_value_bytes = std::max<uint64_t>(entry.max_value_bytes, value.size());
      }));
    } else {
      RF_ASSIGN_OR_RETURN(entry.values, CountValues(entry.feature));
    }
  }
  // Keep the last entry of each key (protobuf map semantics): a stable sort keeps wire order
  // among equal keys, then each run collapses onto its last element.
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.key < b.key; });
  size_t kept = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i + 1 < entries_.size() && entries_[i + 1].key == entries_[i].key) continue;
    entries_[kept++] = entries_[i];
  }
  entries_.resize(kept);
  return Status::OK();
}

void SchemaInference::Commit() {
  for (const Entry& entry : entries_) {
    KeyStats* stats = FindOrAddKey(entry.key);
    if (stats == nullptr) {
      ++untracked_features_;
      continue;
    }
    if (entry.feature.kind == ListKind::kNone) {
      ++stats->records_empty_feature;
      continue;
    }
    const bool first = stats->records_present() == 0;
    ++stats->records_by_kind[KindIndex(entry.feature.kind)];
    stats->min_values = first ? entry.values : std::min(stats->min_values, entry.values);
    stats->max_values = first ? entry.values : std::max(stats->max_values, entry.values);
    stats->total_values += entry.values;
    if (entry.feature.kind == ListKind::kBytes && entry.values > 0) {
      const bool first_value = stats->bytes_values == 0;
      stats->min_value_bytes = first_value
                                   ? entry.min_value_bytes
                                   : std::min(stats->min_value_bytes, entry.min_value_bytes);
      stats->max_value_bytes = std::max(stats->max_value_bytes, entry.max_value_bytes);
      stats->bytes_values += entry.values;
      stats->total_value_bytes += entry.value_bytes;
    }
  }
}

KeyStats* SchemaInference::FindOrAddKey(std::string_view key) {
  if (auto it = key_index_.find(key); it != key_index_.end()) return &keys_[it->second];
  if (keys_.size() >= options_.max_keys) return nullptr;
  key_index_.emplace(std::string(key), keys_.size());
  KeyStats& stats = keys_.emplace_back();
  stats.key = std::string(key);
  return &stats;
}

Schema SchemaInference::schema() const {
  Schema schema;
  schema.records = records_;
  schema.examples = examples_;
  schema.empty_examples = empty_examples_;
  schema.malformed_records = records_ - examples_;
  schema.first_malformed_record = first_malformed_record_;
  schema.first_malformed_error = first_malformed_error_;
  schema.min_record_bytes = min_record_bytes_;
  schema.max_record_bytes = max_record_bytes_;
  schema.total_record_bytes = total_record_bytes_;
  schema.untracked_features = untracked_features_;
  schema.keys = keys_;
  std::sort(schema.keys.begin(), schema.keys.end(),
            [](const KeyStats& a, const KeyStats& b) { return a.key < b.key; });
  return schema;
}

}  // namespace recordflow::example
