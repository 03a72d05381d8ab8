// Allocation-free visitors over serialized Examples, shared by the public decoding functions and
// the batch parser (which calls them in its hot loop, so they are templates, not std::function).
#pragma once

#include <string>
#include <string_view>

#include "recordflow/core/status.h"
#include "recordflow/example/example.h"
#include "wire_internal.h"

namespace recordflow::example::internal {

inline Status Malformed(const char* message_name, const WireReader& r) {
  return DataLossError(std::string("malformed ") + message_name + " at byte " +
                       std::to_string(r.error_offset()) + ": " + r.error());
}

// What a field handler of ForEachField did with the field whose tag was just read.
enum class FieldStep {
  kRead,       // consumed the field's value
  kSkip,       // not a field it wants: ForEachField skips the value
  kMalformed,  // the reader failed (r.Fail*): ForEachField reports it as malformed `message`
  kStop,       // the handler's own error is in `*status`: ForEachField returns it
};

// The loop every message decoder shares: reads each field's tag and lets
// on_field(reader, field, wire_type, &status) consume it. Errors: kDataLoss naming `message`
// and the byte offset, or the handler's own status.
template <typename Fn>
RF_WIRE_INLINE Status ForEachField(std::span<const std::byte> bytes, const char* message,
                                   Fn&& on_field) {
  WireReader r(bytes);
  Status status;
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed(message, r);
    switch (on_field(r, field, wt, &status)) {
      case FieldStep::kRead:
        break;
      case FieldStep::kSkip:
        if (!r.Skip(field, wt)) return Malformed(message, r);
        break;
      case FieldStep::kMalformed:
        return Malformed(message, r);
      case FieldStep::kStop:
        return status;
    }
  }
  return Status::OK();
}

// Reads a length-delimited field's bytes; another wire type fails the reader with `wrong_type`.
RF_WIRE_INLINE bool ReadLengthDelimitedField(WireReader& r, uint32_t wt, const char* wrong_type,
                                             std::span<const std::byte>* out) {
  if (wt != kLengthDelimited) {
    r.FailAtTag(wrong_type);
    return false;
  }
  return r.ReadLengthDelimited(out);
}

// Decodes one map<string, message> entry (key = 1, value = 2; the last of each wins).
RF_WIRE_INLINE Status DecodeMapEntry(std::span<const std::byte> entry, const char* message,
                                     std::string_view* key, std::span<const std::byte>* value) {
  *key = {};
  *value = {};  // empty: a value message with nothing set
  return ForEachField(
      entry, message, [&](WireReader& e, uint32_t f, uint32_t t, Status*) -> FieldStep {
        if (f != 1 && f != 2) return FieldStep::kSkip;
        std::span<const std::byte> s;
        if (!ReadLengthDelimitedField(e, t, "key or value has the wrong wire type", &s)) {
          return FieldStep::kMalformed;
        }
        if (f == 1) {
          *key = std::string_view(reinterpret_cast<const char*>(s.data()), s.size());
        } else {
          *value = s;
        }
        return FieldStep::kRead;
      });
}

// Calls fn(key, value bytes) for each entry of the map field `map_field` of a message; other
// fields are skipped. fn returns a Status.
template <typename Fn>
Status VisitMapField(std::span<const std::byte> bytes, uint32_t map_field, const char* message,
                     const char* entry_message, Fn&& fn) {
  return ForEachField(
      bytes, message, [&](WireReader& r, uint32_t field, uint32_t wt, Status* status) {
        if (field != map_field) return FieldStep::kSkip;
        std::span<const std::byte> entry;
        if (!ReadLengthDelimitedField(r, wt, "map entry has the wrong wire type", &entry)) {
          return FieldStep::kMalformed;
        }
        std::string_view key;
        std::span<const std::byte> value;
        *status = DecodeMapEntry(entry, entry_message, &key, &value);
        if (status->ok()) *status = fn(key, value);
        return status->ok() ? FieldStep::kRead : FieldStep::kStop;
      });
}

