// The map stage: a native function on an element (a record or a batch).
#include "stage.h"

namespace recordflow::pipeline::internal {

Status MapElement(const stage::Map& m, Element& e, int threads,
                  const std::atomic<bool>* cancelled) {
  MapContext context;
  context.threads = threads;
  context.cancel_flag = cancelled;
  Status s = m.fn(e, context);
  if (!s.ok()) return Status(s.code(), "map '" + m.name + "': " + s.message());
  return Status();
}

}  // namespace recordflow::pipeline::internal
