// Helpers shared by the doctor's files (diagnose*.cc): number formatting as the report prints it.
#pragma once

#include <string>

namespace recordflow::pipeline::internal {

// printf into a std::string.
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));

// `value` with `decimals` decimals and thousands separators ("12,345.6").
std::string WithThousands(double value, int decimals);

// A rate as the report prints it: no decimals from 100 on, one below ("1,234", "12.5");
// "-" for none.
std::string FormatRate(double value);

}  // namespace recordflow::pipeline::internal

#include <optional>
#include <vector>

#include "recordflow/pipeline/diagnose.h"

namespace recordflow::pipeline::internal {


}  // namespace recordflow::pipeline::internal

namespace recordflow::pipeline::internal {

// Cores this process may run on.
int Cores();

// What the variants of one diagnosis need.
struct VariantContext {
  const PipelinePlan& plan;
  const Measurements& measurements;
  const Cause& cause;  // the one the recommendations are for
  const StepFn& step;
  double seconds;  // each variant; 0: the rules' advice without running anything
  std::function<void(const std::string&)> log;
};

// The recommendations for `context.cause`, each variant measured (diagnose_variants.cc).
std::vector<Recommendation> Recommend(const VariantContext& context);

}  // namespace recordflow::pipeline::internal
