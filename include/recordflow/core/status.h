// Status and Result<T>: how every fallible call in recordflow reports failure.
//
// The vocabulary is fixed. Each code means one thing, so that callers (and the Python and CLI
// layers that map codes to exceptions and exit statuses) can act on it:
//
//   kOk                  success.
//   kCancelled           the operation was stopped on request (shutdown, iterator destroyed).
//   kInvalidArgument     a bad option, spec or argument from the caller; or a required feature
//                        missing from a record. Retrying with the same input fails again.
//   kNotFound            a file or key does not exist.
//   kAlreadyExists       the target exists and the call does not overwrite.
//   kPermissionDenied    the OS refused access.
//   kResourceExhausted   a safety limit was hit (max record size, memory budget, disk full).
//   kFailedPrecondition  the object is in the wrong state for the call (write after close).
//   kOutOfRange          an index past the end (record number beyond the index file).
//   kUnimplemented       a feature not built in this binary.
//   kInternal            a broken invariant: a bug in recordflow.
//   kIOError             the OS reported an I/O failure (EIO, ENOSPC is kResourceExhausted).
//   kDataLoss            corrupt or truncated bytes: bad CRC, bad framing, bad compression.
//
// Messages carry context: path, byte offset, record index and feature key where they apply.
//
// Thread safety: Status and Result are values; const methods may be called concurrently.
#pragma once

#include <cassert>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace recordflow {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kInvalidArgument = 3,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kIOError = 14,
  kDataLoss = 15,
};

// "DataLoss", "NotFound", ... : stable names used in messages, JSON output and tests.
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return ok() ? StatusCode::kOk : state_->code; }
  // Empty for OK.
  const std::string& message() const;
  // "DataLoss: <message>" or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>". OK stays OK.
  Status WithContext(std::string_view prefix) const;

  // Marks an ignored status as deliberately ignored.
  void IgnoreError() const {}

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

inline bool operator==(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}

Status CancelledError(std::string message);
Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status PermissionDeniedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status OutOfRangeError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);
Status IOError(std::string message);
Status DataLossError(std::string message);

// Maps an errno value from a failed system call on `path` to a Status with the right code:
// ENOENT -> kNotFound, EACCES/EPERM -> kPermissionDenied, ENOSPC/EDQUOT/EFBIG ->
// kResourceExhausted, anything else -> kIOError.
Status ErrnoToStatus(int errno_value, std::string_view what, std::string_view path);

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : data_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(data_).ok() && "Result constructed from an OK Status");
    if (std::get<Status>(data_).ok()) data_ = InternalError("Result constructed from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const& {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(data_);
  }
  Status status() && { return ok() ? Status() : std::get<Status>(std::move(data_)); }

  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> data_;
};

}  // namespace recordflow

#define RF_INTERNAL_CONCAT2(a, b) a##b
#define RF_INTERNAL_CONCAT(a, b) RF_INTERNAL_CONCAT2(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define RF_RETURN_IF_ERROR(expr)              \
  do {                                        \
    ::recordflow::Status rf_status_ = (expr); \
    if (!rf_status_.ok()) return rf_status_;  \
  } while (false)

// `RF_ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value or returns the error.
#define RF_ASSIGN_OR_RETURN(lhs, expr) \
  RF_INTERNAL_ASSIGN_OR_RETURN(RF_INTERNAL_CONCAT(rf_result_, __LINE__), lhs, expr)
#define RF_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()
