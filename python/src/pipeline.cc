// Bindings for the pipeline layer: Dataset builders and the Iterator. The C++ engine runs and
// waits without the GIL; elements are converted to NumPy with the GIL held, zero-copy for
// numeric columns.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "columns.h"
#include "errors.h"
#include "native_op.h"
#include "recordflow/io/glob.h"
#include "recordflow/pipeline/dataset.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace recordflow::python {
namespace {

using pipeline::Dataset;
using pipeline::Element;
using pipeline::Iterator;

// Builder errors: bad arguments are ValueError-like InvalidArgumentError (not SchemaError),
// except for parse specs.
Dataset Check(Result<Dataset> r) { return ValueOrThrow(std::move(r)); }

// A native map's dense tensor as a NumPy array sharing its buffer (bfloat16 as uint16 bits).
nb::object TensorToPython(pipeline::Tensor&& t) {
  using DT = pipeline::Tensor::DType;
  nb::dlpack::dtype dt;
  switch (t.dtype) {
    case DT::kUint8:
      dt = nb::dtype<uint8_t>();
      break;
    case DT::kFloat16:
      dt = {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
      break;
    case DT::kBFloat16:
      dt = nb::dtype<uint16_t>();
      break;
    case DT::kFloat32:
      dt = nb::dtype<float>();
      break;
    case DT::kInt64:
      dt = nb::dtype<int64_t>();
      break;
    case DT::kBytes:  // a dense Tensor never holds bytes (variable-length values are Columns)
      throw std::logic_error("native map produced a bytes Tensor '" + t.key + "'");
  }
  auto* owned = new std::shared_ptr<std::byte[]>(std::move(t.data));
  nb::capsule owner(owned,
                    [](void* p) noexcept { delete static_cast<std::shared_ptr<std::byte[]>*>(p); });
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  return nb::cast(
      nb::ndarray<nb::numpy>(owned->get(), shape.size(), shape.data(), owner, nullptr, dt));
}

// Wraps a native Iterator for Python.
//
// next() waits for the engine in 100 ms slices (Iterator::GetNextFor) with the GIL released
// and runs Python's signal handlers between slices: Ctrl-C lands within a slice even when the
// engine needs seconds for the next element. An interrupted next() has consumed nothing, so the
// iterator stays usable (and checkpointable) after a KeyboardInterrupt.
//
// Fork: a child process has none of the parent's threads, so an iterator inherited through
// fork() can neither run nor be destroyed there (its destructor would wait for threads that do
// not exist). In the child it raises FailedPreconditionError on use, and when dropped its native
// part is deliberately leaked (never joined or freed); new iterators work normally.
//
// Thread safety: one next() or checkpoint() at a time: a second thread's next() or checkpoint()
// meanwhile raises ValueError (as a running generator does); close() meanwhile takes effect when
// that call ends its current slice. busy_, close_requested_ and the ownership of it_ are guarded
// by mu_, not by the GIL: on free-threaded CPython (3.13t) calls from several threads run at
// once. mu_ (nb::ft_mutex: a PyMutex there, nothing on GIL builds, where the GIL guards them) is
// held only briefly, never across a wait for the engine; while busy_ is set, it_ stays in place,
// so the busy thread uses it without mu_.
class PyIterator {
 public:
  explicit PyIterator(std::unique_ptr<Iterator> it) : it_(std::move(it)), pid_(getpid()) {}

  ~PyIterator() {
    if (Forked()) {
      AbandonInChild();
    } else {
      Close();
    }
  }
  PyIterator(const PyIterator&) = delete;
  PyIterator& operator=(const PyIterator&) = delete;

  // (batched, parsed, payload, names) or None at the end. payload: list of columns when
  // parsed, else a list of bytes (one item when not batched). names: None, or (after a native
  // map that made tensors) the keys of payload: columns' keys, then tensors'.
  nb::object Next() {
    CheckNotForked();
    Element e;
    Result<bool> got = true;
    {
      BusyScope busy(this);
      if (!busy.claimed()) return nb::none();  // closed
      while (true) {
        bool timed_out = false;
        {
          nb::gil_scoped_release release;
          got = it_->GetNextFor(&e, std::chrono::milliseconds(100), &timed_out);
        }
        if (CloseRequested()) {  // close() from another thread during the wait
          busy.Release();
          Close();
          return nb::none();
        }
        if (!timed_out) break;
        // KeyboardInterrupt (or whatever a signal handler raised): nothing was consumed.
        if (PyErr_CheckSignals() != 0) throw nb::python_error();
      }
    }
    if (!got.ok()) ThrowSchemaStatus(got.status());
    if (!*got) return nb::none();
    nb::list payload;
    nb::object names = nb::none();
    if (e.parsed) {
      nb::list keys;
      for (auto& c : e.columns) {
        keys.append(nb::str(c.key.data(), c.key.size()));
        payload.append(ColumnToPython(std::move(c)));
      }
      for (auto& t : e.tensors) {
        keys.append(nb::str(t.key.data(), t.key.size()));
        payload.append(TensorToPython(std::move(t)));
      }
      if (!e.tensors.empty()) names = keys;
    } else {
      for (const std::string& r : e.records) payload.append(nb::bytes(r.data(), r.size()));
    }
    return nb::make_tuple(e.batched, e.parsed, payload, names);
  }

  nb::bytes Checkpoint() {
    CheckNotForked();
    Result<std::string> s = CancelledError("not run");
    {
      BusyScope busy(this);
      if (!busy.claimed()) ThrowStatus(FailedPreconditionError("the iterator is closed"));
      nb::gil_scoped_release release;
      s = it_->Checkpoint();
    }
    if (CloseRequested()) Close();  // close() from another thread during the checkpoint
    std::string state = ValueOrThrow(std::move(s));
    return nb::bytes(state.data(), state.size());
  }

  uint64_t Iteration() const {
    CheckNotForked();
    nb::ft_lock_guard lock(mu_);  // close() may not free it_ meanwhile
    CheckOpen();
    return it_->iteration();
  }

  nb::dict Stats() const {
    CheckNotForked();
    pipeline::PipelineStats s;
    {
      nb::ft_lock_guard lock(mu_);  // close() may not free it_ meanwhile
      CheckOpen();
      s = it_->stats();
    }
    nb::list stages;
    for (const auto& st : s.stages) {
      nb::dict d;
      d["name"] = st.name;
      d["elements"] = st.elements;
      d["bytes"] = st.bytes;
      d["busy_seconds"] = st.busy_seconds;
      d["wait_output_seconds"] = st.wait_output_seconds;
      d["buffer_fill"] = st.buffer_fill;
      d["buffer_size"] = st.buffer_size;
      d["parallelism"] = st.parallelism;
      stages.append(d);
    }
    nb::dict out;
    out["stages"] = stages;
    out["elements_delivered"] = s.elements_delivered;
    out["consumer_wait_seconds"] = s.consumer_wait_seconds;
    out["wall_seconds"] = s.wall_seconds;
    nb::dict memory;  // the memory account (memory_budget), bytes
    memory["budget"] = s.memory_budget;
    memory["held"] = s.memory_held;
    memory["peak"] = s.memory_peak;
    nb::dict by_stage;
    for (const auto& m : s.memory) {
      nb::dict d;
      d["held"] = m.held;
      d["peak"] = m.peak;
      by_stage[m.stage.c_str()] = d;
    }
    memory["stages"] = by_stage;
    out["memory"] = memory;
    out["report"] = s.Report();
    return out;
  }

  // Stops the pipeline: destroys the native iterator, which cancels and joins its threads.
  // Idempotent.
  void Close() {
    if (Forked()) {
      AbandonInChild();
      return;
    }
    std::unique_ptr<Iterator> it;
    {
      nb::ft_lock_guard lock(mu_);
      if (busy_) {  // another thread is in next(): it closes after its current slice
        close_requested_ = true;
        return;
      }
      it = std::move(it_);
    }
    if (!it) return;
    nb::gil_scoped_release release;
    it.reset();
  }

 private:
  // Marks a call that uses it_ with the GIL released at times. Claims busy_ atomically (check
  // and set under mu_): ValueError when another thread holds it; claimed() false when closed.
  class BusyScope {
   public:
    explicit BusyScope(PyIterator* self) : self_(self) {
      nb::ft_lock_guard lock(self_->mu_);
      if (self_->busy_) {
        self_ = nullptr;
        throw nb::value_error("the iterator is already running next() in another thread");
      }
      if (!self_->it_) {
        self_ = nullptr;
        return;
      }
      self_->busy_ = true;
    }
    ~BusyScope() { Release(); }
    BusyScope(const BusyScope&) = delete;
    BusyScope& operator=(const BusyScope&) = delete;
    bool claimed() const { return self_ != nullptr; }
    void Release() {
      if (self_ != nullptr) {
        nb::ft_lock_guard lock(self_->mu_);
        self_->busy_ = false;
      }
      self_ = nullptr;
    }

   private:
    PyIterator* self_;
  };

  bool Forked() const { return pid_ != getpid(); }

  void CheckNotForked() const {
    if (Forked()) {
      ThrowStatus(FailedPreconditionError(
          "this iterator was started in the parent process before fork(); start a new "
          "iterator in the child (iter(dataset))"));
    }
  }

  bool CloseRequested() const {
    nb::ft_lock_guard lock(mu_);
    return close_requested_;
  }

  void CheckOpen() const {
    CheckNotForked();
    if (!it_) ThrowStatus(FailedPreconditionError("the iterator is closed"));
  }

  // Leaks the native iterator on purpose: in a forked child its threads do not exist (nothing
  // could ever be joined) and its mutexes may have been held at the fork.
  void AbandonInChild() {
    if (it_) static_cast<void>(it_.release());
  }

  mutable nb::ft_mutex mu_;
  std::unique_ptr<Iterator> it_;  // replaced under mu_, and only while !busy_
  pid_t pid_;
  bool busy_ = false;             // guarded by mu_
  bool close_requested_ = false;  // guarded by mu_
};

std::optional<format::Compression> CompressionArg(const std::optional<std::string>& c) {
  if (!c || c->empty()) return std::nullopt;
  return ValueOrThrow(format::ParseCompression(*c));
}

}  // namespace

void RegisterPipeline(nb::module_& m) {
  m.def(
      "expand_globs",
      [](const std::vector<std::string>& paths) {
        // Listing a large or remote folder takes a while.
        return ValueOrThrow(WithoutGil([&] { return io::ExpandGlobs(paths); }));
      },
      "paths"_a,
      "Each path with every glob pattern replaced by its matches (sorted); plain paths kept.");
  m.attr("AUTOTUNE") = pipeline::kAutotune;
  nb::class_<PyIterator>(m, "PipelineIterator")
      .def("next", &PyIterator::Next)
      .def("checkpoint", &PyIterator::Checkpoint)
      .def("stats", &PyIterator::Stats)
      .def_prop_ro("iteration", &PyIterator::Iteration)
      .def("close", &PyIterator::Close);

  nb::class_<Dataset>(m, "PipelineDataset")
      .def_static(
          "from_files",
          [](std::vector<std::string> paths, std::optional<std::string> compression,
             bool shuffle_files, std::optional<uint64_t> seed, const std::string& on_corruption,
             bool verify_checksums) {
            pipeline::FilesOptions o;
            o.compression = CompressionArg(compression);
            o.shuffle_files = shuffle_files;
            o.seed = seed;
            o.on_corruption = ValueOrThrow(format::ParseCorruptionPolicy(on_corruption));
            o.verify_checksums = verify_checksums;
            // Opening may stat or list remote files; errors are raised with the GIL held.
            return Check(WithoutGil([&] { return Dataset::FromFiles(std::move(paths), o); }));
          },
          "paths"_a, "compression"_a = nb::none(), "shuffle_files"_a = false, "seed"_a = nb::none(),
          "on_corruption"_a = "raise", "verify_checksums"_a = true)
      .def_static(
          "from_records",
          [](nb::list records) {
            std::vector<std::string> out;
            for (nb::handle r : records) {
              char* data;
              Py_ssize_t size;
              if (PyBytes_AsStringAndSize(r.ptr(), &data, &size) != 0) throw nb::python_error();
              out.emplace_back(data, static_cast<size_t>(size));
            }
            return Dataset::FromRecords(std::move(out));
          },
          "records"_a)
      .def("shard", [](const Dataset& d, int n, int i) { return Check(d.Shard(n, i)); })
      .def("interleave",
           [](const Dataset& d, int cycle, int block, int parallel, bool deterministic) {
             return Check(d.Interleave({cycle, block, parallel, deterministic}));
           })
      .def("shuffle",
           [](const Dataset& d, size_t size, std::optional<uint64_t> seed, bool reshuffle) {
             return Check(d.Shuffle({size, seed, reshuffle}));
           })
      .def("global_shuffle", [](const Dataset& d, std::optional<uint64_t> seed,
                                bool reshuffle) { return Check(d.GlobalShuffle(seed, reshuffle)); })
      .def("repeat", [](const Dataset& d, int64_t count) { return d.Repeat(count); })
      .def("take", [](const Dataset& d, int64_t count) { return d.Take(count); })
      .def("skip", [](const Dataset& d, int64_t count) { return d.Skip(count); })
      .def("cache", [](const Dataset& d, const std::string& path) { return Check(d.Cache(path)); })
      .def("parse",
           [](const Dataset& d, nb::list specs) {
             // Values are copied once, into Python bytes objects, when the element is handed out.
             Result<Dataset> r = d.Parse(ToSpecs(specs), /*bytes_as_views=*/true);
             if (!r.ok()) ThrowSchemaStatus(r.status());
             return std::move(r).value();
           })
      .def("batch",
           [](const Dataset& d, size_t size, bool drop) { return Check(d.Batch(size, drop)); })
      .def("map_native",
           [](const Dataset& d, const NativeMapOp& op, int num_parallel) {
             return Check(d.Map(op.fn, op.name, {num_parallel, op.splits_batches, op.elementwise}));
           })
      .def("prefetch", [](const Dataset& d, int n) { return Check(d.Prefetch(n)); })
      .def("debug_string", &Dataset::DebugString)
      .def(
          "make_iterator",
          [](const Dataset& d, size_t memory_budget, uint64_t iteration, int max_threads,
             double max_cpu_fraction) {
            pipeline::IteratorOptions o;
            o.memory_budget = memory_budget;
            o.iteration = iteration;
            o.max_threads = max_threads;
            o.max_cpu_fraction = max_cpu_fraction;
            return new PyIterator(ValueOrThrow(WithoutGil([&] { return d.MakeIterator(o); })));
          },
          "memory_budget"_a = size_t{1} << 30, "iteration"_a = uint64_t{0}, "max_threads"_a = 0,
          "max_cpu_fraction"_a = 0.0, nb::rv_policy::take_ownership)
      .def(
          "restore",
          [](const Dataset& d, nb::bytes state, size_t memory_budget, int max_threads,
             double max_cpu_fraction) {
            pipeline::IteratorOptions o;
            o.memory_budget = memory_budget;
            o.max_threads = max_threads;
            o.max_cpu_fraction = max_cpu_fraction;
            std::string s(state.c_str(), state.size());
            return new PyIterator(ValueOrThrow(WithoutGil(
                [&] { return d.Restore(std::as_bytes(std::span(s.data(), s.size())), o); })));
          },
          "state"_a, "memory_budget"_a = size_t{1} << 30, "max_threads"_a = 0,
          "max_cpu_fraction"_a = 0.0, nb::rv_policy::take_ownership);
}

}  // namespace recordflow::python
