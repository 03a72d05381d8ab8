// Over 600 lines: the Example and SequenceExample batch parsers share the column builders and
// the per-record error path defined here; the split planned is along that line (the builders
// into an internal header, one file per parser).
#include "recordflow/example/parse.h"

#include <algorithm>
#include <cstring>

#include "example_internal.h"
#include "recordflow/core/thread_annotations.h"
#include "recordflow/core/thread_pool.h"

namespace recordflow::example {
namespace {

// What pass 1 learns about one (record, spec) pair.
struct Slot {
  FeatureView view;
  bool present = false;
  uint32_t count = 0;   // values
  uint64_t nbytes = 0;  // bytes features: total value bytes
};

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Where parallel chunks report failures; the lowest record index wins, so the error does not
// depend on thread timing.
class FirstError {
 public:
  void Report(uint64_t record, Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok() || record < record_) {
      record_ = record;
      status_ = std::move(status);
    }
  }
  // The first error, and in *record (when given and there is one) the record it concerns.
  Status Take(uint64_t* record = nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (record != nullptr && !status_.ok()) *record = record_;
    return std::move(status_);
  }

 private:
  std::mutex mu_;
  uint64_t record_ RF_GUARDED_BY(mu_) = 0;
  Status status_ RF_GUARDED_BY(mu_);
};

}  // namespace

int64_t FeatureSpec::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Column::num_values() const {
  switch (dtype) {
    case DType::kInt64:
      return static_cast<int64_t>(int64s.size());
    case DType::kFloat32:
      return static_cast<int64_t>(floats.size());
    case DType::kBytes:
      if (!bytes_views.empty()) return static_cast<int64_t>(bytes_views.size());
      return bytes_offsets.empty() ? 0 : static_cast<int64_t>(bytes_offsets.size()) - 1;
    default:  // specs hold feature types only (checked when the parser is made)
      return 0;
  }
}

namespace {

uint64_t HashKey(std::string_view key) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ key.size();
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    uint64_t chunk;
    std::memcpy(&chunk, key.data() + i, 8);
    h = (h ^ chunk) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  if (i < key.size()) std::memcpy(&tail, key.data() + i, key.size() - i);
  h ^= tail;
  // Murmur3's finalizer: every input bit reaches the low bits the table indexes with.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// Key equality without a call into libc for the short keys features have.
inline bool KeyEquals(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  if (n >= 8 && n <= 16) {
    uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a.data(), 8);
    std::memcpy(&b0, b.data(), 8);
    std::memcpy(&a1, a.data() + n - 8, 8);
    std::memcpy(&b1, b.data() + n - 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0;
  }
  if (n < 8) {
    for (size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }
  return std::memcmp(a.data(), b.data(), n) == 0;
}

// The bytes of a list message that holds exactly one packed field 1 (what every protobuf
// writer produces for a non-empty packed list), or an empty span when the list is laid out
// any other way (then the general visitors handle it).
bool SinglePackedField(std::span<const std::byte> list, std::span<const std::byte>* payload) {
  internal::WireReader r(list);
  uint32_t field, wt;
  if (!r.ReadTag(&field, &wt) || field != 1 || wt != internal::kLengthDelimited) return false;
  if (!r.ReadLengthDelimited(payload)) return false;
  return r.done();
}

}  // namespace

void ExampleParser::KeyTable::Build(const std::vector<FeatureSpec>& specs) {
  size_t size = 16;
  while (size < specs.size() * 4) size *= 2;
  slots_.assign(size, Slot{});
  mask_ = size - 1;
  keys_.clear();
  for (size_t i = 0; i < specs.size(); ++i) keys_.push_back(specs[i].key);
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t h = HashKey(specs[i].key);
    size_t at = h & mask_;
    while (slots_[at].index >= 0) at = (at + 1) & mask_;
    slots_[at] = Slot{h, static_cast<int>(i)};
  }
}

int ExampleParser::KeyTable::Find(std::string_view key) const {
  const uint64_t h = HashKey(key);
  for (size_t at = h & mask_;; at = (at + 1) & mask_) {
    const Slot& slot = slots_[at];
    if (slot.index < 0) return -1;
    if (slot.hash == h && KeyEquals(keys_[slot.index], key)) return slot.index;
  }
}

