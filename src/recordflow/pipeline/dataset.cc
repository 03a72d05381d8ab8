// Dataset: building the chain of Nodes, and compiling it into a Plan for the iterator.
#include "recordflow/pipeline/dataset.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

#include "recordflow/io/filesystem.h"
#include "recordflow/io/glob.h"

#include "executor_internal.h"
#include "record_stream.h"

namespace recordflow::pipeline {

using internal::Node;
using K = Node::Kind;

namespace {

namespace stage = internal::stage;

std::shared_ptr<const Node> Derive(const std::shared_ptr<const Node>& input, Node::Params params) {
  return std::make_shared<const Node>(std::move(params), input);
}

// The inputs of FromFiles: patterns expanded (io::ExpandGlob); a plain path must exist, so that
// a typo is reported when the Dataset is made rather than midway through the first epoch.
Result<std::vector<std::string>> ExpandPaths(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const std::string& p : patterns) {
    if (!io::IsGlobPattern(p) && !io::IsRemotePath(p)) {
      std::error_code ec;
      if (!std::filesystem::exists(p, ec)) return NotFoundError("no such file: '" + p + "'");
    }
    RF_ASSIGN_OR_RETURN(std::vector<std::string> matched, io::ExpandGlob(p));
    out.insert(out.end(), matched.begin(), matched.end());
  }
  return out;
}

std::vector<const Node*> Chain(const Node* last) {
  std::vector<const Node*> nodes;
  for (const Node* n = last; n != nullptr; n = n->input.get()) nodes.push_back(n);
  std::reverse(nodes.begin(), nodes.end());
  return nodes;
}

std::string Join(const std::vector<const Node*>& nodes) {
  std::string s;
  for (const Node* n : nodes) s += (s.empty() ? "" : " -> ") + n->Describe();
  return s;
}

// Ops that may run on a whole batch instead of on each record before it: a parse (parsing a
// batch gives what parsing each record and concatenating would) and maps declared
// element-wise (MapOptions::elementwise).
bool RunsPerBatchAlike(const Node* n) {
  if (n->kind() == K::kParse) return true;
  const auto* map = n->get_if<stage::Map>();
  return map != nullptr && map->options.elementwise;
}

// The static rewrites (docs/pipeline.md, "Static optimisation"). Only ops that give the same
// elements either way move, and they move within the executor, whose checkpoints save the
// input records of every unit: the state does not depend on where an op runs, so checkpoints
// of the written and the rewritten chain are interchangeable.
void Optimize(internal::Plan& plan, bool optimize) {
  if (plan.batch_size == 0 || plan.pre_batch.empty()) return;
  // The trailing run of per-batch-alike ops before the batch runs after it instead: one call
  // per batch instead of one per record, and no copy of each record's outputs into the batch.
  size_t keep = plan.pre_batch.size();
  while (keep > 0 && RunsPerBatchAlike(plan.pre_batch[keep - 1])) --keep;
  // Without the optimizer only the parse-only case moves (it always has).
  if (!optimize && keep != 0) return;
  if (!optimize && !std::all_of(plan.pre_batch.begin(), plan.pre_batch.end(),
                                [](const Node* n) { return n->kind() == K::kParse; })) {
    return;
  }
  if (keep == plan.pre_batch.size()) return;
  const std::vector<const Node*> moved(plan.pre_batch.begin() + static_cast<ptrdiff_t>(keep),
                                       plan.pre_batch.end());
  plan.post_batch.insert(plan.post_batch.begin(), moved.begin(), moved.end());
  plan.pre_batch.resize(keep);
  plan.rewrites.push_back(Join(moved) + " -> batch(" + std::to_string(plan.batch_size) +
                          ") runs as batch(" + std::to_string(plan.batch_size) + ") -> " +
                          Join(moved) + " (element-wise)");
}

// Splits the chain into the record stream and the executor's work, then applies the static
// rewrites (when `optimize`).
Result<internal::Plan> Compile(const std::shared_ptr<const Node>& last, bool optimize) {
  internal::Plan plan;
  plan.last = last;
  plan.nodes = Chain(last.get());
  size_t i = 0;
  std::vector<const Node*> stream_nodes;
  for (; i < plan.nodes.size(); ++i) {
    const Node* n = plan.nodes[i];
    if (!internal::IsRecordStage(n->kind())) break;
    stream_nodes.push_back(n);
  }
  plan.stream_end = stream_nodes.back();
  bool batched = false;
  bool repeated = false;
  std::vector<const Node*> tail;  // repeat / take / skip / prefetch after batch/parse/map
  const Node* batch_node = nullptr;
  for (; i < plan.nodes.size(); ++i) {
    const Node* n = plan.nodes[i];
    switch (n->kind()) {
      case K::kParse:
        (batched ? plan.post_batch : plan.pre_batch).push_back(n);
        break;
      case K::kMap:
        (batched ? plan.post_batch : plan.pre_batch).push_back(n);
        if (const int p = n->as<stage::Map>().options.num_parallel; p != kAutotune) {
          plan.num_parallel = p;
        }
        break;
      case K::kBatch:
        if (batched) return UnimplementedError("batch of batches is not supported");
        batched = true;
        batch_node = n;
        plan.batch_size = n->as<stage::Batch>().batch_size;
        plan.drop_remainder = n->as<stage::Batch>().drop_remainder;
        break;
      case K::kPrefetch:
        plan.prefetch = n->as<stage::Prefetch>().buffer_size;
        tail.push_back(n);
        break;
      case K::kRepeat:
        if (repeated) return UnimplementedError("two repeats after batch/parse/map");
        if (plan.take >= 0 || plan.skip > 0) {
          return UnimplementedError(
              "take/skip before repeat after batch/parse/map: put them before the batch");
        }
        repeated = true;
        plan.tail_repeat = std::max<int64_t>(n->as<stage::Repeat>().count, -1);
        tail.push_back(n);
        break;
      case K::kTake:
        plan.take = plan.take < 0 ? n->as<stage::Take>().count
                                  : std::min(plan.take, n->as<stage::Take>().count);
        tail.push_back(n);
        break;
      case K::kSkip:
        if (plan.take >= 0) return UnimplementedError("skip after take after batch/parse/map");
        plan.skip += n->as<stage::Skip>().count;
        tail.push_back(n);
        break;
      default:
        return UnimplementedError(n->Describe() +
                                  " after batch/parse/map is not supported: "
                                  "apply it to the records before them");
    }
  }
  Optimize(plan, optimize);
  for (const Node* n : plan.post_batch) {
    const auto* map = n->get_if<stage::Map>();
    if (map != nullptr && map->options.splits_batches) plan.one_batch_at_a_time = true;
  }
  for (const Node* n : plan.nodes) {
    const auto* interleave = n->get_if<stage::Interleave>();
    if (interleave != nullptr && !interleave->options.deterministic) plan.deterministic = false;
  }
  std::string exec = Join(plan.pre_batch);
  if (plan.batch_size > 0)
    exec += (exec.empty() ? "" : " -> ") + std::string("batch(") + std::to_string(plan.batch_size) +
            ")";
  if (!plan.post_batch.empty()) exec += (exec.empty() ? "" : " -> ") + Join(plan.post_batch);
  plan.stream_description = Join(stream_nodes);
  plan.executor_description = exec.empty() ? "pass-through" : exec;
  // The whole chain as it runs: the batch stage with its own description (drop_remainder).
  std::vector<const Node*> run = stream_nodes;
  run.insert(run.end(), plan.pre_batch.begin(), plan.pre_batch.end());
  if (batch_node != nullptr) run.push_back(batch_node);
  run.insert(run.end(), plan.post_batch.begin(), plan.post_batch.end());
  run.insert(run.end(), tail.begin(), tail.end());
  plan.run_description = Join(run);
  // The fingerprint is that of the chain as written (not as rewritten): a checkpoint restores
  // into the same Dataset whether or not the optimizer ran. Same description and parameters ->
  // same fingerprint (std::hash of a string is stable within one build, which is what
  // checkpoints are checked against).
  std::string all;
  for (const Node* n : plan.nodes) all += n->Describe() + "|";
  plan.fingerprint = std::hash<std::string>()(all);
  return plan;
}

}  // namespace

}  // namespace recordflow::pipeline

