#include "errors.h"

#include <string>

namespace nb = nanobind;

namespace recordflow::python {

namespace {

[[noreturn]] void Raise(const Status& status, bool schema) {
  nb::object cls;
  try {
    nb::module_ errors = nb::module_::import_("recordflow.errors");
    if (schema && status.code() == StatusCode::kInvalidArgument) {
      cls = errors.attr("SchemaError");
    } else {
      std::string_view name = StatusCodeName(status.code());
      cls = errors.attr("_BY_CODE").attr("get")(nb::str(name.data(), name.size()));
    }
  } catch (const nb::python_error&) {
    cls = nb::none();
  }
  PyObject* type = cls.is_none() ? PyExc_RuntimeError : cls.ptr();
  PyErr_SetString(type, status.message().c_str());
  throw nb::python_error();
}

}  // namespace

void ThrowStatus(const Status& status) { Raise(status, false); }
void ThrowSchemaStatus(const Status& status) { Raise(status, true); }

}  // namespace recordflow::python
