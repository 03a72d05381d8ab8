// recordflow._core: the nanobind extension. Thin: argument checks, calls into the public C++
// API with the GIL released, and error mapping (errors.cc).
#include <nanobind/nanobind.h>

#include "errors.h"
#include "recordflow/version.h"

NB_MODULE(_core, m) {
  m.doc() = "recordflow native core";
  m.attr("__version__") = recordflow::kVersion;
  recordflow::python::RegisterFormat(m);
  recordflow::python::RegisterExample(m);
  recordflow::python::RegisterPipeline(m);
  recordflow::python::RegisterConvert(m);
  recordflow::python::RegisterVision(m);
  recordflow::python::RegisterReshard(m);
  recordflow::python::RegisterIo(m);
  recordflow::python::RegisterDiagnose(m);
  recordflow::python::RegisterAugment(m);
}