// Decodes one Feature message.
RF_WIRE_INLINE Status DecodeFeature(std::span<const std::byte> bytes, FeatureView* out) {
  *out = FeatureView{};
  return ForEachField(bytes, "Feature", [&](WireReader& r, uint32_t field, uint32_t wt, Status*) {
    if (field < 1 || field > 3) return FieldStep::kSkip;
    std::span<const std::byte> list;
    if (!ReadLengthDelimitedField(r, wt, "list field has the wrong wire type", &list)) {
      return FieldStep::kMalformed;
    }
    *out = FeatureView{static_cast<ListKind>(field), list};  // oneof: the last one wins
    return FieldStep::kRead;
  });
}

// Calls fn(key, value) for each map entry of a serialized Features message, with the entry's
// serialized Feature undecoded (callers that want few keys decode only those).
template <typename Fn>
Status VisitFeatureEntries(std::span<const std::byte> features, Fn&& fn) {
  return VisitMapField(features, 1, "Features", "Features map entry", fn);
}

// Calls fn(key, FeatureView) for each map entry of a serialized Features message.
template <typename Fn>
Status VisitFeatures(std::span<const std::byte> features, Fn&& fn) {
  return VisitFeatureEntries(features,
                             [&](std::string_view key, std::span<const std::byte> value) -> Status {
                               FeatureView feature;
                               RF_RETURN_IF_ERROR(DecodeFeature(value, &feature));
                               fn(key, feature);
                               return Status::OK();
                             });
}

// Calls fn(features) for every `features` (field 1) of a serialized Example.
template <typename Fn>
Status VisitExampleFeatures(std::span<const std::byte> example, Fn&& fn) {
  return ForEachField(
      example, "Example", [&](WireReader& r, uint32_t field, uint32_t wt, Status* status) {
        if (field != 1) return FieldStep::kSkip;
        std::span<const std::byte> features;
        if (!ReadLengthDelimitedField(r, wt, "features has the wrong wire type", &features)) {
          return FieldStep::kMalformed;
        }
        *status = fn(features);
        return status->ok() ? FieldStep::kRead : FieldStep::kStop;
      });
}

// Calls on_value(span) for each bytes value of a BytesList.
template <typename Fn>
Status VisitBytes(std::span<const std::byte> list, Fn&& on_value) {
  return ForEachField(list, "BytesList", [&](WireReader& r, uint32_t field, uint32_t wt, Status*) {
    if (field != 1) return FieldStep::kSkip;
    std::span<const std::byte> v;
    if (!ReadLengthDelimitedField(r, wt, "value has the wrong wire type", &v)) {
      return FieldStep::kMalformed;
    }
    on_value(v);
    return FieldStep::kRead;
  });
}

// Calls on_packed(span of 4n bytes) / on_value(float) for a FloatList's values, in order.
template <typename Packed, typename One>
Status VisitFloats(std::span<const std::byte> list, Packed&& on_packed, One&& on_value) {
  return ForEachField(list, "FloatList", [&](WireReader& r, uint32_t field, uint32_t wt, Status*) {
    if (field != 1) return FieldStep::kSkip;
    if (wt == kLengthDelimited) {
      std::span<const std::byte> packed;
      if (!r.ReadLengthDelimited(&packed)) return FieldStep::kMalformed;
      if (packed.size() % 4 != 0) {
        r.Fail("packed floats not a multiple of 4 bytes");
        return FieldStep::kMalformed;
      }
      on_packed(packed);
    } else if (wt == kFixed32) {
      uint32_t bits;
      if (!r.ReadFixed32(&bits)) return FieldStep::kMalformed;
      float f;
      std::memcpy(&f, &bits, 4);
      on_value(f);
    } else {
      r.FailAtTag("value has the wrong wire type");
      return FieldStep::kMalformed;
    }
    return FieldStep::kRead;
  });
}