ExampleParser::ExampleParser(std::vector<FeatureSpec> specs) : specs_(std::move(specs)) {
  keys_.Build(specs_);
}

Result<ExampleParser> ExampleParser::Create(std::vector<FeatureSpec> specs) {
  std::unordered_map<std::string, int> seen;
  for (const auto& spec : specs) {
    const std::string where = "spec for feature '" + spec.key + "'";
    if (!seen.emplace(spec.key, 0).second) {
      return InvalidArgumentError("feature '" + spec.key + "' appears twice in the spec");
    }
    if (spec.kind == FeatureSpec::Kind::kVarLen) {
      if (!spec.shape.empty() || spec.default_value) {
        return InvalidArgumentError(where + ": VarLen takes no shape and no default");
      }
      continue;
    }
    const bool sequence = spec.kind == FeatureSpec::Kind::kFixedLenSequence;
    int64_t n = 1;
    for (int64_t d : spec.shape) {
      if (d < 0)
        return InvalidArgumentError(where + ": negative dimension in shape " +
                                    ShapeString(spec.shape));
      if (d > 0 && n > (int64_t{1} << 40) / d)
        return InvalidArgumentError(where + ": shape too large");
      n *= d;
    }
    // Each item's value count divides a record's count: an item of no values has no meaning.
    if (sequence && n == 0) {
      return InvalidArgumentError(where + ": FixedLenSequence shape " + ShapeString(spec.shape) +
                                  " has a zero dimension: each item must hold at least one value");
    }
    if (spec.default_value) {
      const Feature& d = *spec.default_value;
      if (d.kind != ListKindFor(spec.dtype)) {
        return InvalidArgumentError(where + ": default value is " +
                                    std::string(ListKindName(d.kind)) + ", but the dtype is " +
                                    std::string(DTypeName(spec.dtype)));
      }
      int64_t size = static_cast<int64_t>(d.size());
      if (sequence && size != 1) {
        return InvalidArgumentError(
            where + ": a FixedLenSequence padding value is one value, not " + std::to_string(size));
      }
      if (size != n && size != 1) {
        return InvalidArgumentError(where + ": default value has " + std::to_string(size) +
                                    " values; shape " + ShapeString(spec.shape) + " needs " +
                                    std::to_string(n) + " (or 1, broadcast)");
      }
    }
  }
  return ExampleParser(std::move(specs));
}

