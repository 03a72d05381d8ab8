// Fuzzes the Example / SequenceExample decoders and the batch parser. The input is one record;
// it is also parsed as a batch of copies against a spec covering every spec kind.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "recordflow/example/composite.h"
#include "recordflow/example/example.h"
#include "recordflow/example/parse.h"

using namespace recordflow::example;

// A parser for `specs` that lives as long as the process (the fuzzer keeps it in a static); the
// specs are valid, so Create cannot fail.
template <typename Parser>
const Parser* NewParser(std::vector<FeatureSpec> specs) {
  return new Parser(Parser::Create(std::move(specs)).value());
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> record(reinterpret_cast<const std::byte*>(data), size);
  auto e = ParseExample(record);
  if (e.ok()) {
    // Whatever decodes must re-encode and decode to the same features.
    std::string again = SerializeExample(*e);
    auto e2 = ParseExample(std::as_bytes(std::span(again.data(), again.size())));
    if (!e2.ok() || !(*e2 == *e)) __builtin_trap();
  }
  auto se = ParseSequenceExample(record);
  (void)se;
  static const ExampleParser* parser = NewParser<ExampleParser>({
      FeatureSpec::FixedLen("label", DType::kInt64, {}, Feature::Int64s({0})),
      FeatureSpec::FixedLen("xy", DType::kFloat32, {2}, Feature::Floats({0})),
      FeatureSpec::FixedLen("name", DType::kBytes, {}, Feature::Bytes({""})),
      FeatureSpec::VarLen("a", DType::kInt64),
      FeatureSpec::VarLen("b", DType::kFloat32),
      FeatureSpec::VarLen("c", DType::kBytes),
  });
  std::vector<std::span<const std::byte>> batch(3, record);
  std::vector<Column> columns;
  ParseOptions options;
  options.max_parallelism = 1;
  (void)parser->Parse(batch, &columns, options);
  // FixedLenSequence items (stride checks, required feature) and required feature lists.
  static const ExampleParser* items = NewParser<ExampleParser>({
      FeatureSpec::FixedLenSequence("seq", DType::kInt64, {2}, /*allow_missing=*/true),
      FeatureSpec::FixedLenSequence("s", DType::kBytes, {}, /*allow_missing=*/false),
  });
  (void)items->Parse(batch, &columns, options);
  static const SequenceParser* lists = NewParser<SequenceParser>({
      FeatureSpec::FixedLenSequence("seq", DType::kFloat32, {2}, /*allow_missing=*/false),
      FeatureSpec::FixedLenSequence("s", DType::kBytes, {}, /*allow_missing=*/true),
  });
  (void)lists->Parse(batch, &columns, options);
  // SparseFeature / RaggedFeature built from VarLen columns: every partition kind.
  static const ExampleParser* composite = NewParser<ExampleParser>({
      FeatureSpec::VarLen("v", DType::kFloat32),
      FeatureSpec::VarLen("p", DType::kInt64),
      FeatureSpec::VarLen("q", DType::kInt64),
  });
  if (composite->Parse(batch, &columns, options).ok()) {
    const Int64Rows p{columns[1].int64s, columns[1].row_splits};
    const Int64Rows q{columns[2].int64s, columns[2].row_splits};
    using Kind = RowPartition::Kind;
    std::vector<std::vector<int64_t>> levels;
    for (Kind kind : {Kind::kRowSplits, Kind::kRowLengths, Kind::kRowStarts, Kind::kRowLimits,
                      Kind::kValueRowIds}) {
      const std::vector<RowPartition> parts = {
          {Kind::kUniformRowLength, "", 2}, {kind, "p", 0}, {Kind::kRowLengths, "q", 0}};
      const std::vector<Int64Rows> cols = {p, q};
      (void)BuildRaggedRowSplits("r", parts, columns[0].row_splits, cols, {}, &levels);
    }
    SparseIndices sparse;
    const std::vector<Int64Rows> index_cols = {p, q};
    (void)BuildSparseIndices({"s", {"p", "q"}, "v", {1 << 20, 7}, false}, index_cols,
                             columns[0].row_splits, 0, &sparse);
  }
  return 0;
}
