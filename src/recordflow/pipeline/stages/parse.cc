// The parse stage: an element's records into columns.
#include "stage.h"

namespace recordflow::pipeline::internal {

Status ParseElement(const stage::Parse& p, Element& e, const ParseCall& call) {
  if (e.parsed) return InvalidArgumentError("parse: element is already parsed");
  std::vector<std::span<const std::byte>> spans;
  spans.reserve(e.records.size());
  for (const auto& r : e.records) spans.push_back(std::as_bytes(std::span(r.data(), r.size())));
  example::ParseOptions po;
  po.max_parallelism = call.max_parallelism;
  po.first_record_index = 0;  // positions in the batch; mapped to files below
  po.bytes_as_views = call.views;
  uint64_t failed = ~uint64_t{0};
  po.error_record = &failed;
  Status s = p.parser->Parse(spans, &e.columns, po);
  if (!s.ok()) {
    // The parser names the record by its place in the batch; add where that record came from.
    std::string where;
    if (failed < e.positions.size()) {
      const RecordPosition& pos = e.positions[failed];
      const std::vector<std::string>& files = *call.files;
      where =
          " [record " + std::to_string(failed) + " of the batch is " +
          (pos.file < files.size() ? "'" + files[pos.file] + "' record " : "in-memory record ") +
          std::to_string(pos.index) + " at byte offset " + std::to_string(pos.offset) + ", epoch " +
          std::to_string(call.epoch) + "]";
    }
    return Status(s.code(), "parse: " + s.message() + where);
  }
  e.parsed = true;
  if (!call.keep_payloads && !po.bytes_as_views) e.records.clear();
  return Status();
}

}  // namespace recordflow::pipeline::internal