Status ExampleParser::Parse(std::span<const std::span<const std::byte>> records,
                            std::vector<Column>* columns, const ParseOptions& options) const {
  const size_t batch = records.size();
  const size_t k_count = specs_.size();
  columns->assign(k_count, Column{});
  for (size_t k = 0; k < k_count; ++k) {
    const FeatureSpec& spec = specs_[k];
    Column& c = (*columns)[k];
    c.key = spec.key;
    c.dtype = spec.dtype;
    c.ragged = spec.kind != FeatureSpec::Kind::kFixedLen;
    if (!c.ragged) {
      c.shape.push_back(static_cast<int64_t>(batch));
      c.shape.insert(c.shape.end(), spec.shape.begin(), spec.shape.end());
      const size_t total = batch * static_cast<size_t>(spec.num_elements());
      if (spec.dtype == DType::kInt64) c.int64s.resize(total);
      if (spec.dtype == DType::kFloat32) c.floats.resize(total);
    }
  }
  std::vector<Slot> slots(batch * k_count);
  FirstError first_error;

  // `key` is null for errors that concern the whole record.
  auto record_error = [&](size_t r, const Status& s, const std::string* key) {
    const std::string& msg = s.message();
    std::string where = "record " + std::to_string(options.first_record_index + r);
    if (key != nullptr) where = "feature '" + *key + "' of " + where;
    first_error.Report(r, Status(s.code(), where + ": " + msg));
  };

  // Pass 1: find each spec'd feature in each record, check it, count it, and decode dense
  // numeric values straight into their place in the output.
  ParallelFor(
      batch, options.min_records_per_thread, options.max_parallelism,
      [&](size_t begin, size_t end) {
        // Records of one dataset list their keys in the same order, so the key at position i of
        // the previous record predicts the key at position i of this one: a match skips the hash.
        std::vector<std::pair<std::string_view, int>> previous;
        for (size_t r = begin; r < end; ++r) {
          Slot* row = slots.data() + r * k_count;
          size_t position = 0;
          Status s = internal::VisitExampleFeatures(records[r], [&](std::span<const std::byte> f) {
            return internal::VisitFeatureEntries(
                f, [&](std::string_view key, std::span<const std::byte> value) -> Status {
                  int k;
                  if (position < previous.size() && KeyEquals(previous[position].first, key)) {
                    k = previous[position].second;
                  } else {
                    k = keys_.Find(key);
                    if (position >= previous.size()) previous.resize(position + 1);
                    previous[position] = {key, k};
                  }
                  ++position;
                  if (k < 0) return Status::OK();  // not asked for: never decoded
                  Slot& slot = row[k];
                  RF_RETURN_IF_ERROR(internal::DecodeFeature(value, &slot.view));
                  slot.present = slot.view.kind != ListKind::kNone;  // a repeated key: last wins
                  return Status::OK();
                });
          });
          if (!s.ok()) {
            record_error(r, s, nullptr);
            continue;
          }
          for (size_t k = 0; k < k_count; ++k) {
            const FeatureSpec& spec = specs_[k];
            Slot& slot = row[k];
            Status cs;
            if (slot.present && slot.view.kind != ListKindFor(spec.dtype)) {
              record_error(
                  r,
                  InvalidArgumentError("holds " + std::string(ListKindName(slot.view.kind)) +
                                       " values, but the spec asks for " +
                                       std::string(DTypeName(spec.dtype))),
                  &spec.key);
              break;
            }
            const bool dense = spec.kind == FeatureSpec::Kind::kFixedLen;
            if (slot.present && dense && spec.dtype != DType::kBytes) {
              // Fast path: one packed run, decoded straight into the output.
              std::span<const std::byte> packed;
              if (SinglePackedField(slot.view.list, &packed)) {
                const int64_t want = spec.num_elements();
                Column& c = (*columns)[k];
                if (spec.dtype == DType::kFloat32 &&
                    packed.size() == static_cast<size_t>(want) * 4) {
                  if (want > 0)
                    std::memcpy(c.floats.data() + r * want, packed.data(), packed.size());
                  slot.count = static_cast<uint32_t>(want);
                  continue;
                }
                if (spec.dtype == DType::kInt64) {
                  internal::WireReader p(packed);
                  int64_t* out = c.int64s.data() + r * want;
                  int64_t n = 0;
                  uint64_t v;
                  while (!p.done() && n < want && p.ReadVarint(&v))
                    out[n++] = static_cast<int64_t>(v);
                  if (n == want && p.done()) {
                    slot.count = static_cast<uint32_t>(want);
                    continue;
                  }
                  // Otherwise fall through: the general path reports the count or the damage.
                }
              }
            }
            if (slot.present) {
              if (spec.dtype == DType::kBytes) {
                cs = internal::VisitBytes(slot.view.list, [&](std::span<const std::byte> v) {
                  ++slot.count;
                  slot.nbytes += v.size();
                });
              } else {
                Result<size_t> n = internal::CountListValues(slot.view);
                if (n.ok()) {
                  slot.count = static_cast<uint32_t>(*n);
                } else {
                  cs = n.status();
                }
              }
              if (!cs.ok()) {
                record_error(r, cs, &spec.key);
                break;
              }
            }
            if (spec.kind == FeatureSpec::Kind::kFixedLenSequence) {
              const int64_t stride = spec.num_elements();
              if (!slot.present && !spec.allow_missing) {
                record_error(r,
                             InvalidArgumentError("required feature is missing (a "
                                                  "FixedLenSequence spec without allow_missing)"),
                             &spec.key);
                break;
              }
              if (slot.count % stride != 0) {
                record_error(r,
                             InvalidArgumentError(
                                 "has " + std::to_string(slot.count) +
                                 " values, not a multiple of the " + std::to_string(stride) +
                                 " values of one item of shape " + ShapeString(spec.shape)),
                             &spec.key);
                break;
              }
            }
            if (!dense) continue;
            const int64_t want = spec.num_elements();
            if (!slot.present) {
              if (!spec.default_value) {
                record_error(r,
                             InvalidArgumentError("required feature is missing (the spec gives no "
                                                  "default)"),
                             &spec.key);
                break;
              }
              continue;  // defaults are filled in pass 2
            }
            if (slot.count != want) {
              record_error(
                  r,
                  InvalidArgumentError("has " + std::to_string(slot.count) +
                                       " values, but the spec's shape " + ShapeString(spec.shape) +
                                       " needs " + std::to_string(want)),
                  &spec.key);
              break;
            }
            Column& c = (*columns)[k];
            if (spec.dtype == DType::kInt64) {
              cs = DecodeInt64s(slot.view, std::span(c.int64s.data() + r * want, want));
            } else if (spec.dtype == DType::kFloat32) {
              cs = DecodeFloats(slot.view, std::span(c.floats.data() + r * want, want));
            }
            if (!cs.ok()) {
              record_error(r, cs, &spec.key);
              break;
            }
          }
        }
      });
  RF_RETURN_IF_ERROR(first_error.Take(options.error_record));

  // Between the passes (serial, cheap): row splits and bytes offsets from the counts.
  for (size_t k = 0; k < k_count; ++k) {
    const FeatureSpec& spec = specs_[k];
    Column& c = (*columns)[k];
    const bool dense = spec.kind == FeatureSpec::Kind::kFixedLen;
    const int64_t want = dense ? spec.num_elements() : 0;
    if (!dense) {
      c.row_splits.resize(batch + 1);
      c.row_splits[0] = 0;
      for (size_t r = 0; r < batch; ++r) {
        c.row_splits[r + 1] = c.row_splits[r] + slots[r * k_count + k].count;
      }
      const size_t total = static_cast<size_t>(c.row_splits[batch]);
      c.shape = {static_cast<int64_t>(total)};
      if (spec.kind == FeatureSpec::Kind::kFixedLenSequence) {
        c.shape = {static_cast<int64_t>(total) / spec.num_elements()};
        c.shape.insert(c.shape.end(), spec.shape.begin(), spec.shape.end());
      }
      if (spec.dtype == DType::kInt64) c.int64s.resize(total);
      if (spec.dtype == DType::kFloat32) c.floats.resize(total);
    }
    if (spec.dtype == DType::kBytes && options.bytes_as_views) {
      c.bytes_views.resize(dense ? batch * static_cast<size_t>(want)
                                 : static_cast<size_t>(c.row_splits[batch]));
    } else if (spec.dtype == DType::kBytes) {
      // Value j's bytes start at bytes_offsets[j]; per record, the first value's offset is kept
      // in the record's first slot and the rest are filled in pass 2.
      size_t values =
          dense ? batch * static_cast<size_t>(want) : static_cast<size_t>(c.row_splits[batch]);
      c.bytes_offsets.assign(values + 1, 0);
      uint64_t data_size = 0;
      size_t value = 0;
      for (size_t r = 0; r < batch; ++r) {
        const Slot& slot = slots[r * k_count + k];
        c.bytes_offsets[value] = static_cast<int64_t>(data_size);
        if (slot.present || !dense) {
          data_size += slot.nbytes;
          value += slot.count;
        } else {
          const auto& d = spec.default_value->bytes;
          for (int64_t i = 0; i < want; ++i) data_size += d.size() == 1 ? d[0].size() : d[i].size();
          value += static_cast<size_t>(want);
        }
      }
      c.bytes_offsets[values] = static_cast<int64_t>(data_size);
      c.bytes_data.resize(data_size);
    }
  }

  // Pass 2: ragged numeric values, all bytes values, and defaults. Batches of dense numeric
  // features that were all present are complete after pass 1.
  bool needs_pass2 = false;
  for (size_t k = 0; k < k_count && !needs_pass2; ++k) {
    const FeatureSpec& spec = specs_[k];
    if (spec.kind != FeatureSpec::Kind::kFixedLen || spec.dtype == DType::kBytes) {
      needs_pass2 = true;
    } else {
      for (size_t r = 0; r < batch && !needs_pass2; ++r)
        needs_pass2 = !slots[r * k_count + k].present;
    }
  }
  if (!needs_pass2) return Status::OK();
  ParallelFor(batch, options.min_records_per_thread, options.max_parallelism,
              [&](size_t begin, size_t end) {
                for (size_t r = begin; r < end; ++r) {
                  for (size_t k = 0; k < k_count; ++k) {
                    const FeatureSpec& spec = specs_[k];
                    const Slot& slot = slots[r * k_count + k];
                    Column& c = (*columns)[k];
                    const bool dense = spec.kind == FeatureSpec::Kind::kFixedLen;
                    const int64_t want = dense ? spec.num_elements() : 0;
                    const size_t first = dense ? r * static_cast<size_t>(want)
                                               : static_cast<size_t>(c.row_splits[r]);
                    Status s;
                    // Each record writes only the offsets of its own values after the first: the
                    // first (and the end) were set between the passes, so no two threads touch one
                    // entry.
                    int64_t pos = spec.dtype == DType::kBytes && !options.bytes_as_views
                                      ? c.bytes_offsets[first]
                                      : 0;
                    if (dense && !slot.present) {
                      const Feature& d = *spec.default_value;
                      for (int64_t i = 0; i < want; ++i) {
                        size_t src = d.size() == 1 ? 0 : static_cast<size_t>(i);
                        if (spec.dtype == DType::kInt64) c.int64s[first + i] = d.int64s[src];
                        if (spec.dtype == DType::kFloat32) c.floats[first + i] = d.floats[src];
                        if (spec.dtype == DType::kBytes && options.bytes_as_views) {
                          c.bytes_views[first + i] = std::as_bytes(std::span(d.bytes[src]));
                        } else if (spec.dtype == DType::kBytes) {
                          const std::string& v = d.bytes[src];
                          if (!v.empty())
                            std::memcpy(c.bytes_data.data() + pos, v.data(), v.size());
                          pos += static_cast<int64_t>(v.size());
                          if (i + 1 < want) c.bytes_offsets[first + i + 1] = pos;
                        }
                      }
                      continue;
                    }
                    if (!slot.present) continue;
                    if (spec.dtype == DType::kBytes && options.bytes_as_views) {
                      size_t i = first;
                      s = internal::VisitBytes(slot.view.list, [&](std::span<const std::byte> v) {
                        c.bytes_views[i++] = v;
                      });
                    } else if (spec.dtype == DType::kBytes) {
                      size_t i = 0;
                      s = internal::VisitBytes(slot.view.list, [&](std::span<const std::byte> v) {
                        if (!v.empty()) std::memcpy(c.bytes_data.data() + pos, v.data(), v.size());
                        pos += static_cast<int64_t>(v.size());
                        if (++i < slot.count) c.bytes_offsets[first + i] = pos;
                      });
                    } else if (!dense && spec.dtype == DType::kInt64) {
                      s = DecodeInt64s(slot.view, std::span(c.int64s.data() + first, slot.count));
                    } else if (!dense && spec.dtype == DType::kFloat32) {
                      s = DecodeFloats(slot.view, std::span(c.floats.data() + first, slot.count));
                    }
                    if (!s.ok()) record_error(r, s, &spec.key);
                  }
                }
              });
  return first_error.Take(options.error_record);
}

}  // namespace recordflow::example

