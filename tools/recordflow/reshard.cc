// `recordflow reshard FILES... DST --shards N`: the records of FILES, unchanged, in N shards
// (with .idx). All the work is recordflow::convert::Reshard; this file maps flags to
// ReshardOptions and prints the summary.
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "recordflow/convert/reshard.h"

namespace recordflow::cli {
namespace {

struct ReshardCliOptions {
  std::vector<std::string> paths;  // FILES... DST
  convert::ReshardOptions options;
  std::optional<format::Compression> input_compression;
  std::optional<format::Compression> compression;
  uint64_t seed = 0;
  CLI::Option* seed_option = nullptr;  // set: --seed was given
  bool no_index = false;
  bool no_sync = false;
  bool json = false;
};

int RunReshard(const ReshardCliOptions& cli) {
  if (cli.paths.size() < 2) {
    return UsageError("reshard needs at least one input FILE and the destination DST");
  }
  const std::vector<std::string> files(cli.paths.begin(), cli.paths.end() - 1);
  const std::string& dst = cli.paths.back();
  if (cli.seed_option->count() > 0 && !cli.options.shuffle) {
    return UsageError("--seed needs --shuffle");
  }
  convert::ReshardOptions options = cli.options;
  options.input_compression = cli.input_compression;
  if (cli.compression) options.compression = *cli.compression;
  options.seed = cli.seed;
  options.write_index = !cli.no_index;
  options.sync = !cli.no_sync;
  Result<convert::ReshardSummary> summary = convert::Reshard(files, dst, options);
  if (!summary.ok()) return FailWith(summary.status());
  std::string out;
  if (cli.json) {
    out = summary->ToJson() + "\n";
  } else {
    for (const convert::ReshardShard& s : summary->shards) {
      out += dst + "/" + s.file + ": " + CountOf(s.records, "record") + ", " +
             std::to_string(s.bytes) + " bytes" +
             (s.resumed ? " (kept from the interrupted run)" : "") + "\n";
    }
    out += "resharded " + CountOf(summary->records, "record") + " from " +
           CountOf(summary->inputs.size(), "file") + " into " +
           CountOf(summary->shards.size(), "shard") + " in " + dst;
    if (summary->resumed_shards > 0) {
      out += " (" + CountOf(summary->resumed_shards, "shard") + " kept, " +
             CountOf(summary->records_this_run, "record") + " written now)";
    }
    out += "\n";
  }
  if (WriteOutOrFail(out) != kExitOk) return kExitError;
  return kExitOk;
}

std::optional<format::Compression> ParseOrExit(const std::string& name) {
  return *format::ParseCompression(name);  // the option's check has accepted `name`
}

}  // namespace

Command AddReshardCommand(CLI::App& app) {
  auto cli = std::make_shared<ReshardCliOptions>();
  CLI::App* command = app.add_subcommand(
      "reshard",
      "Write the records of FILES (unchanged, CRC-checked) into N shards in DST: "
      "DST/<prefix>-00000-of-0000N.tfrecord with .idx; --resume finishes a killed run");
  AddRequiredArgument(*command, "paths", &cli->paths,
                      "Input TFRecord files or glob patterns (quoted: expanded and sorted by "
                      "recordflow), then the destination folder",
                      "FILES... DST")
      ->expected(2, -1);
  command->add_option("-n,--shards", cli->options.num_shards, "Number of output shards")
      ->required()
      ->check(CLI::PositiveNumber)
      ->type_name("N");
  command->add_flag("--shuffle", cli->options.shuffle,
                    "Put the records in a seeded random order across all shards (default: "
                    "input order)");
  cli->seed_option =
      command->add_option("--seed", cli->seed, "Seed of --shuffle (default 0)")->type_name("S");
  auto compression_check = [](const std::string& v) -> std::string {
    Result<format::Compression> c = format::ParseCompression(v);
    return c.ok() ? std::string() : c.status().message();
  };
  command
      ->add_option_function<std::string>(
          "--compression", [cli](const std::string& name) { cli->compression = ParseOrExit(name); },
          "Compression of the shards (default NONE; GZIP/ZLIB shards have no .idx)")
      ->type_name("{GZIP,ZLIB,NONE}")
      ->check(CLI::Validator(compression_check, "", "compression"));
  command
      ->add_option_function<std::string>(
          "--input-compression",
          [cli](const std::string& name) { cli->input_compression = ParseOrExit(name); },
          "Compression of FILES; default: from each extension (.gz GZIP, .zz ZLIB, else NONE)")
      ->type_name("{GZIP,ZLIB,NONE}")
      ->check(CLI::Validator(compression_check, "", "compression"));
  command->add_option("--prefix", cli->options.prefix, "Shard name prefix (default: shard)")
      ->type_name("NAME");
  command->add_flag("--resume", cli->options.resume,
                    "Finish an interrupted run in DST: its whole shards are kept, the rest "
                    "written (same FILES and options required)");
  command->add_flag("--no-index", cli->no_index, "Do not write .idx files");
  command->add_flag("--no-sync", cli->no_sync, "Do not fsync shards before publishing them");
  command->add_flag("--json", cli->json, "Print the summary as one JSON document");
  return {command, [cli] { return RunReshard(*cli); }};
}

}  // namespace recordflow::cli
