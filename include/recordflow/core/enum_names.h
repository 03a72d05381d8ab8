// The one way recordflow maps an enum to its names and back: each enum keeps a constexpr table of
// {value, name} rows beside its Name/Parse functions, and those functions look the table up here
// instead of each writing its own switch and if-chain. The CLI and the bindings call the
// library's Parse* functions, so every front end accepts the same names with the same errors.
//
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "recordflow/core/status.h"

namespace recordflow {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value`: its first row in `table`, or `fallback` when no row holds it (a value cast
// from an out-of-range integer).
template <typename E, size_t N>
constexpr std::string_view NameOf(const EnumName<E> (&table)[N], E value,
                                  std::string_view fallback = {}) {
  for (const EnumName<E>& row : table) {
    if (row.value == value) return row.name;
  }
  return fallback;
}

// The value of the first row named exactly `name`, or nullopt.
template <typename E, size_t N>
constexpr std::optional<E> FindByName(const EnumName<E> (&table)[N], std::string_view name) {
  for (const EnumName<E>& row : table) {
    if (row.name == name) return row.value;
  }
  return std::nullopt;
}

// The table's names for an error message, each between `quote`s, the last joined by " or ":
// NameList(t, "'") is "'a', 'b' or 'c'". Rows that repeat an earlier value (aliases) are left
// out, so the list says each accepted value once, in table order.
template <typename E, size_t N>
std::string NameList(const EnumName<E> (&table)[N], std::string_view quote) {
  std::string out;
  size_t listed = 0;
  size_t total = 0;
  for (size_t i = 0; i < N; ++i) {
    if (NameOf(table, table[i].value) == table[i].name) ++total;
  }
  for (size_t i = 0; i < N; ++i) {
    if (NameOf(table, table[i].value) != table[i].name) continue;  // an alias
    if (listed > 0) out += listed + 1 == total ? " or " : ", ";
    out += quote;
    out += table[i].name;
    out += quote;
    ++listed;
  }
  return out;
}

// The value named `name`, or kInvalidArgument "unknown <what> '<name>': expected 'a', 'b' or
// 'c'" (NameList of the table).
template <typename E, size_t N>
Result<E> ParseName(const EnumName<E> (&table)[N], std::string_view name, std::string_view what) {
  if (std::optional<E> value = FindByName(table, name)) return *value;
  std::string message = "unknown ";
  message += what;
  message += " '";
  message += name;
  message += "': expected ";
  message += NameList(table, "'");
  return InvalidArgumentError(std::move(message));
}

}  // namespace recordflow