namespace recordflow::example {
namespace {

struct SequenceSlot {
  std::span<const std::byte> list;
  bool present = false;
  uint64_t steps = 0;
  uint64_t values = 0;
  uint64_t nbytes = 0;
};

// Appends the values of one step at `*value` (and bytes at `*byte_pos`), advancing both.
Status DecodeStep(const FeatureSpec& spec, const FeatureView& view, uint64_t count, Column* c,
                  uint64_t* value, int64_t* byte_pos, bool last_value_of_record) {
  if (count == 0) return Status::OK();
  if (spec.dtype == DType::kInt64) {
    RF_RETURN_IF_ERROR(DecodeInt64s(view, std::span(c->int64s.data() + *value, count)));
    *value += count;
  } else if (spec.dtype == DType::kFloat32) {
    RF_RETURN_IF_ERROR(DecodeFloats(view, std::span(c->floats.data() + *value, count)));
    *value += count;
  } else {
    uint64_t i = 0;
    RF_RETURN_IF_ERROR(internal::VisitBytes(view.list, [&](std::span<const std::byte> v) {
      if (!v.empty()) std::memcpy(c->bytes_data.data() + *byte_pos, v.data(), v.size());
      *byte_pos += static_cast<int64_t>(v.size());
      ++i;
      // The record's first offset and the column's end were set serially; each record writes
      // only the offsets strictly inside its own range.
      if (!(last_value_of_record && i == count)) c->bytes_offsets[*value + i] = *byte_pos;
    }));
    *value += count;
  }
  return Status::OK();
}

}  // namespace

SequenceParser::SequenceParser(std::vector<FeatureSpec> specs) : specs_(std::move(specs)) {
  for (size_t i = 0; i < specs_.size(); ++i) index_.emplace(specs_[i].key, static_cast<int>(i));
}

Result<SequenceParser> SequenceParser::Create(std::vector<FeatureSpec> specs) {
  for (const auto& spec : specs) {
    if (spec.default_value && spec.kind != FeatureSpec::Kind::kFixedLenSequence) {
      return InvalidArgumentError("sequence feature '" + spec.key +
                                  "': defaults are not supported (a step is never missing)");
    }
  }
  RF_ASSIGN_OR_RETURN(ExampleParser validated, ExampleParser::Create(specs));
  (void)validated;
  return SequenceParser(std::move(specs));
}

Status SequenceParser::Parse(std::span<const std::span<const std::byte>> records,
                             std::vector<Column>* columns, const ParseOptions& options) const {
  const size_t batch = records.size();
  const size_t k_count = specs_.size();
  std::vector<SequenceSlot> slots(batch * k_count);
  FirstError first_error;
  auto record_error = [&](size_t r, const Status& s, const std::string* key, int64_t step) {
    std::string where = "record " + std::to_string(options.first_record_index + r);
    if (key != nullptr) where = "feature list '" + *key + "' of " + where;
    if (step >= 0) where += ", step " + std::to_string(step);
    first_error.Report(r, Status(s.code(), where + ": " + s.message()));
  };

  // Pass 1: locate, check and count.
  ParallelFor(
      batch, options.min_records_per_thread, options.max_parallelism,
      [&](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
          SequenceSlot* row = slots.data() + r * k_count;
          Status s = internal::VisitFeatureLists(
              records[r], [&](std::string_view key, std::span<const std::byte> list) {
                auto it = index_.find(key);
                if (it == index_.end()) return;
                row[it->second].list = list;
                row[it->second].present = true;
              });
          if (!s.ok()) {
            record_error(r, s, nullptr, -1);
            continue;
          }
          for (size_t k = 0; k < k_count && s.ok(); ++k) {
            const FeatureSpec& spec = specs_[k];
            SequenceSlot& slot = row[k];
            if (!slot.present && spec.kind == FeatureSpec::Kind::kFixedLenSequence &&
                !spec.allow_missing) {
              record_error(
                  r,
                  InvalidArgumentError("required feature list is missing (a FixedLenSequence "
                                       "spec without allow_missing)"),
                  &spec.key, -1);
              break;
            }
            if (!slot.present) continue;
            int64_t step = 0;
            s = internal::VisitSteps(slot.list, [&](const FeatureView& view) -> Status {
              if (view.kind != ListKind::kNone && view.kind != ListKindFor(spec.dtype)) {
                return InvalidArgumentError("holds " + std::string(ListKindName(view.kind)) +
                                            " values, but the spec asks for " +
                                            std::string(DTypeName(spec.dtype)));
              }
              uint64_t n = 0;
              if (spec.dtype == DType::kBytes && view.kind == ListKind::kBytes) {
                RF_RETURN_IF_ERROR(
                    internal::VisitBytes(view.list, [&](std::span<const std::byte> v) {
                      ++n;
                      slot.nbytes += v.size();
                    }));
              } else {
                RF_ASSIGN_OR_RETURN(size_t count, internal::CountListValues(view));
                n = count;
              }
              if (spec.kind != FeatureSpec::Kind::kVarLen &&
                  n != static_cast<uint64_t>(spec.num_elements())) {
                return InvalidArgumentError(
                    "has " + std::to_string(n) + " values, but the spec's shape " +
                    ShapeString(spec.shape) + " needs " + std::to_string(spec.num_elements()));
              }
              slot.values += n;
              ++slot.steps;
              ++step;
              return Status::OK();
            });
            if (!s.ok())
              record_error(r, s, &spec.key, s.code() == StatusCode::kDataLoss ? -1 : step);
          }
        }
      });
  RF_RETURN_IF_ERROR(first_error.Take(options.error_record));

