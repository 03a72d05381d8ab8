// ObjectLock: serializes the calls on one binding object across Python threads, on GIL builds
// (where a call that releases the GIL lets another thread's call in) and on free-threaded
// CPython (where calls run at once anyway).
#ifndef RECORDFLOW_PYTHON_SRC_OBJECT_LOCK_H_
#define RECORDFLOW_PYTHON_SRC_OBJECT_LOCK_H_

#include <nanobind/nanobind.h>

#include <mutex>

namespace recordflow::python {

// Holds `mu` for the scope. A contended lock is waited for with the GIL released (or, without
// a GIL, with the thread detached from the interpreter): the holder may need the GIL to finish,
// and a detached waiter never blocks the interpreter's stop-the-world pauses.
class ObjectLock {
 public:
  explicit ObjectLock(std::mutex& mu) : lock_(mu, std::try_to_lock) {
    if (!lock_.owns_lock()) {
      nanobind::gil_scoped_release release;
      lock_.lock();
    }
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace recordflow::python

#endif  // RECORDFLOW_PYTHON_SRC_OBJECT_LOCK_H_