namespace recordflow::pipeline {

Result<Dataset> Dataset::FromFiles(std::vector<std::string> paths, FilesOptions options) {
  if (paths.empty()) return InvalidArgumentError("from_files: no paths given");
  RF_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandPaths(paths));
  return Dataset(Derive(nullptr, stage::Files{std::move(files), options}));
}

Dataset Dataset::FromRecords(std::vector<std::string> records) {
  return Dataset(Derive(nullptr, stage::Memory{std::make_shared<const std::vector<std::string>>(
                                     std::move(records))}));
}

Result<Dataset> Dataset::Shard(int num_shards, int index) const {
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    return InvalidArgumentError("shard(" + std::to_string(num_shards) + ", " +
                                std::to_string(index) +
                                "): need num_shards >= 1 and 0 <= index < num_shards");
  }
  return Dataset(Derive(node_, stage::Shard{num_shards, index}));
}

namespace {
bool OnFiles(const Node* n) {
  return n->kind() == K::kFiles ||
         (n->kind() == K::kShard && n->input && n->input->kind() == K::kFiles);
}
}  // namespace

Result<Dataset> Dataset::Interleave(InterleaveOptions options) const {
  if (!OnFiles(node_.get())) {
    return InvalidArgumentError(
        "interleave applies to files: use it right after from_files (or shard)");
  }
  if ((options.cycle_length < 1 && options.cycle_length != kAutotune) || options.block_length < 1 ||
      (options.num_parallel < 0 && options.num_parallel != kAutotune)) {
    return InvalidArgumentError("interleave: cycle_length and block_length must be >= 1");
  }
  return Dataset(Derive(node_, stage::Interleave{options}));
}