  // Between the passes: splits and buffer sizes.
  columns->assign(k_count, Column{});
  std::vector<std::vector<uint64_t>> value_start(k_count, std::vector<uint64_t>(batch + 1));
  std::vector<std::vector<int64_t>> byte_start(k_count, std::vector<int64_t>(batch + 1));
  for (size_t k = 0; k < k_count; ++k) {
    const FeatureSpec& spec = specs_[k];
    Column& c = (*columns)[k];
    c.key = spec.key;
    c.dtype = spec.dtype;
    c.ragged = true;
    c.row_splits.assign(batch + 1, 0);
    for (size_t r = 0; r < batch; ++r) {
      const SequenceSlot& slot = slots[r * k_count + k];
      c.row_splits[r + 1] = c.row_splits[r] + static_cast<int64_t>(slot.steps);
      value_start[k][r + 1] = value_start[k][r] + slot.values;
      byte_start[k][r + 1] = byte_start[k][r] + static_cast<int64_t>(slot.nbytes);
    }
    const uint64_t total_steps = static_cast<uint64_t>(c.row_splits[batch]);
    const uint64_t total_values = value_start[k][batch];
    if (spec.kind != FeatureSpec::Kind::kVarLen) {
      c.shape = {static_cast<int64_t>(total_steps)};
      c.shape.insert(c.shape.end(), spec.shape.begin(), spec.shape.end());
    } else {
      c.shape = {static_cast<int64_t>(total_values)};
      c.step_splits.assign(total_steps + 1, 0);
      for (size_t r = 0; r < batch; ++r) {
        c.step_splits[c.row_splits[r]] = static_cast<int64_t>(value_start[k][r]);
      }
      c.step_splits[total_steps] = static_cast<int64_t>(total_values);
    }
    if (spec.dtype == DType::kInt64) c.int64s.resize(total_values);
    if (spec.dtype == DType::kFloat32) c.floats.resize(total_values);
    if (spec.dtype == DType::kBytes) {
      c.bytes_offsets.assign(total_values + 1, 0);
      for (size_t r = 0; r < batch; ++r) c.bytes_offsets[value_start[k][r]] = byte_start[k][r];
      c.bytes_offsets[total_values] = byte_start[k][batch];
      c.bytes_data.resize(static_cast<size_t>(byte_start[k][batch]));
    }
  }

