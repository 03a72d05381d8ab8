// The map stage: a native function on an element (a record or a batch).
#include <utility>

#include "../executor_internal.h"
#include "stage.h"

namespace recordflow::pipeline::internal {
namespace {

// Sets what MapThreads() and MapCancelled() answer on this thread for one map call.
class MapCallScope {
 public:
  MapCallScope(int threads, const std::atomic<bool>* cancelled)
      : threads_(std::exchange(map_threads_on_this_thread, threads)),
        cancelled_(std::exchange(map_cancelled_on_this_thread, cancelled)) {}
  ~MapCallScope() {
    map_threads_on_this_thread = threads_;
    map_cancelled_on_this_thread = cancelled_;
  }
  MapCallScope(const MapCallScope&) = delete;
  MapCallScope& operator=(const MapCallScope&) = delete;

 private:
  int threads_;
  const std::atomic<bool>* cancelled_;
};


}  // namespace

Status MapElement(const stage::Map& m, Element& e, int threads,
                  const std::atomic<bool>* cancelled) {
  const MapCallScope call(threads, cancelled);
  Status s = m.fn(e);
  if (!s.ok()) return Status(s.code(), "map '" + m.name + "': " + s.message());
  return Status();
}

}  // namespace recordflow::pipeline::internal