Result<Dataset> Dataset::Shuffle(ShuffleOptions options) const {
  if (options.buffer_size < 1) return InvalidArgumentError("shuffle: buffer_size must be >= 1");
  return Dataset(Derive(node_, stage::Shuffle{options}));
}

Result<Dataset> Dataset::GlobalShuffle(std::optional<uint64_t> seed, bool reshuffle) const {
  if (!OnFiles(node_.get())) {
    return InvalidArgumentError(
        "global_shuffle reads records by index: use it right after from_files (or shard)");
  }
  const auto& files =
      (node_->kind() == K::kFiles ? node_.get() : node_->input.get())->as<stage::Files>();
  for (const std::string& f : files.files) {
    if (files.options.compression.value_or(format::CompressionFromPath(f)) !=
        format::Compression::kNone) {
      return InvalidArgumentError("global_shuffle needs uncompressed files; '" + f +
                                  "' is compressed");
    }
  }
  return Dataset(Derive(node_, stage::GlobalShuffle{seed, reshuffle}));
}

Dataset Dataset::Repeat(int64_t count) const {
  return Dataset(Derive(node_, stage::Repeat{count < 0 ? -1 : count}));
}

Dataset Dataset::Take(int64_t count) const { return Dataset(Derive(node_, stage::Take{count})); }

Dataset Dataset::Skip(int64_t count) const {
  return Dataset(Derive(node_, stage::Skip{std::max<int64_t>(count, 0)}));
}

Result<Dataset> Dataset::Cache(std::string path) const {
  return Dataset(Derive(node_, stage::Cache{std::move(path)}));
}

Result<Dataset> Dataset::Parse(std::vector<example::FeatureSpec> specs, bool bytes_as_views) const {
  RF_ASSIGN_OR_RETURN(example::ExampleParser parser,
                      example::ExampleParser::Create(std::move(specs)));
  return Dataset(
      Derive(node_, stage::Parse{std::make_shared<const example::ExampleParser>(std::move(parser)),
                                 bytes_as_views}));
}

Result<Dataset> Dataset::Map(MapFn fn, std::string name, int num_parallel,
                             bool splits_batches) const {
  MapOptions options;
  options.num_parallel = num_parallel;
  options.splits_batches = splits_batches;
  return Map(std::move(fn), std::move(name), options);
}

