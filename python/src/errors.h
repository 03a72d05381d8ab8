// The one place where recordflow Status values become Python exceptions.
#pragma once

#include <nanobind/nanobind.h>

#include <utility>

#include "recordflow/core/status.h"

namespace recordflow::python {

// Raises the recordflow.errors class for `status.code()` with its message.
// Requires the GIL. `status` must not be OK.
[[noreturn]] void ThrowStatus(const Status& status);

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) ThrowStatus(result.status());
  return std::move(result).value();
}

// Runs `call` with the GIL released and returns what it returns (a Status or a Result, to pass
// to ThrowIfError / ValueOrThrow once the GIL is held again): how a binding makes a blocking
// call into the library. `call` must not touch Python objects. The result is built before the
// GIL is taken back, and its destructor (which may free large buffers) runs with the GIL held.
template <typename Call>
auto WithoutGil(Call&& call) {
  nanobind::gil_scoped_release release;
  return std::forward<Call>(call)();
}

// As ThrowStatus, but kInvalidArgument becomes recordflow.SchemaError (a feature missing or of
// the wrong type, or a bad spec).
[[noreturn]] void ThrowSchemaStatus(const Status& status);

void RegisterFormat(nanobind::module_& m);
void RegisterExample(nanobind::module_& m);
void RegisterPipeline(nanobind::module_& m);
void RegisterConvert(nanobind::module_& m);
void RegisterVision(nanobind::module_& m);
void RegisterReshard(nanobind::module_& m);
void RegisterIo(nanobind::module_& m);
void RegisterDiagnose(nanobind::module_& m);
void RegisterAugment(nanobind::module_& m);

}  // namespace recordflow::python
