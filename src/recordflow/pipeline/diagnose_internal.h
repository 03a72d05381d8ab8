// Helpers shared by the doctor's files (diagnose*.cc): number formatting as the report prints
// it, sample files, and the variants' entry point.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "recordflow/core/status.h"
#include "recordflow/format/compression.h"
#include "recordflow/pipeline/diagnose.h"

namespace recordflow::pipeline::internal {

// printf into a std::string.
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));

// `value` with `decimals` decimals and thousands separators ("12,345.6").
std::string WithThousands(double value, int decimals);

// A rate as the report prints it: no decimals from 100 on, one below ("1,234", "12.5");
// "-" for none.
std::string FormatRate(double value);

// Cores this process may run on.
int Cores();

// "StatusName: message", as a recommendation's `error`.
std::string ErrorText(const Status& status);

// Size of a file; 0 when it cannot be read.
uint64_t FileSize(const std::string& path);

// A temporary directory (rf-doctor-XXXXXX), removed with its contents when this goes away;
// path() is empty when it could not be made.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `records` to a new TFRecord file. Errors: those of RecordWriter.
Status WriteRecords(const std::string& path, const std::vector<std::string>& records,
                    format::Compression compression);
// The first `limit` records of a file. Errors: those of RecordReader.
Result<std::vector<std::string>> ReadRecords(const std::string& path,
                                             std::optional<format::Compression> compression,
                                             size_t limit = SIZE_MAX);

// The first `limit` records of the plan's source: its in-memory records, else its files in
// order. Errors: those of RecordReader.
Result<std::vector<std::string>> FirstRecords(const PipelinePlan& plan, size_t limit);

// What the variants of one diagnosis need.
struct VariantContext {
  const PipelinePlan& plan;
  const Measurements& measurements;
  const Cause& cause;  // the one the recommendations are for
  const StepFn& step;
  double seconds;  // each variant; 0: the rules' advice without running anything
  std::function<void(const std::string&)> log;
  IteratorOptions iterator = {};  // of every variant's iterator (DiagnoseOptions::iterator)
};

// The recommendations for `context.cause`, each variant measured (diagnose_variants.cc).
std::vector<Recommendation> Recommend(const VariantContext& context);

}  // namespace recordflow::pipeline::internal
