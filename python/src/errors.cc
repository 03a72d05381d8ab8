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
  // The whole message, NUL bytes and non-UTF-8 bytes (from keys, paths) included.
  const std::string& m = status.message();
  PyObject* text =
      PyUnicode_DecodeUTF8(m.data(), static_cast<Py_ssize_t>(m.size()), "backslashreplace");
  if (text == nullptr) throw nb::python_error();
  PyErr_SetObject(type, text);
  Py_DECREF(text);
  throw nb::python_error();
}

}  // namespace

void ThrowStatus(const Status& status) { Raise(status, false); }
void ThrowSchemaStatus(const Status& status) { Raise(status, true); }

}  // namespace recordflow::python
