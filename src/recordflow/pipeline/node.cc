// Node::Describe: each stage as the DebugString, stats and fingerprints name it.
#include "node.h"

#include <type_traits>

namespace recordflow::pipeline::internal {
namespace {

std::string Seed(const std::optional<uint64_t>& s) { return s ? std::to_string(*s) : "random"; }
std::string Count(int n) { return n == kAutotune ? "autotune" : std::to_string(n); }

std::string Describe(const stage::Files& p) {
  std::string s = "files(" + std::to_string(p.files.size());
  if (p.options.shuffle_files) s += ", shuffle_files, seed=" + Seed(p.options.seed);
  if (p.options.compression)
    s += ", " + std::string(format::CompressionName(*p.options.compression));
  return s + ")";
}
std::string Describe(const stage::Memory& p) {
  return "records(" + std::to_string(p.records->size()) + ")";
}
std::string Describe(const stage::Shard& p) {
  return "shard(" + std::to_string(p.num_shards) + ", " + std::to_string(p.index) + ")";
}
std::string Describe(const stage::Interleave& p) {
  const InterleaveOptions& o = p.options;
  return "interleave(cycle=" + Count(o.cycle_length) + ", block=" + std::to_string(o.block_length) +
         ", parallel=" + Count(o.num_parallel) + (o.deterministic ? "" : ", nondeterministic") +
         ")";
}
std::string Describe(const stage::Shuffle& p) {
  const ShuffleOptions& o = p.options;
  return "shuffle(" + std::to_string(o.buffer_size) + ", seed=" + Seed(o.seed) +
         (o.reshuffle_each_iteration ? "" : ", same order each epoch") + ")";
}
std::string Describe(const stage::GlobalShuffle& p) {
  return "global_shuffle(seed=" + Seed(p.seed) + ")";
}
std::string Describe(const stage::Repeat& p) {
  return p.count < 0 ? "repeat" : "repeat(" + std::to_string(p.count) + ")";
}
std::string Describe(const stage::Take& p) { return "take(" + std::to_string(p.count) + ")"; }
std::string Describe(const stage::Skip& p) { return "skip(" + std::to_string(p.count) + ")"; }
std::string Describe(const stage::Cache& p) {
  return p.path.empty() ? "cache(memory)" : "cache('" + p.path + "')";
}
std::string Describe(const stage::Parse& p) {
  std::string keys;
  for (const auto& s : p.parser->specs()) keys += (keys.empty() ? "" : ",") + s.key;
  return "parse(" + keys + ")";
}
std::string Describe(const stage::Map& p) { return "map(" + p.name + ")"; }
std::string Describe(const stage::Batch& p) {
  return "batch(" + std::to_string(p.batch_size) + (p.drop_remainder ? ", drop_remainder" : "") +
         ")";
}
std::string Describe(const stage::Prefetch& p) {
  return "prefetch(" +
         (p.buffer_size == kAutotune ? std::string("autotune") : std::to_string(p.buffer_size)) +
         ")";
}

}  // namespace

std::string Node::Describe() const {
  return std::visit([](const auto& p) { return internal::Describe(p); }, params);
}

}  // namespace recordflow::pipeline::internal
