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

// Decodes one Feature message.
RF_WIRE_INLINE Status DecodeFeature(std::span<const std::byte> bytes, FeatureView* out) {
  WireReader r(bytes);
  *out = FeatureView{};
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed("Feature", r);
    if (field >= 1 && field <= 3) {
      if (wt != kLengthDelimited) {
        r.FailAtTag("list field has the wrong wire type");
        return Malformed("Feature", r);
      }
      std::span<const std::byte> list;
      if (!r.ReadLengthDelimited(&list)) return Malformed("Feature", r);
      *out = FeatureView{static_cast<ListKind>(field), list};  // oneof: the last one wins
    } else if (!r.Skip(field, wt)) {
      return Malformed("Feature", r);
    }
  }
  return Status::OK();
}

// Calls fn(key, value) for each map entry of a serialized Features message, with the entry's
// serialized Feature undecoded (callers that want few keys decode only those).
template <typename Fn>
Status VisitFeatureEntries(std::span<const std::byte> features, Fn&& fn) {
  WireReader r(features);
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed("Features", r);
    if (field != 1) {
      if (!r.Skip(field, wt)) return Malformed("Features", r);
      continue;
    }
    std::span<const std::byte> entry;
    if (wt != kLengthDelimited) {
      r.FailAtTag("map entry has the wrong wire type");
      return Malformed("Features", r);
    }
    if (!r.ReadLengthDelimited(&entry)) return Malformed("Features", r);
    WireReader e(entry);
    std::string_view key;
    std::span<const std::byte> value;  // empty: a Feature with no list set
    while (!e.done()) {
      uint32_t f, t;
      if (!e.ReadTag(&f, &t)) return Malformed("Features map entry", e);
      if ((f == 1 || f == 2) && t == kLengthDelimited) {
        std::span<const std::byte> s;
        if (!e.ReadLengthDelimited(&s)) return Malformed("Features map entry", e);
        if (f == 1) {
          key = std::string_view(reinterpret_cast<const char*>(s.data()), s.size());
        } else {
          value = s;  // a repeated value field: the last one wins
        }
      } else if (f == 1 || f == 2) {
        e.FailAtTag("key or value has the wrong wire type");
        return Malformed("Features map entry", e);
      } else if (!e.Skip(f, t)) {
        return Malformed("Features map entry", e);
      }
    }
    RF_RETURN_IF_ERROR(fn(key, value));
  }
  return Status::OK();
}

// Calls fn(key, FeatureView) for each map entry of a serialized Features message.
template <typename Fn>
Status VisitFeatures(std::span<const std::byte> features, Fn&& fn) {
  return VisitFeatureEntries(features, [&](std::string_view key,
                                           std::span<const std::byte> value) -> Status {
    FeatureView feature;
    RF_RETURN_IF_ERROR(DecodeFeature(value, &feature));
    fn(key, feature);
    return Status::OK();
  });
}

// Calls fn(features) for every `features` (field 1) of a serialized Example.
template <typename Fn>
Status VisitExampleFeatures(std::span<const std::byte> example, Fn&& fn) {
  WireReader r(example);
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed("Example", r);
    if (field == 1) {
      if (wt != kLengthDelimited) {
        r.FailAtTag("features has the wrong wire type");
        return Malformed("Example", r);
      }
      std::span<const std::byte> features;
      if (!r.ReadLengthDelimited(&features)) return Malformed("Example", r);
      RF_RETURN_IF_ERROR(fn(features));
    } else if (!r.Skip(field, wt)) {
      return Malformed("Example", r);
    }
  }
  return Status::OK();
}

// Calls on_value(span) for each bytes value of a BytesList.
template <typename Fn>
Status VisitBytes(std::span<const std::byte> list, Fn&& on_value) {
  WireReader r(list);
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed("BytesList", r);
    if (field == 1) {
      if (wt != kLengthDelimited) {
        r.FailAtTag("value has the wrong wire type");
        return Malformed("BytesList", r);
      }
      std::span<const std::byte> v;
      if (!r.ReadLengthDelimited(&v)) return Malformed("BytesList", r);
      on_value(v);
    } else if (!r.Skip(field, wt)) {
      return Malformed("BytesList", r);
    }
  }
  return Status::OK();
}

// Calls on_packed(span of 4n bytes) / on_value(float) for a FloatList's values, in order.
template <typename Packed, typename One>
Status VisitFloats(std::span<const std::byte> list, Packed&& on_packed, One&& on_value) {
  WireReader r(list);
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed("FloatList", r);
    if (field == 1 && wt == kLengthDelimited) {
      std::span<const std::byte> packed;
      if (!r.ReadLengthDelimited(&packed)) return Malformed("FloatList", r);
      if (packed.size() % 4 != 0) {
        r.Fail("packed floats not a multiple of 4 bytes");
        return Malformed("FloatList", r);
      }
      on_packed(packed);
    } else if (field == 1 && wt == kFixed32) {
      uint32_t bits;
      if (!r.ReadFixed32(&bits)) return Malformed("FloatList", r);
      float f;
      std::memcpy(&f, &bits, 4);
      on_value(f);
    } else if (field == 1) {
      r.FailAtTag("value has the wrong wire type");
      return Malformed("FloatList", r);
    } else if (!r.Skip(field, wt)) {
      return Malformed("FloatList", r);
    }
  }
  return Status::OK();
}

