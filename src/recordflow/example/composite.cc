#include "recordflow/example/composite.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace recordflow::example {
namespace {

using Kind = RowPartition::Kind;

// Checks that a column's splits describe `units` units inside its values: the inputs come from
// the parsers, but this is a public entry point and must not read out of bounds.
Status CheckColumn(std::string_view what, std::span<const int64_t> splits, size_t units,
                   size_t values) {
  if (splits.size() != units + 1) {
    return InvalidArgumentError(std::string(what) + ": " + std::to_string(splits.size()) +
                                " splits for " + std::to_string(units) + " units");
  }
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0 || static_cast<uint64_t>(splits[i]) > values ||
        (i > 0 && splits[i] < splits[i - 1])) {
      return InvalidArgumentError(std::string(what) + ": splits out of order or range at " +
                                  std::to_string(i));
    }
  }
  return Status();
}

std::string PartitionName(const RowPartition& p) {
  if (p.kind == Kind::kUniformRowLength) {
    return "partition UniformRowLength(" + std::to_string(p.uniform_length) + ")";
  }
  return "partition feature '" + p.key + "'";
}

// One unit's row splits for partition `p` over `n` inner items, starting at 0, into `s`.
// Returns why they cannot be built, or an empty string. `v` is the unit's partition values.
std::string UnitSplits(const RowPartition& p, std::span<const int64_t> v, int64_t n,
                       int64_t max_value_row_id, std::vector<int64_t>* s) {
  s->clear();
  const std::string items = std::to_string(n);
  switch (p.kind) {
    case Kind::kUniformRowLength: {
      const int64_t len = p.uniform_length;
      if (len == 0) {
        if (n != 0) return items + " items cannot form rows of length 0";
        s->push_back(0);
        return {};
      }
      if (n % len != 0) {
        return items + " items are not a multiple of the uniform row length " + std::to_string(len);
      }
      for (int64_t i = 0; i <= n; i += len) s->push_back(i);
      return {};
    }
    case Kind::kRowSplits:
      if (v.empty()) {
        s->push_back(0);  // no splits feature: no rows
      } else if (v[0] != 0) {
        return "row splits must start with 0";
      } else {
        s->assign(v.begin(), v.end());
      }
      break;
    case Kind::kRowLengths: {
      s->push_back(0);
      int64_t total = 0;
      for (int64_t len : v) {
        if (len < 0) return "row lengths must be >= 0";
        if (__builtin_add_overflow(total, len, &total)) {
          return "the rows cover more than " + std::to_string(std::numeric_limits<int64_t>::max()) +
                 " items, but there are " + items;
        }
        s->push_back(total);
      }
      break;
    }
    case Kind::kRowStarts:
      if (!v.empty() && v[0] != 0) return "row starts must start with 0";
      s->assign(v.begin(), v.end());
      s->push_back(n);
      break;
    case Kind::kRowLimits:
      s->push_back(0);
      s->insert(s->end(), v.begin(), v.end());
      break;
    case Kind::kValueRowIds: {
      if (static_cast<int64_t>(v.size()) != n) {
        return std::to_string(v.size()) + " value row ids for " + items + " items";
      }
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] < 0 || (i > 0 && v[i] < v[i - 1])) {
          return "value row ids must be >= 0 and non-decreasing";
        }
      }
      if (!v.empty() && v.back() >= max_value_row_id) {
        return "value row id " + std::to_string(v.back()) + " is at or above the safety limit " +
               std::to_string(max_value_row_id);
      }
      const int64_t rows = v.empty() ? 0 : v.back() + 1;
      s->push_back(0);
      size_t j = 0;
      for (int64_t r = 0; r < rows; ++r) {
        while (j < v.size() && v[j] == r) ++j;
        s->push_back(static_cast<int64_t>(j));
      }
      break;
    }
  }
  for (size_t i = 1; i < s->size(); ++i) {
    if ((*s)[i] < (*s)[i - 1]) return "rows must not end before they start";
  }
  if (s->back() != n) {
    return "the rows cover " + std::to_string(s->back()) + " items, but there are " + items;
  }
  return {};
}

}  // namespace

