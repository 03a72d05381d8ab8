// The doctor's rules: pure functions from measurements to a verdict, a cause and the order of
// the recommendations (docs/doctor.md, "How to read the verdict"). No clock, no I/O: tested on
// recorded measurements (diagnose_test.cc).
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "diagnose_internal.h"
#include "recordflow/pipeline/diagnose.h"

namespace recordflow::pipeline {
namespace internal {

std::string Format(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

std::string WithThousands(double value, int decimals) {
  std::string digits = Format("%.*f", decimals, std::fabs(value));
  const size_t dot = digits.find('.');
  const size_t int_end = dot == std::string::npos ? digits.size() : dot;
  std::string out;
  for (size_t i = 0; i < int_end; ++i) {
    if (i > 0 && (int_end - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  out += digits.substr(int_end);
  return (value < 0 && digits.find_first_not_of("0.,") != std::string::npos ? "-" : "") + out;
}

std::string FormatRate(double value) { return WithThousands(value, value >= 100 ? 0 : 1); }

}  // namespace internal

namespace {

using internal::Format;

const StageMeasurement* Slowest(const std::vector<StageMeasurement>& stages,
                                const std::string& except = {}) {
  const StageMeasurement* best = nullptr;
  for (const StageMeasurement& s : stages) {
    if (!s.utilization || s.id == except) continue;
    if (best == nullptr || *s.utilization > *best->utilization) best = &s;
  }
  return best;
}

Cause StageCause(const StageMeasurement& s) {
  Cause c;
  c.id = s.kind != "native" ? s.kind : s.id;
  c.stage = s.id;
  return c;
}

bool IsPythonStage(const StageMeasurement& s) { return s.kind.rfind("python_", 0) == 0; }

}  // namespace

std::vector<StageMeasurement> StagesFromStats(const PipelineStats& stats) {
  static const char* const kNativeIds[] = {"read", "process", "prefetch"};
  const double wall = std::max(stats.wall_seconds, 1e-9);
  std::vector<StageMeasurement> out;
  for (size_t i = 0; i < stats.stages.size(); ++i) {
    const StageStats& s = stats.stages[i];
    StageMeasurement m;
    m.id = i < 3 ? kNativeIds[i] : "native_" + std::to_string(i);
    m.kind = "native";
    m.name = s.name;
    m.elements = s.elements;
    m.busy_seconds = s.busy_seconds;
    m.wait_output_seconds = s.wait_output_seconds;
    m.parallelism = s.parallelism;
    m.buffer_size = s.buffer_size;
    if (m.id == "prefetch") m.buffer_fill = s.buffer_fill;
    if (m.id == "read") {
      m.utilization = s.busy_seconds / wall;  // one producer thread pulls the record stream
    } else if (m.id == "process") {
      m.utilization = s.busy_seconds / (wall * std::max(s.parallelism, 1));
    }
    out.push_back(std::move(m));
  }
  return out;
}

Verdict JudgeMeasurements(const Measurements& m) {
  Verdict v;
  const StageMeasurement* slowest = Slowest(m.stages);
  if (slowest == nullptr) {
    v.verdict = "no step given";
    v.cause.id = "unknown";
    v.cause.explanation = "no stage reported a utilization";
    return v;
  }
  const double rate = m.alone.elements_per_s;
  const double records_per_element = static_cast<double>(m.batch_size.value_or(1));
  // The stream's busy time includes waiting for interleave reads queued on the pool that the
  // executor's work shares: timed alone and far faster, it is not the limit.
  if (slowest->id == "read" && m.read_alone_records_per_s &&
      *m.read_alone_records_per_s >= kReadHeadroom * rate * records_per_element) {
    const double ratio = *m.read_alone_records_per_s / (rate * records_per_element);
    v.read_note = "alone the stream gives " +
                  internal::WithThousands(*m.read_alone_records_per_s, 0) + " records/s, " +
                  Format("%.1f", ratio) + "x what the pipeline delivers: not the limit";
    if (const StageMeasurement* next = Slowest(m.stages, "read")) slowest = next;
  }
  v.slowest_stage = slowest->id;
  const std::string slowest_text = "the slowest stage, [" + slowest->id + "] " + slowest->name +
                                   " (" + Format("%.0f", 100 * slowest->utilization.value_or(0)) +
                                   "% busy)";
  v.cause = StageCause(*slowest);

  if (!m.step) {
    v.verdict = "no step given";
    v.detail = "pass a step (step_fn / step_seconds / --step-ms) to know whether training waits";
    v.cause.explanation = "the ceiling is set by " + slowest_text;
    v.rule_cause = v.cause;
    return v;
  }
  const StepRun& step = *m.step;
  const double wait_pct = 100 * step.wait_fraction;
  v.input_bound = step.wait_fraction >= kInputBoundWaitFraction;
  const double demand = 1.0 / std::max(step.mean_compute_ms / 1e3, 1e-9);  // elements/s
  const double over = rate / demand;
  if (!*v.input_bound) {
    v.verdict = "not input-bound";
    v.detail = Format(
        "the step waits for data %.1f%% of the time; the pipeline's ceiling is "
        "%.1fx what the step consumes: speed up the step, not the input",
        wait_pct, over);
    v.cause =
        Cause{"step", std::nullopt,
              "the training step sets the pace; the pipeline has headroom (" + slowest_text + ")",
              over, false};
    if (over < kKeepsUpMargin) {
      // Waiting little now, but with no margin: a faster step would wait.
      v.cause.borderline = true;
      v.cause.explanation = Format(
                                "the training step sets the pace, but only just: the "
                                "pipeline's ceiling alone is %.2fx the step's rate, "
                                "limited by ",
                                over) +
                            slowest_text;
      v.detail = Format(
          "the step waits for data %.1f%% of the time, but the pipeline has no "
          "margin (%.2fx the step's rate): a faster step would wait",
          wait_pct, over);
      v.rule_cause = StageCause(*slowest);
    }
    return v;
  }
  v.verdict = "input-bound";
  v.detail = Format("the step waits for data %.1f%% of the time", wait_pct);
  // Python stages run on the consuming thread, in series with the step: their time per
  // element is waited for at every step, and no buffer can hide it.
  const StageMeasurement* costliest = nullptr;
  double cost = 0;
  for (const StageMeasurement& s : m.stages) {
    if (!IsPythonStage(s) || !s.busy_seconds) continue;
    const double c = *s.busy_seconds / std::max(s.parallelism, 1) /
                     static_cast<double>(std::max<uint64_t>(m.alone.elements, 1));
    if (costliest == nullptr || c > cost) costliest = &s, cost = c;
  }
  const double mean_wait = step.mean_wait_ms / 1e3;
  if (costliest != nullptr && cost >= 0.5 * mean_wait) {
    v.cause = Cause{costliest->kind, costliest->id,
                    "[" + costliest->id + "] " + costliest->name +
                        Format(" runs on the consuming thread, in series with the step: %.2f ms "
                               "of the %.2f ms each step waits",
                               1e3 * cost, 1e3 * mean_wait),
                    over, false};
  } else if (over >= kKeepsUpMargin) {
    v.cause = Cause{"prefetch", "prefetch",
                    Format("the pipeline is fast enough on average (%.1fx the step's rate) but "
                           "the prefetch buffer is too small to absorb the step's bursts: the "
                           "step waits after every burst of short steps",
                           over),
                    over, false};
  } else {
    v.cause.ceiling_over_demand = over;
    v.cause.explanation = Format(
                              "the pipeline cannot keep up (%.2fx the step's rate); it is "
                              "limited by ",
                              over) +
                          slowest_text;
  }
  v.rule_cause = v.cause;
  return v;
}

Recommendation MakeRecommendation(std::string id, std::optional<std::string> stage,
                                  std::string title, std::string detail, std::optional<double> gain,
                                  bool measured) {
  Recommendation r;
  r.id = std::move(id);
  r.stage = std::move(stage);
  r.title = std::move(title);
  r.detail = std::move(detail);
  if (gain) r.gain = std::round(*gain * 1000) / 1000;
  r.measured = measured;
  if (gain && measured) r.helps = *gain >= kHelpsGain;
  return r;
}

std::optional<Recommendation> CpuCapRecommendation(const Measurements& m) {
  if (!m.step || !m.step->step_cpu_s || m.step->compute_s <= 0 || m.cores < 2) return std::nullopt;
  const double step_cores = *m.step->step_cpu_s / m.step->compute_s;
  if (step_cores < kCpuHeavyStepShare) return std::nullopt;
  // Leave the step the cores it keeps busy (rounded up); a step that fills a core or more gets
  // at least 60% of the host, as SPDL's guidance keeps loading within 40%.
  const int step_needs = static_cast<int>(std::ceil(step_cores - 1e-9));
  int loader = std::max(1, m.cores - step_needs);
  if (step_cores >= 1.0) loader = std::min(loader, std::max(1, m.cores * 2 / 5));
  // Rounded up to the printed hundredths, so that EffectiveThreads (which rounds down) gives
  // back `loader` threads.
  const double fraction = std::ceil(100.0 * loader / m.cores - 1e-9) / 100.0;
  char value[32];
  std::snprintf(value, sizeof(value), "%.2f", fraction);
  Recommendation r = MakeRecommendation(
      "cap_cpu", std::nullopt, std::string("Cap the pipeline's cores: max_cpu_fraction=") + value,
      internal::Format("The step keeps %.2f cores busy itself (%.0f%% of its time on CPU); the "
                       "pipeline's %d threads compete with it. Iterate with "
                       "max_cpu_fraction=%s (%d of %d cores for loading), e.g. "
                       "ds.iterator(max_cpu_fraction=%s).",
                       step_cores, 100 * std::min(step_cores, 1.0), m.cores, value, loader, m.cores,
                       value));
  r.command = std::string("max_cpu_fraction=") + value;
  return r;
}

void SortRecommendations(std::vector<Recommendation>& recs) {
  auto group = [](const Recommendation& r) {
    if (r.helps.value_or(false)) return 0;
    return r.measured ? 2 : 1;
  };
  std::stable_sort(recs.begin(), recs.end(), [&](const Recommendation& a, const Recommendation& b) {
    if (group(a) != group(b)) return group(a) < group(b);
    return a.gain.value_or(0) > b.gain.value_or(0);
  });
}

double FreeGain(const std::vector<StageMeasurement>& stages, const std::string& stage_id,
                std::optional<double> records_per_s) {
  double bound = kGainCap;
  for (const StageMeasurement& s : stages) {
    if (s.id == stage_id || !s.utilization) continue;
    if (s.alone_records_per_s && *s.alone_records_per_s > 0 && records_per_s &&
        *records_per_s > 0) {
      bound = std::min(bound, *s.alone_records_per_s / *records_per_s);
    } else if (*s.utilization > 0.1) {
      bound = std::min(bound, 1.0 / *s.utilization);
    }
  }
  return std::max(1.0, bound);
}

}  // namespace recordflow::pipeline
