#include "recordflow/core/status.h"

#include <cerrno>
#include <cstring>

#include "recordflow/core/enum_names.h"

namespace recordflow {

namespace {

constexpr EnumName<StatusCode> kStatusCodeNames[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kCancelled, "Cancelled"},
    {StatusCode::kInvalidArgument, "InvalidArgument"},
    {StatusCode::kNotFound, "NotFound"},
    {StatusCode::kAlreadyExists, "AlreadyExists"},
    {StatusCode::kPermissionDenied, "PermissionDenied"},
    {StatusCode::kResourceExhausted, "ResourceExhausted"},
    {StatusCode::kFailedPrecondition, "FailedPrecondition"},
    {StatusCode::kOutOfRange, "OutOfRange"},
    {StatusCode::kUnimplemented, "Unimplemented"},
    {StatusCode::kInternal, "Internal"},
    {StatusCode::kIOError, "IOError"},
    {StatusCode::kDataLoss, "DataLoss"},
};

}  // namespace

std::string_view StatusCodeName(StatusCode code) {
  return NameOf(kStatusCodeNames, code, "Unknown");
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_unique<State>(State{code, std::move(message)});
  }
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  return *this;
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return ok() ? kEmpty : state_->message;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code()));
  out += ": ";
  out += state_->message;
  return out;
}

Status Status::WithContext(std::string_view prefix) const {
  if (ok()) return Status();
  std::string msg(prefix);
  msg += ": ";
  msg += state_->message;
  return Status(code(), std::move(msg));
}

Status CancelledError(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
Status AlreadyExistsError(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
Status PermissionDeniedError(std::string m) {
  return Status(StatusCode::kPermissionDenied, std::move(m));
}
Status ResourceExhaustedError(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
Status OutOfRangeError(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
Status UnimplementedError(std::string m) {
  return Status(StatusCode::kUnimplemented, std::move(m));
}
Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
Status IOError(std::string m) { return Status(StatusCode::kIOError, std::move(m)); }
Status DataLossError(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }

Status ErrnoToStatus(int errno_value, std::string_view what, std::string_view path) {
  std::string msg(what);
  msg += " '";
  msg += path;
  msg += "': ";
  msg += std::strerror(errno_value);
  switch (errno_value) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(std::move(msg));
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDeniedError(std::move(msg));
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case ENOMEM:
      return ResourceExhaustedError(std::move(msg));
    case EISDIR:
      return InvalidArgumentError(std::move(msg));
    default:
      return IOError(std::move(msg));
  }
}

}  // namespace recordflow
