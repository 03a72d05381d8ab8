// Dataset: building the chain of Nodes, and compiling it into a Plan for the iterator.
#include "recordflow/pipeline/dataset.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>

#include "recordflow/io/glob.h"

#include "executor_internal.h"
#include "pipeline_internal.h"

namespace recordflow::pipeline {

using internal::Node;
using K = Node::Kind;

namespace {

std::shared_ptr<Node> Derive(const std::shared_ptr<const Node>& input, K kind) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->input = input;
  return n;
}

// The inputs of FromFiles: patterns expanded (io::ExpandGlob); a plain path must exist, so that
// a typo is reported when the Dataset is made rather than midway through the first epoch.
Result<std::vector<std::string>> ExpandPaths(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const std::string& p : patterns) {
    if (!io::IsGlobPattern(p)) {
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

std::string Seed(const std::optional<uint64_t>& s) { return s ? std::to_string(*s) : "random"; }
std::string Count(int n) { return n == kAutotune ? "autotune" : std::to_string(n); }

std::string Join(const std::vector<const Node*>& nodes) {
  std::string s;
  for (const Node* n : nodes) s += (s.empty() ? "" : " -> ") + n->Describe();
  return s;
}

// Ops that may run on a whole batch instead of on each record before it: a parse (parsing a
// batch gives what parsing each record and concatenating would) and maps declared
// element-wise (MapOptions::elementwise).
bool RunsPerBatchAlike(const Node* n) {
  return n->kind == K::kParse || (n->kind == K::kMap && n->elementwise);
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
                                [](const Node* n) { return n->kind == K::kParse; })) {
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
    if (!internal::IsRecordStage(n->kind)) break;
    stream_nodes.push_back(n);
  }
  plan.stream_end = stream_nodes.back();
  bool batched = false;
  bool repeated = false;
  std::vector<const Node*> tail;  // repeat / take / skip / prefetch after batch/parse/map
  const Node* batch_node = nullptr;
  for (; i < plan.nodes.size(); ++i) {
    const Node* n = plan.nodes[i];
    switch (n->kind) {
      case K::kParse:
        (batched ? plan.post_batch : plan.pre_batch).push_back(n);
        break;
      case K::kMap:
        (batched ? plan.post_batch : plan.pre_batch).push_back(n);
        if (n->num_parallel != kAutotune) plan.num_parallel = n->num_parallel;
        break;
      case K::kBatch:
        if (batched) return UnimplementedError("batch of batches is not supported");
        batched = true;
        batch_node = n;
        plan.batch_size = n->batch_size;
        plan.drop_remainder = n->drop_remainder;
        break;
      case K::kPrefetch:
        plan.prefetch = n->buffer_size;
        tail.push_back(n);
        break;
      case K::kRepeat:
        if (repeated) return UnimplementedError("two repeats after batch/parse/map");
        if (plan.take >= 0 || plan.skip > 0) {
          return UnimplementedError("take/skip before repeat after batch/parse/map: put them before the batch");
        }
        repeated = true;
        plan.tail_repeat = n->count < 0 ? -1 : n->count;
        tail.push_back(n);
        break;
      case K::kTake:
        plan.take = plan.take < 0 ? n->count : std::min(plan.take, n->count);
        tail.push_back(n);
        break;
      case K::kSkip:
        if (plan.take >= 0) return UnimplementedError("skip after take after batch/parse/map");
        plan.skip += n->count;
        tail.push_back(n);
        break;
      default:
        return UnimplementedError(n->Describe() + " after batch/parse/map is not supported: "
                                  "apply it to the records before them");
    }
  }
  Optimize(plan, optimize);
  for (const Node* n : plan.post_batch) {
    if (n->kind == K::kMap && n->splits_batches) plan.one_batch_at_a_time = true;
  }
  for (const Node* n : plan.nodes) {
    if (n->kind == K::kInterleave && !n->interleave.deterministic) plan.deterministic = false;
  }
  std::string exec = Join(plan.pre_batch);
  if (plan.batch_size > 0) exec += (exec.empty() ? "" : " -> ") + std::string("batch(") + std::to_string(plan.batch_size) + ")";
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

namespace recordflow::pipeline::internal {
using K = Node::Kind;
std::string Node::Describe() const {
  switch (kind) {
    case K::kFiles: {
      std::string s = "files(" + std::to_string(files.size());
      if (files_options.shuffle_files) s += ", shuffle_files, seed=" + Seed(files_options.seed);
      if (files_options.compression) s += ", " + std::string(format::CompressionName(*files_options.compression));
      return s + ")";
    }
    case K::kMemory:
      return "records(" + std::to_string(memory->size()) + ")";
    case K::kShard:
      return "shard(" + std::to_string(num_shards) + ", " + std::to_string(shard_index) + ")";
    case K::kInterleave:
      return "interleave(cycle=" + Count(interleave.cycle_length) + ", block=" +
             std::to_string(interleave.block_length) + ", parallel=" +
             Count(interleave.num_parallel) +
             (interleave.deterministic ? "" : ", nondeterministic") + ")";
    case K::kShuffle:
      return "shuffle(" + std::to_string(shuffle.buffer_size) + ", seed=" + Seed(shuffle.seed) +
             (shuffle.reshuffle_each_iteration ? "" : ", same order each epoch") + ")";
    case K::kGlobalShuffle:
      return "global_shuffle(seed=" + Seed(shuffle.seed) + ")";
    case K::kRepeat:
      return count < 0 ? "repeat" : "repeat(" + std::to_string(count) + ")";
    case K::kTake:
      return "take(" + std::to_string(count) + ")";
    case K::kSkip:
      return "skip(" + std::to_string(count) + ")";
    case K::kCache:
      return cache_path.empty() ? "cache(memory)" : "cache('" + cache_path + "')";
    case K::kParse: {
      std::string keys;
      for (const auto& s : parser->specs()) keys += (keys.empty() ? "" : ",") + s.key;
      return "parse(" + keys + ")";
    }
    case K::kMap:
      return "map(" + map_name + ")";
    case K::kBatch:
      return "batch(" + std::to_string(batch_size) + (drop_remainder ? ", drop_remainder" : "") + ")";
    case K::kPrefetch:
      return "prefetch(" + (buffer_size == kAutotune ? std::string("autotune") : std::to_string(buffer_size)) + ")";
  }
  return "?";
}
}  // namespace recordflow::pipeline::internal

namespace recordflow::pipeline {

Result<Dataset> Dataset::FromFiles(std::vector<std::string> paths, FilesOptions options) {
  if (paths.empty()) return InvalidArgumentError("from_files: no paths given");
  RF_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandPaths(paths));
  auto n = std::make_shared<Node>();
  n->kind = K::kFiles;
  n->files = std::move(files);
  n->files_options = options;
  return Dataset(std::move(n));
}

Dataset Dataset::FromRecords(std::vector<std::string> records) {
  auto n = std::make_shared<Node>();
  n->kind = K::kMemory;
  n->memory = std::make_shared<const std::vector<std::string>>(std::move(records));
  return Dataset(std::move(n));
}

Result<Dataset> Dataset::Shard(int num_shards, int index) const {
  if (num_shards < 1 || index < 0 || index >= num_shards) {
    return InvalidArgumentError("shard(" + std::to_string(num_shards) + ", " + std::to_string(index) +
                                "): need num_shards >= 1 and 0 <= index < num_shards");
  }
  auto n = Derive(node_, K::kShard);
  n->num_shards = num_shards;
  n->shard_index = index;
  return Dataset(std::move(n));
}

namespace {
bool OnFiles(const Node* n) {
  return n->kind == K::kFiles ||
         (n->kind == K::kShard && n->input && n->input->kind == K::kFiles);
}
}  // namespace

Result<Dataset> Dataset::Interleave(InterleaveOptions options) const {
  if (!OnFiles(node_.get())) {
    return InvalidArgumentError("interleave applies to files: use it right after from_files (or shard)");
  }
  if ((options.cycle_length < 1 && options.cycle_length != kAutotune) || options.block_length < 1 ||
      (options.num_parallel < 0 && options.num_parallel != kAutotune)) {
    return InvalidArgumentError("interleave: cycle_length and block_length must be >= 1");
  }
  auto n = Derive(node_, K::kInterleave);
  n->interleave = options;
  return Dataset(std::move(n));
}

Result<Dataset> Dataset::Shuffle(ShuffleOptions options) const {
  if (options.buffer_size < 1) return InvalidArgumentError("shuffle: buffer_size must be >= 1");
  auto n = Derive(node_, K::kShuffle);
  n->shuffle = options;
  return Dataset(std::move(n));
}

Result<Dataset> Dataset::GlobalShuffle(std::optional<uint64_t> seed, bool reshuffle) const {
  if (!OnFiles(node_.get())) {
    return InvalidArgumentError("global_shuffle reads records by index: use it right after from_files (or shard)");
  }
  const Node* files = node_->kind == K::kFiles ? node_.get() : node_->input.get();
  for (const std::string& f : files->files) {
    if (files->files_options.compression.value_or(format::CompressionFromPath(f)) != format::Compression::kNone) {
      return InvalidArgumentError("global_shuffle needs uncompressed files; '" + f + "' is compressed");
    }
  }
  auto n = Derive(node_, K::kGlobalShuffle);
  n->shuffle.seed = seed;
  n->shuffle.reshuffle_each_iteration = reshuffle;
  return Dataset(std::move(n));
}

Dataset Dataset::Repeat(int64_t count) const {
  auto n = Derive(node_, K::kRepeat);
  n->count = count < 0 ? -1 : count;
  return Dataset(std::move(n));
}

Dataset Dataset::Take(int64_t count) const {
  auto n = Derive(node_, K::kTake);
  n->count = count;
  return Dataset(std::move(n));
}

Dataset Dataset::Skip(int64_t count) const {
  auto n = Derive(node_, K::kSkip);
  n->count = std::max<int64_t>(count, 0);
  return Dataset(std::move(n));
}

Result<Dataset> Dataset::Cache(std::string path) const {
  auto n = Derive(node_, K::kCache);
  n->cache_path = std::move(path);
  return Dataset(std::move(n));
}

Result<Dataset> Dataset::Parse(std::vector<example::FeatureSpec> specs, bool bytes_as_views) const {
  RF_ASSIGN_OR_RETURN(example::ExampleParser parser, example::ExampleParser::Create(std::move(specs)));
  auto n = Derive(node_, K::kParse);
  n->parser = std::make_shared<const example::ExampleParser>(std::move(parser));
  n->bytes_as_views = bytes_as_views;
  return Dataset(std::move(n));
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
  auto n = Derive(node_, K::kMap);
  n->map_fn = std::move(fn);
  n->map_name = std::move(name);
  n->num_parallel = options.num_parallel;
  n->splits_batches = options.splits_batches;
  n->elementwise = options.elementwise;
  return Dataset(std::move(n));
}

Result<Dataset> Dataset::Batch(size_t batch_size, bool drop_remainder) const {
  if (batch_size < 1) return InvalidArgumentError("batch: batch_size must be >= 1");
  auto n = Derive(node_, K::kBatch);
  n->batch_size = batch_size;
  n->drop_remainder = drop_remainder;
  return Dataset(std::move(n));
}

Result<Dataset> Dataset::Prefetch(int buffer_size) const {
  if (buffer_size < 0 && buffer_size != kAutotune) {
    return InvalidArgumentError("prefetch: buffer_size must be >= 0 or AUTOTUNE");
  }
  auto n = Derive(node_, K::kPrefetch);
  n->buffer_size = buffer_size;
  return Dataset(std::move(n));
}

Result<bool> Iterator::GetNextFor(Element* out, std::chrono::nanoseconds /*timeout*/,
                                  bool* timed_out) {
  *timed_out = false;
  return GetNext(out);
}

Result<std::unique_ptr<Iterator>> Dataset::MakeIterator(IteratorOptions options) const {
  RF_ASSIGN_OR_RETURN(internal::Plan plan, Compile(node_, options.optimize));
  auto it = std::make_unique<internal::PipelineIterator>(std::move(plan), options);
  RF_RETURN_IF_ERROR(it->Start(internal::SeedTable{}, nullptr));
  return std::unique_ptr<Iterator>(std::move(it));
}

Result<std::unique_ptr<Iterator>> Dataset::Restore(std::span<const std::byte> state,
                                                   IteratorOptions options) const {
  RF_ASSIGN_OR_RETURN(internal::Plan plan, Compile(node_, options.optimize));
  auto it = std::make_unique<internal::PipelineIterator>(std::move(plan), options);
  internal::StateReader reader(std::string_view(reinterpret_cast<const char*>(state.data()), state.size()));
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