  // Pass 2: decode every step into place.
  ParallelFor(batch, options.min_records_per_thread, options.max_parallelism,
              [&](size_t begin, size_t end) {
                for (size_t r = begin; r < end; ++r) {
                  for (size_t k = 0; k < k_count; ++k) {
                    const FeatureSpec& spec = specs_[k];
                    const SequenceSlot& slot = slots[r * k_count + k];
                    if (!slot.present || slot.steps == 0) continue;
                    Column& c = (*columns)[k];
                    uint64_t value = value_start[k][r];
                    const uint64_t record_end = value_start[k][r + 1];
                    int64_t byte_pos = byte_start[k][r];
                    int64_t step = c.row_splits[r];
                    const int64_t last_step = c.row_splits[r + 1];
                    Status s =
                        internal::VisitSteps(slot.list, [&](const FeatureView& view) -> Status {
                          RF_ASSIGN_OR_RETURN(size_t n, internal::CountListValues(view));
                          RF_RETURN_IF_ERROR(DecodeStep(spec, view, n, &c, &value, &byte_pos,
                                                        value + n == record_end));
                          ++step;
                          if (spec.kind == FeatureSpec::Kind::kVarLen && step < last_step) {
                            c.step_splits[step] = static_cast<int64_t>(value);
                          }
                          return Status::OK();
                        });
                    if (!s.ok()) record_error(r, s, &spec.key, -1);
                  }
                }
              });
  return first_error.Take(options.error_record);
}

}  // namespace recordflow::example
