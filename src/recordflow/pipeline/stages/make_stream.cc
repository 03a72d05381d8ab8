// The record stream built from a chain of record-stage Nodes, stage by stage.
#include "stage.h"

namespace recordflow::pipeline::internal {

uint64_t SeedTable::For(const Node* node, const std::optional<uint64_t>& fixed) {
  if (fixed) return *fixed;
  auto it = seeds.find(node);
  if (it != seeds.end()) return it->second;
  const uint64_t s = RandomSeed();
  seeds[node] = s;
  return s;
}

bool IsRecordStage(Node::Kind kind) {
  switch (kind) {
    case Node::Kind::kFiles:
    case Node::Kind::kMemory:
    case Node::Kind::kShard:
    case Node::Kind::kInterleave:
    case Node::Kind::kShuffle:
    case Node::Kind::kGlobalShuffle:
    case Node::Kind::kRepeat:
    case Node::Kind::kTake:
    case Node::Kind::kSkip:
    case Node::Kind::kCache:
      return true;
    default:
      return false;
  }
}

std::shared_ptr<RecordFetcher> MakeFetcher(const Node* chain) {
  const Node* n = chain;
  std::vector<std::string> caches;
  while (n->input) {
    if (const auto* cache = n->get_if<stage::Cache>(); cache != nullptr && !cache->path.empty()) {
      caches.push_back(cache->path);
    }
    n = n->input.get();
  }
  if (const auto* memory = n->get_if<stage::Memory>(); memory != nullptr) {
    return std::make_shared<RecordFetcher>(std::vector<std::string>{}, FilesOptions{},
                                           memory->records);
  }
  const auto& files = n->as<stage::Files>();
  std::vector<std::string> paths = files.files;
  paths.insert(paths.end(), caches.begin(), caches.end());
  return std::make_shared<RecordFetcher>(std::move(paths), files.options, nullptr);
}

namespace {

// The seed of a shuffle stage in `epoch`.
uint64_t ShuffleSeed(const Node* node, const std::optional<uint64_t>& fixed, bool reshuffle,
                     uint64_t epoch, SeedTable* seeds) {
  const uint64_t base = seeds->For(node, fixed);
  return reshuffle ? MixSeed(base, epoch) : base;
}

}  // namespace

Result<std::unique_ptr<RecordIterator>> MakeRecordIterator(const Node* node, uint64_t epoch,
                                                           StreamContext* ctx, SeedTable* seeds) {
  auto input = [&]() { return MakeRecordIterator(node->input.get(), epoch, ctx, seeds); };
  using K = Node::Kind;
  switch (node->kind()) {
    case K::kFiles: {
      FileSource src{node, &node->as<stage::Files>()};
      return MakeFilesStream(src, FileOrder(src, epoch, seeds), ctx);
    }
    case K::kMemory:
      return MakeMemoryStream(node->as<stage::Memory>().records);
    case K::kShard: {
      if (node->input->kind() == K::kFiles) {  // by file
        RF_ASSIGN_OR_RETURN(FileSource src, FileSourceOf(node));
        return MakeFilesStream(src, FileOrder(src, epoch, seeds), ctx);
      }
      RF_ASSIGN_OR_RETURN(auto in, input());
      return MakeShardStream(std::move(in), node->as<stage::Shard>());
    }
    case K::kInterleave: {
      RF_ASSIGN_OR_RETURN(FileSource src, FileSourceOf(node->input.get()));
      return MakeInterleaveStream(src, FileOrder(src, epoch, seeds),
                                  node->as<stage::Interleave>().options, ctx);
    }
    case K::kShuffle: {
      RF_ASSIGN_OR_RETURN(auto in, input());
      const ShuffleOptions& o = node->as<stage::Shuffle>().options;
      return MakeShuffleStream(std::move(in), o.buffer_size,
                               ShuffleSeed(node, o.seed, o.reshuffle_each_iteration, epoch, seeds),
                               ctx);
    }
    case K::kGlobalShuffle: {
      RF_ASSIGN_OR_RETURN(FileSource src, FileSourceOf(node->input.get()));
      const auto& g = node->as<stage::GlobalShuffle>();
      return MakeGlobalShuffleStream(
          src, ShuffleSeed(node, g.seed, g.reshuffle_each_iteration, epoch, seeds));
    }
    case K::kRepeat:
      return MakeRepeatStream(node, epoch, ctx, seeds);
    case K::kTake: {
      RF_ASSIGN_OR_RETURN(auto in, input());
      return MakeTakeSkipStream(std::move(in), true, node->as<stage::Take>().count, ctx);
    }
    case K::kSkip: {
      RF_ASSIGN_OR_RETURN(auto in, input());
      return MakeTakeSkipStream(std::move(in), false, node->as<stage::Skip>().count, ctx);
    }
    case K::kCache:
      return MakeCacheStream(node, epoch, ctx, seeds);
    default:
      return InternalError("not a record stage: " + node->Describe());
  }
}

}  // namespace recordflow::pipeline::internal