Status BuildRaggedRowSplits(std::string_view key, std::span<const RowPartition> partitions,
                            std::span<const int64_t> value_splits,
                            std::span<const Int64Rows> partition_columns,
                            const CompositeOptions& options,
                            std::vector<std::vector<int64_t>>* levels) {
  const std::string k(key);
  if (value_splits.empty()) return InvalidArgumentError("feature '" + k + "': no value splits");
  const size_t units = value_splits.size() - 1;
  // Which column each partition reads (-1: none).
  std::vector<int> column_of(partitions.size(), -1);
  size_t next = 0;
  for (size_t p = 0; p < partitions.size(); ++p) {
    if (partitions[p].kind == Kind::kUniformRowLength) {
      if (partitions[p].uniform_length < 0) {
        return InvalidArgumentError("feature '" + k + "': " + PartitionName(partitions[p]) +
                                    " must be >= 0");
      }
      continue;
    }
    if (next == partition_columns.size()) {
      return InvalidArgumentError("feature '" + k + "': fewer partition columns than partitions");
    }
    const Int64Rows& c = partition_columns[next];
    RF_RETURN_IF_ERROR(CheckColumn("feature '" + k + "': " + PartitionName(partitions[p]), c.splits,
                                   units, c.values.size()));
    column_of[p] = static_cast<int>(next++);
  }
  if (next != partition_columns.size()) {
    return InvalidArgumentError("feature '" + k + "': more partition columns than partitions");
  }
  if (value_splits.front() < 0 || value_splits.back() < value_splits.front()) {
    return InvalidArgumentError("feature '" + k + "': value splits out of order");
  }
  const std::span<const int64_t> records = options.record_splits;
  if (!records.empty()) {
    RF_RETURN_IF_ERROR(
        CheckColumn("feature list '" + k + "': record splits", records, records.size() - 1, units));
    if (records.back() != static_cast<int64_t>(units)) {
      return InvalidArgumentError("feature list '" + k + "': record splits do not cover the steps");
    }
  }
  auto where = [&](size_t u) {
    if (records.empty()) {
      return "feature '" + k + "' of record " + std::to_string(options.first_record_index + u);
    }
    const auto it = std::upper_bound(records.begin(), records.end(), static_cast<int64_t>(u));
    const size_t r = static_cast<size_t>(it - records.begin()) - 1;
    return "feature list '" + k + "' of record " + std::to_string(options.first_record_index + r) +
           ", step " + std::to_string(static_cast<int64_t>(u) - records[r]);
  };

  levels->assign(partitions.size() + 1, {});
  (*levels)[0].reserve(units + 1);
  (*levels)[0].push_back(0);
  for (size_t p = 0; p < partitions.size(); ++p) (*levels)[p + 1].push_back(0);
  std::vector<std::vector<int64_t>> scratch(partitions.size());
  for (size_t u = 0; u < units; ++u) {
    const int64_t count = value_splits[u + 1] - value_splits[u];
    if (count < 0) return InvalidArgumentError(where(u) + ": value splits out of order");
    int64_t n = count;
    for (size_t p = partitions.size(); p-- > 0;) {
      std::span<const int64_t> v;
      if (column_of[p] >= 0) {
        const Int64Rows& c = partition_columns[static_cast<size_t>(column_of[p])];
        v = c.values.subspan(static_cast<size_t>(c.splits[u]),
                             static_cast<size_t>(c.splits[u + 1] - c.splits[u]));
      }
      std::string why = UnitSplits(partitions[p], v, n, options.max_value_row_id, &scratch[p]);
      if (!why.empty()) {
        return InvalidArgumentError(where(u) + ": " + PartitionName(partitions[p]) + ": " + why);
      }
      n = static_cast<int64_t>(scratch[p].size()) - 1;
    }
    (*levels)[0].push_back((*levels)[0].back() + n);
    for (size_t p = 0; p < partitions.size(); ++p) {
      std::vector<int64_t>& level = (*levels)[p + 1];
      const int64_t base = level.back();
      for (size_t i = 1; i < scratch[p].size(); ++i) level.push_back(base + scratch[p][i]);
    }
  }
  return Status();
}