// Calls on_value(int64) for each value of an Int64List.
template <typename Fn>
Status VisitInt64s(std::span<const std::byte> list, Fn&& on_value) {
  return ForEachField(list, "Int64List",
                      [&](WireReader& r, uint32_t field, uint32_t wt, Status* status) {
                        if (field != 1) return FieldStep::kSkip;
                        if (wt == kLengthDelimited) {
                          std::span<const std::byte> packed;
                          if (!r.ReadLengthDelimited(&packed)) return FieldStep::kMalformed;
                          WireReader p(packed);
                          while (!p.done()) {
                            uint64_t v;
                            if (!p.ReadVarint(&v)) {
                              *status = Malformed("Int64List packed values", p);
                              return FieldStep::kStop;
                            }
                            on_value(static_cast<int64_t>(v));
                          }
                        } else if (wt == kVarint) {
                          uint64_t v;
                          if (!r.ReadVarint(&v)) return FieldStep::kMalformed;
                          on_value(static_cast<int64_t>(v));
                        } else {
                          r.FailAtTag("value has the wrong wire type");
                          return FieldStep::kMalformed;
                        }
                        return FieldStep::kRead;
                      });
}

// Calls fn(key, feature_list_bytes) for each entry of the `feature_lists` (field 2) of a
// serialized SequenceExample.
template <typename Fn>
Status VisitFeatureLists(std::span<const std::byte> sequence_example, Fn&& fn) {
  return ForEachField(
      sequence_example, "SequenceExample",
      [&](WireReader& r, uint32_t field, uint32_t wt, Status* status) {
        if (field == 1 && wt != kLengthDelimited) {
          r.FailAtTag("context has the wrong wire type");
          return FieldStep::kMalformed;
        }
        if (field != 2) return FieldStep::kSkip;
        std::span<const std::byte> lists;
        if (!ReadLengthDelimitedField(r, wt, "feature_lists has the wrong wire type", &lists)) {
          return FieldStep::kMalformed;
        }
        *status = VisitMapField(lists, 1, "FeatureLists", "FeatureLists map entry",
                                [&](std::string_view key, std::span<const std::byte> value) {
                                  fn(key, value);
                                  return Status::OK();
                                });
        return status->ok() ? FieldStep::kRead : FieldStep::kStop;
      });
}

// Calls fn(FeatureView) for each step (Feature) of a serialized FeatureList.
template <typename Fn>
Status VisitSteps(std::span<const std::byte> feature_list, Fn&& fn) {
  return ForEachField(
      feature_list, "FeatureList", [&](WireReader& r, uint32_t field, uint32_t wt, Status* status) {
        if (field != 1) return FieldStep::kSkip;
        std::span<const std::byte> f;
        if (!ReadLengthDelimitedField(r, wt, "feature has the wrong wire type", &f)) {
          return FieldStep::kMalformed;
        }
        FeatureView view;
        *status = DecodeFeature(f, &view);
        if (status->ok()) *status = fn(view);
        return status->ok() ? FieldStep::kRead : FieldStep::kStop;
      });
}

// Number of values, validating the list.
inline Result<size_t> CountListValues(const FeatureView& f) {
  size_t n = 0;
  Status s;
  switch (f.kind) {
    case ListKind::kNone:
      return size_t{0};
    case ListKind::kBytes:
      s = VisitBytes(f.list, [&](std::span<const std::byte>) { ++n; });
      break;
    case ListKind::kFloat:
      s = VisitFloats(
          f.list, [&](std::span<const std::byte> p) { n += p.size() / 4; }, [&](float) { ++n; });
      break;
    case ListKind::kInt64:
      s = VisitInt64s(f.list, [&](int64_t) { ++n; });
      break;
  }
  if (!s.ok()) return s;
  return n;
}

}  // namespace recordflow::example::internal