Result<Dataset> Dataset::Map(MapFn fn, std::string name, MapOptions options) const {
  if (!fn) return InvalidArgumentError("map: no function");
  if (options.num_parallel < 1 && options.num_parallel != kAutotune) {
    return InvalidArgumentError("map: num_parallel must be >= 1 or AUTOTUNE");
  }
  return Dataset(Derive(node_, stage::Map{std::move(fn), std::move(name), options}));
}

Result<Dataset> Dataset::Map(const MapOp& op, int num_parallel) const {
  MapOptions options;
  options.num_parallel = num_parallel;
  options.splits_batches = op.splits_batches;
  options.elementwise = op.elementwise;
  return Map(op.fn, op.name, options);
}

Result<Dataset> Dataset::Batch(size_t batch_size, bool drop_remainder) const {
  if (batch_size < 1) return InvalidArgumentError("batch: batch_size must be >= 1");
  return Dataset(Derive(node_, stage::Batch{batch_size, drop_remainder}));
}

Result<Dataset> Dataset::Prefetch(int buffer_size) const {
  if (buffer_size < 0 && buffer_size != kAutotune) {
    return InvalidArgumentError("prefetch: buffer_size must be >= 0 or AUTOTUNE");
  }
  return Dataset(Derive(node_, stage::Prefetch{buffer_size}));
}

Result<bool> Iterator::GetNextFor(Element* out, std::chrono::nanoseconds /*timeout*/,
                                  bool* timed_out) {
  *timed_out = false;
  return GetNext(out);
}

int EffectiveThreads(const IteratorOptions& options, int cores) {
  int threads = std::max(cores, 1);
  if (options.max_threads > 0) threads = std::min(threads, options.max_threads);
  if (options.max_cpu_fraction > 0) {
    const int share = static_cast<int>(options.max_cpu_fraction * std::max(cores, 1) + 1e-9);
    threads = std::min(threads, std::max(share, 1));
  }
  return threads;
}

namespace {
Status CheckIteratorOptions(const IteratorOptions& o) {
  if (o.max_threads < 0) {
    return InvalidArgumentError("max_threads must be >= 0 (0: no cap), not " +
                                std::to_string(o.max_threads));
  }
  if (!(o.max_cpu_fraction >= 0 && o.max_cpu_fraction <= 1)) {
    return InvalidArgumentError("max_cpu_fraction must be in [0, 1] (0: no cap), not " +
                                std::to_string(o.max_cpu_fraction));
  }
  return Status();
}
}  // namespace

Result<std::unique_ptr<Iterator>> Dataset::MakeIterator(IteratorOptions options) const {
  RF_RETURN_IF_ERROR(CheckIteratorOptions(options));
  RF_ASSIGN_OR_RETURN(internal::Plan plan, Compile(node_, options.optimize));
  auto it = std::make_unique<internal::PipelineIterator>(std::move(plan), options);
  RF_RETURN_IF_ERROR(it->Start(internal::SeedTable{}, nullptr));
  return std::unique_ptr<Iterator>(std::move(it));
}

Result<std::unique_ptr<Iterator>> Dataset::Restore(std::span<const std::byte> state,
                                                   IteratorOptions options) const {
  RF_RETURN_IF_ERROR(CheckIteratorOptions(options));
  RF_ASSIGN_OR_RETURN(internal::Plan plan, Compile(node_, options.optimize));
  auto it = std::make_unique<internal::PipelineIterator>(std::move(plan), options);
  internal::StateReader reader(
      std::string_view(reinterpret_cast<const char*>(state.data()), state.size()));
  RF_RETURN_IF_ERROR(it->Start(internal::SeedTable{}, &reader));
  return std::unique_ptr<Iterator>(std::move(it));
}

std::string Dataset::DebugString() const {
  Result<internal::Plan> plan = Compile(node_, IteratorOptions{}.optimize);
  if (!plan.ok()) return Join(Chain(node_.get()));
  std::string s = plan->run_description;
  if (plan->rewrites.empty()) return s;
  s += "  [rewrites: ";
  for (size_t i = 0; i < plan->rewrites.size(); ++i) s += (i > 0 ? "; " : "") + plan->rewrites[i];
  return s + "]";
}

}  // namespace recordflow::pipeline