Status BuildSparseIndices(const SparseSpec& spec, std::span<const Int64Rows> index_columns,
                          std::span<const int64_t> value_splits, uint64_t first_record_index,
                          SparseIndices* out) {
  const std::string& key = spec.key;
  if (spec.index_keys.empty() || spec.index_keys.size() != spec.sizes.size() ||
      index_columns.size() != spec.index_keys.size()) {
    return InvalidArgumentError("feature '" + key +
                                "': SparseFeature needs one size and one column per index key");
  }
  if (value_splits.empty()) return InvalidArgumentError("feature '" + key + "': no value splits");
  const size_t batch = value_splits.size() - 1;
  const int64_t first_value = value_splits.front();
  if (first_value < 0) return InvalidArgumentError("feature '" + key + "': value splits negative");
  for (size_t r = 0; r < batch; ++r) {
    if (value_splits[r + 1] < value_splits[r]) {
      return InvalidArgumentError("feature '" + key + "': value splits out of order");
    }
  }
  const size_t dims = spec.index_keys.size();
  for (size_t d = 0; d < dims; ++d) {
    const Int64Rows& c = index_columns[d];
    const std::string& ik = spec.index_keys[d];
    RF_RETURN_IF_ERROR(CheckColumn("index feature '" + ik + "' (SparseFeature '" + key + "')",
                                   c.splits, batch, c.values.size()));
    auto where = [&](size_t r) {
      return "feature '" + ik + "' of record " + std::to_string(first_record_index + r) + ": ";
    };
    for (size_t r = 0; r < batch; ++r) {
      const int64_t ni = c.splits[r + 1] - c.splits[r];
      const int64_t nv = value_splits[r + 1] - value_splits[r];
      if (ni != nv) {
        return InvalidArgumentError(where(r) + std::to_string(ni) +
                                    " indices, but value feature '" + spec.value_key + "' has " +
                                    std::to_string(nv) + " values (SparseFeature '" + key + "')");
      }
    }
    if (spec.sizes[d] < 0) {
      return InvalidArgumentError("feature '" + key + "': SparseFeature sizes must be >= 0");
    }
    for (size_t r = 0; r < batch; ++r) {
      for (int64_t j = c.splits[r]; j < c.splits[r + 1]; ++j) {
        const int64_t v = c.values[static_cast<size_t>(j)];
        if (v < 0 || v >= spec.sizes[d]) {
          return InvalidArgumentError(where(r) + "index " + std::to_string(v) + " is outside [0, " +
                                      std::to_string(spec.sizes[d]) + ") (SparseFeature '" + key +
                                      "')");
        }
      }
    }
  }

  const size_t width = dims + 1;
  const size_t entries = static_cast<size_t>(value_splits.back() - first_value);
  out->indices.assign(entries * width, 0);
  out->order.clear();
  // The index tuple of record r's local entry i, dimension d.
  auto index_at = [&](size_t d, size_t r, int64_t i) {
    return index_columns[d].values[static_cast<size_t>(index_columns[d].splits[r] + i)];
  };
  auto less = [&](size_t r, int64_t a, int64_t b) {
    for (size_t d = 0; d < dims; ++d) {
      const int64_t x = index_at(d, r, a);
      const int64_t y = index_at(d, r, b);
      if (x != y) return x < y;
    }
    return false;
  };
  std::vector<int64_t> local;
  for (size_t r = 0; r < batch; ++r) {
    const int64_t n = value_splits[r + 1] - value_splits[r];
    const size_t base = static_cast<size_t>(value_splits[r] - first_value);
    local.resize(static_cast<size_t>(n));
    std::iota(local.begin(), local.end(), int64_t{0});
    if (!spec.already_sorted) {
      bool sorted = true;
      for (int64_t i = 1; i < n && sorted; ++i) sorted = !less(r, i, i - 1);
      if (!sorted) {
        std::stable_sort(local.begin(), local.end(),
                         [&](int64_t a, int64_t b) { return less(r, a, b); });
        if (out->order.empty()) {
          // Entries so far kept their value order.
          out->order.resize(entries);
          std::iota(out->order.begin(), out->order.end(), first_value);
        }
      }
    }
    for (size_t i = 0; i < local.size(); ++i) {
      int64_t* row = &out->indices[(base + i) * width];
      row[0] = static_cast<int64_t>(r);
      for (size_t d = 0; d < dims; ++d) row[d + 1] = index_at(d, r, local[i]);
      if (!out->order.empty()) out->order[base + i] = value_splits[r] + local[i];
    }
  }
  return Status();
}

}  // namespace recordflow::example
