// recordflow._core: the nanobind extension. Thin: argument checks, calls into the public C++
// API with the GIL released, and error mapping (errors.cc).
#include <nanobind/nanobind.h>

#include "errors.h"

NB_MODULE(_core, m) {
  m.doc() = "recordflow native core";
  recordflow::python::RegisterFormat(m);
}
