#include "errors.h"

#include <string>

namespace nb = nanobind;

namespace recordflow::python {

void ThrowStatus(const Status& status) {
  nb::object cls;
  try {
    nb::object by_code = nb::module_::import_("recordflow.errors").attr("_BY_CODE");
    std::string_view name = StatusCodeName(status.code());
    cls = by_code.attr("get")(nb::str(name.data(), name.size()));
  } catch (const nb::python_error&) {
    cls = nb::none();
  }
  PyObject* type = cls.is_none() ? PyExc_RuntimeError : cls.ptr();
  PyErr_SetString(type, status.message().c_str());
  throw nb::python_error();
}

}  // namespace recordflow::python
