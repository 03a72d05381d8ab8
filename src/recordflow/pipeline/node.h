// What a Dataset is made of: one Node per stage, each holding its stage's parameters and
// pointing at its input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "recordflow/pipeline/dataset.h"

namespace recordflow::pipeline::internal {

// The parameters of each kind of stage.
namespace stage {
struct Files {
  std::vector<std::string> files;
  FilesOptions options;
};
struct Memory {
  std::shared_ptr<const std::vector<std::string>> records;
};
struct Shard {
  int num_shards = 1;
  int index = 0;
};
struct Interleave {
  InterleaveOptions options;
};
struct Shuffle {
  ShuffleOptions options;
};
struct GlobalShuffle {
  std::optional<uint64_t> seed;
  bool reshuffle_each_iteration = true;
};
struct Repeat {
  int64_t count = -1;  // < 0: forever
};
struct Take {
  int64_t count = -1;
};
struct Skip {
  int64_t count = 0;
};
struct Cache {
  std::string path;  // empty: in memory
};
struct Parse {
  std::shared_ptr<const example::ExampleParser> parser;
  bool bytes_as_views = false;
};
struct Map {
  MapFn fn;
  std::string name;
  // MapOptions::elementwise is not part of Describe (nor of fingerprints).
  MapOptions options;
};
struct Batch {
  size_t batch_size = 0;
  bool drop_remainder = false;
};
struct Prefetch {
  int buffer_size = kAutotune;
};
}  // namespace stage

struct Node {
  // In the order of Params' alternatives: kind() is the alternative's index.
  enum class Kind {
    kFiles,
    kMemory,
    kShard,
    kInterleave,
    kShuffle,
    kGlobalShuffle,
    kRepeat,
    kTake,
    kSkip,
    kCache,
    kParse,
    kMap,
    kBatch,
    kPrefetch,
  };
  using Params =
      std::variant<stage::Files, stage::Memory, stage::Shard, stage::Interleave, stage::Shuffle,
                   stage::GlobalShuffle, stage::Repeat, stage::Take, stage::Skip, stage::Cache,
                   stage::Parse, stage::Map, stage::Batch, stage::Prefetch>;

  Node(Params p, std::shared_ptr<const Node> in) : params(std::move(p)), input(std::move(in)) {}

  Params params;
  std::shared_ptr<const Node> input;

  Kind kind() const { return static_cast<Kind>(params.index()); }
  // The parameters of a node known to be of kind T (a broken invariant otherwise: throws
  // std::bad_variant_access, which the thread boundaries turn into a Status).
  template <typename T>
  const T& as() const {
    return std::get<T>(params);
  }
  template <typename T>
  const T* get_if() const {
    return std::get_if<T>(&params);
  }
  std::string Describe() const;
};

// One record travelling through the record stream.
struct Record {
  std::string data;
  RecordPosition position;
};

// What a record costs while a buffer holds it: its bytes and its bookkeeping.
inline size_t RecordBytes(const Record& r) { return sizeof(Record) + r.data.capacity(); }

}  // namespace recordflow::pipeline::internal
