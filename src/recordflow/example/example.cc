#include "recordflow/example/example.h"

#include <cstring>

#include "example_internal.h"
#include "recordflow/core/enum_names.h"

namespace recordflow::example {

using internal::AppendTag;
using internal::AppendVarint;
using internal::kLengthDelimited;

bool IsFeatureDType(DType dtype) {
  return dtype == DType::kInt64 || dtype == DType::kFloat32 || dtype == DType::kBytes;
}

Result<DType> ParseDType(std::string_view name) {
  Result<DType> dtype = ParseAnyDType(name);
  if (!dtype.ok() || !IsFeatureDType(*dtype)) {
    return InvalidArgumentError("unknown dtype '" + std::string(name) +
                                "': expected \"int64\", \"float32\" or \"bytes\"");
  }
  return dtype;
}

namespace {

constexpr EnumName<ListKind> kListKindNames[] = {
    {ListKind::kNone, "none"},
    {ListKind::kBytes, "bytes"},
    {ListKind::kFloat, "float32"},
    {ListKind::kInt64, "int64"},
};

}  // namespace

std::string_view ListKindName(ListKind kind) { return NameOf(kListKindNames, kind, "?"); }

ListKind ListKindFor(DType dtype) {
  switch (dtype) {
    case DType::kInt64:
      return ListKind::kInt64;
    case DType::kFloat32:
      return ListKind::kFloat;
    case DType::kBytes:
      return ListKind::kBytes;
    default:  // not a feature type
      return ListKind::kNone;
  }
}

Status ForEachFeature(std::span<const std::byte> features, const FeatureCallback& fn) {
  return internal::VisitFeatures(features, fn);
}

Status ExampleFeatures(std::span<const std::byte> example,
                       std::vector<std::span<const std::byte>>* features) {
  features->clear();
  return internal::VisitExampleFeatures(example, [&](std::span<const std::byte> f) {
    features->push_back(f);
    return Status::OK();
  });
}

Result<size_t> CountValues(const FeatureView& feature) {
  return internal::CountListValues(feature);
}

namespace {

// kInvalidArgument unless `feature` holds `kind` values or none.
Status CheckListKind(const FeatureView& feature, ListKind kind) {
  if (feature.kind == kind || feature.kind == ListKind::kNone) return Status::OK();
  return InvalidArgumentError("feature holds " + std::string(ListKindName(feature.kind)) +
                              " values, not " + std::string(ListKindName(kind)));
}

// The caller sized `out` from the feature's own count, so a different count read back is a bug.
Status CheckDecodedCount(size_t expected, size_t found, std::string_view what) {
  if (found == expected) return Status::OK();
  return InternalError("expected " + std::to_string(expected) + " " + std::string(what) +
                       " values, found " + std::to_string(found));
}

}  // namespace

Status DecodeInt64s(const FeatureView& feature, std::span<int64_t> out) {
  RF_RETURN_IF_ERROR(CheckListKind(feature, ListKind::kInt64));
  size_t i = 0;
  if (feature.kind == ListKind::kInt64) {
    RF_RETURN_IF_ERROR(internal::VisitInt64s(feature.list, [&](int64_t v) {
      if (i < out.size()) out[i] = v;
      ++i;
    }));
  }
  return CheckDecodedCount(out.size(), i, "int64");
}

Status DecodeFloats(const FeatureView& feature, std::span<float> out) {
  RF_RETURN_IF_ERROR(CheckListKind(feature, ListKind::kFloat));
  size_t i = 0;
  if (feature.kind == ListKind::kFloat) {
    RF_RETURN_IF_ERROR(internal::VisitFloats(
        feature.list,
        [&](std::span<const std::byte> packed) {
          size_t n = packed.size() / 4;
          if (n > 0 && i + n <= out.size())
            std::memcpy(out.data() + i, packed.data(), packed.size());
          i += n;
        },
        [&](float v) {
          if (i < out.size()) out[i] = v;
          ++i;
        }));
  }
  return CheckDecodedCount(out.size(), i, "float");
}

Status ForEachBytes(const FeatureView& feature,
                    const std::function<void(std::span<const std::byte>)>& fn) {
  if (feature.kind == ListKind::kNone) return Status::OK();
  RF_RETURN_IF_ERROR(CheckListKind(feature, ListKind::kBytes));
  return internal::VisitBytes(feature.list, fn);
}

// ---- owning representation ----

size_t Feature::size() const {
  switch (kind) {
    case ListKind::kNone:
      return 0;
    case ListKind::kBytes:
      return bytes.size();
    case ListKind::kFloat:
      return floats.size();
    case ListKind::kInt64:
      return int64s.size();
  }
  return 0;
}

bool Feature::operator==(const Feature& other) const {
  if (kind != other.kind) return false;
  switch (kind) {
    case ListKind::kNone:
      return true;
    case ListKind::kBytes:
      return bytes == other.bytes;
    case ListKind::kInt64:
      return int64s == other.int64s;
    case ListKind::kFloat:
      // Bitwise, so NaNs compare equal to themselves.
      return floats.size() == other.floats.size() &&
             (floats.empty() ||
              std::memcmp(floats.data(), other.floats.data(), floats.size() * sizeof(float)) == 0);
  }
  return false;
}

namespace {

void AppendLengthDelimited(std::string* out, uint32_t field, std::string_view bytes) {
  AppendTag(out, field, kLengthDelimited);
  AppendVarint(out, bytes.size());
  out->append(bytes);
}

std::string SerializeFeature(const Feature& f) {
  std::string list;
  switch (f.kind) {
    case ListKind::kNone:
      return "";
    case ListKind::kBytes:
      for (const auto& v : f.bytes) AppendLengthDelimited(&list, 1, v);
      break;
    case ListKind::kFloat:
      if (!f.floats.empty()) {
        AppendLengthDelimited(
            &list, 1,
            std::string_view(reinterpret_cast<const char*>(f.floats.data()), f.floats.size() * 4));
      }
      break;
    case ListKind::kInt64:
      if (!f.int64s.empty()) {
        std::string packed;
        for (int64_t v : f.int64s) AppendVarint(&packed, static_cast<uint64_t>(v));
        AppendLengthDelimited(&list, 1, packed);
      }
      break;
  }
  std::string out;
  AppendLengthDelimited(&out, static_cast<uint32_t>(f.kind), list);
  return out;
}

// A map<string, V> entry: key (field 1) and value (field 2), both always written, as protobuf
// writes map entries.
void AppendMapEntry(std::string* out, uint32_t field, std::string_view key,
                    std::string_view value) {
  std::string entry;
  AppendLengthDelimited(&entry, 1, key);
  AppendLengthDelimited(&entry, 2, value);
  AppendLengthDelimited(out, field, entry);
}

std::string SerializeFeatures(const Features& features) {
  std::string out;
  for (const auto& [key, feature] : features)
    AppendMapEntry(&out, 1, key, SerializeFeature(feature));
  return out;
}

Result<Feature> ToFeature(const FeatureView& view) {
  Feature f;
  f.kind = view.kind;
  switch (view.kind) {
    case ListKind::kNone:
      break;
    case ListKind::kBytes:
      RF_RETURN_IF_ERROR(internal::VisitBytes(view.list, [&](std::span<const std::byte> v) {
        f.bytes.emplace_back(reinterpret_cast<const char*>(v.data()), v.size());
      }));
      break;
    case ListKind::kFloat: {
      RF_ASSIGN_OR_RETURN(size_t n, internal::CountListValues(view));
      f.floats.resize(n);
      RF_RETURN_IF_ERROR(DecodeFloats(view, f.floats));
      break;
    }
    case ListKind::kInt64: {
      RF_ASSIGN_OR_RETURN(size_t n, internal::CountListValues(view));
      f.int64s.resize(n);
      RF_RETURN_IF_ERROR(DecodeInt64s(view, f.int64s));
      break;
    }
  }
  return f;
}

Status ParseFeaturesInto(std::span<const std::byte> bytes, Features* out) {
  Status status;
  RF_RETURN_IF_ERROR(
      internal::VisitFeatures(bytes, [&](std::string_view key, const FeatureView& v) {
        if (!status.ok()) return;
        Result<Feature> f = ToFeature(v);
        if (!f.ok()) {
          status = f.status();
          return;
        }
        (*out)[std::string(key)] = std::move(f).value();
      }));
  return status;
}

}  // namespace

std::string SerializeExample(const Features& features) {
  std::string out;
  AppendLengthDelimited(&out, 1, SerializeFeatures(features));
  return out;
}

std::string SerializeSequenceExample(const SequenceExample& example) {
  std::string out;
  if (!example.context.empty()) AppendLengthDelimited(&out, 1, SerializeFeatures(example.context));
  if (!example.feature_lists.empty()) {
    std::string lists;
    for (const auto& [key, list] : example.feature_lists) {
      std::string feature_list;
      for (const auto& f : list) AppendLengthDelimited(&feature_list, 1, SerializeFeature(f));
      AppendMapEntry(&lists, 1, key, feature_list);
    }
    AppendLengthDelimited(&out, 2, lists);
  }
  return out;
}

Result<Features> ParseExample(std::span<const std::byte> example) {
  Features out;
  RF_RETURN_IF_ERROR(internal::VisitExampleFeatures(
      example, [&](std::span<const std::byte> f) { return ParseFeaturesInto(f, &out); }));
  return out;
}

Result<SequenceExample> ParseSequenceExample(std::span<const std::byte> bytes) {
  SequenceExample out;
  // The context has an Example's layout (field 1 holding Features).
  RF_RETURN_IF_ERROR(internal::VisitExampleFeatures(
      bytes, [&](std::span<const std::byte> f) { return ParseFeaturesInto(f, &out.context); }));
  Status status;
  RF_RETURN_IF_ERROR(internal::VisitFeatureLists(
      bytes, [&](std::string_view key, std::span<const std::byte> list) {
        if (!status.ok()) return;
        std::vector<Feature> steps;
        status = internal::VisitSteps(list, [&](const FeatureView& view) -> Status {
          RF_ASSIGN_OR_RETURN(Feature f, ToFeature(view));
          steps.push_back(std::move(f));
          return Status::OK();
        });
        out.feature_lists[std::string(key)] = std::move(steps);  // a repeated key: last wins
      }));
  RF_RETURN_IF_ERROR(status);
  return out;
}

}  // namespace recordflow::example
