// `recordflow extract FILES... OUT_DIR`: image Examples -> OUT_DIR/<class>/<file>, labels.csv.
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "recordflow/convert/convert.h"

namespace recordflow::cli {
namespace {

struct ExtractCliOptions {
  std::vector<std::string> args;
  convert::ExtractOptions options;
  bool json = false;
};

int RunExtract(ExtractCliOptions& cli) {
  if (cli.args.size() < 2) return UsageError("extract needs FILES... and OUT_DIR");
  std::vector<std::string> files(cli.args.begin(), cli.args.end() - 1);
  if (int rc = ExpandFileArguments(&files); rc != kExitOk) return rc;
  const std::string out_dir = cli.args.back();
  Result<convert::ExtractSummary> summary = convert::Extract(files, out_dir, cli.options);
  if (!summary.ok()) return FailWith(summary.status());
  std::string text;
  if (cli.json) {
    text = summary->ToJson() + "\n";
  } else {
    text = "extracted " + CountOf(summary->images, "image") + " from " +
           CountOf(summary->records, "record") + " into " + out_dir + "\n";
    for (const auto& s : summary->skipped) text += "  skipped " + s.path + ": " + s.reason + "\n";
  }
  if (WriteOutOrFail(text) != kExitOk) return kExitError;
  return summary->skipped.empty() ? kExitOk : kExitSkipped;
}

}  // namespace

Command AddExtractCommand(CLI::App& app) {
  auto cli = std::make_shared<ExtractCliOptions>();
  CLI::App* command = app.add_subcommand(
      "extract",
      "Write the images of image Examples back as OUT_DIR/<class>/<file name>, with "
      "OUT_DIR/labels.csv; names are sanitised so nothing can be written outside OUT_DIR");
  AddRequiredArgument(*command, "args", &cli->args, "TFRecord files, then the output folder",
                      "FILES... OUT_DIR");
  AddCompressionOption(*command, &cli->options.compression);
  command->add_flag("--overwrite", cli->options.overwrite,
                    "Replace files already in OUT_DIR (default: add a -N suffix)");
  command->add_flag("--json", cli->json, "Print the summary as JSON");
  return {command, [cli] { return RunExtract(*cli); }};
}

}  // namespace recordflow::cli