// Calls on_value(int64) for each value of an Int64List.
template <typename Fn>
Status VisitInt64s(std::span<const std::byte> list, Fn&& on_value) {
  WireReader r(list);
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed("Int64List", r);
    if (field == 1 && wt == kLengthDelimited) {
      std::span<const std::byte> packed;
      if (!r.ReadLengthDelimited(&packed)) return Malformed("Int64List", r);
      WireReader p(packed);
      while (!p.done()) {
        uint64_t v;
        if (!p.ReadVarint(&v)) return Malformed("Int64List packed values", p);
        on_value(static_cast<int64_t>(v));
      }
    } else if (field == 1 && wt == kVarint) {
      uint64_t v;
      if (!r.ReadVarint(&v)) return Malformed("Int64List", r);
      on_value(static_cast<int64_t>(v));
    } else if (field == 1) {
      r.FailAtTag("value has the wrong wire type");
      return Malformed("Int64List", r);
    } else if (!r.Skip(field, wt)) {
      return Malformed("Int64List", r);
    }
  }
  return Status::OK();
}

// Calls fn(key, feature_list_bytes) for each entry of the `feature_lists` (field 2) of a
// serialized SequenceExample.
template <typename Fn>
Status VisitFeatureLists(std::span<const std::byte> sequence_example, Fn&& fn) {
  WireReader r(sequence_example);
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed("SequenceExample", r);
    if (field != 2) {
      if (field == 1 && wt != kLengthDelimited) {
        r.FailAtTag("context has the wrong wire type");
        return Malformed("SequenceExample", r);
      }
      if (!r.Skip(field, wt)) return Malformed("SequenceExample", r);
      continue;
    }
    std::span<const std::byte> lists;
    if (wt != kLengthDelimited) {
      r.FailAtTag("feature_lists has the wrong wire type");
      return Malformed("SequenceExample", r);
    }
    if (!r.ReadLengthDelimited(&lists)) return Malformed("SequenceExample", r);
    WireReader l(lists);
    while (!l.done()) {
      uint32_t f, t;
      if (!l.ReadTag(&f, &t)) return Malformed("FeatureLists", l);
      if (f != 1) {
        if (!l.Skip(f, t)) return Malformed("FeatureLists", l);
        continue;
      }
      std::span<const std::byte> entry;
      if (t != kLengthDelimited) {
        l.FailAtTag("map entry has the wrong wire type");
        return Malformed("FeatureLists", l);
      }
      if (!l.ReadLengthDelimited(&entry)) return Malformed("FeatureLists", l);
      WireReader e(entry);
      std::string_view key;
      std::span<const std::byte> value;
      while (!e.done()) {
        uint32_t ef, et;
        if (!e.ReadTag(&ef, &et)) return Malformed("FeatureLists map entry", e);
        if ((ef == 1 || ef == 2) && et == kLengthDelimited) {
          std::span<const std::byte> s;
          if (!e.ReadLengthDelimited(&s)) return Malformed("FeatureLists map entry", e);
          if (ef == 1) {
            key = std::string_view(reinterpret_cast<const char*>(s.data()), s.size());
          } else {
            value = s;
          }
        } else if (ef == 1 || ef == 2) {
          e.FailAtTag("key or value has the wrong wire type");
          return Malformed("FeatureLists map entry", e);
        } else if (!e.Skip(ef, et)) {
          return Malformed("FeatureLists map entry", e);
        }
      }
      fn(key, value);
    }
  }
  return Status::OK();
}

// Calls fn(FeatureView) for each step (Feature) of a serialized FeatureList.
template <typename Fn>
Status VisitSteps(std::span<const std::byte> feature_list, Fn&& fn) {
  WireReader r(feature_list);
  while (!r.done()) {
    uint32_t field, wt;
    if (!r.ReadTag(&field, &wt)) return Malformed("FeatureList", r);
    if (field == 1 && wt == kLengthDelimited) {
      std::span<const std::byte> f;
      if (!r.ReadLengthDelimited(&f)) return Malformed("FeatureList", r);
      FeatureView view;
      RF_RETURN_IF_ERROR(DecodeFeature(f, &view));
      RF_RETURN_IF_ERROR(fn(view));
    } else if (field == 1) {
      r.FailAtTag("feature has the wrong wire type");
      return Malformed("FeatureList", r);
    } else if (!r.Skip(field, wt)) {
      return Malformed("FeatureList", r);
    }
  }
  return Status::OK();
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
