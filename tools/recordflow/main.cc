// `recordflow`: the command-line client of the library. This file only wires the subcommands;
// each lives in its own file and docs/cli.md documents them.
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "recordflow/version.h"

int main(int argc, char** argv) {
  namespace cli = recordflow::cli;
  CLI::App app;
  app.name("recordflow");
  cli::ConfigureApp(app);
  app.set_version_flag("--version", std::string("recordflow ") + recordflow::kVersion);
  const std::vector<cli::Command> commands = {
      cli::AddCountCommand(app),   cli::AddCatCommand(app),     cli::AddVerifyCommand(app),
      cli::AddIndexCommand(app),   cli::AddInspectCommand(app), cli::AddConvertCommand(app),
      cli::AddExtractCommand(app), cli::AddDoctorCommand(app),  cli::AddReshardCommand(app),
  };
  // CLI11 would only say "A subcommand is required" (or that an argument was not expected):
  // name the word it did not know.
  if (std::optional<std::string> unknown = cli::UnknownCommand(app, argc, argv)) {
    std::string names;
    for (const cli::Command& command : commands) {
      names += (names.empty() ? "" : ", ") + command.app->get_name();
    }
    return cli::UsageError("unknown command '" + *unknown + "' (commands: " + names +
                           ")\nRun 'recordflow --help' for usage.");
  }
  // CLI11 reports parse failures by exception; they stop here and never reach the library.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return cli::ExitForParseError(app, error);
  }
  for (const cli::Command& command : commands) {
    if (command.app->parsed()) return cli::RunCommand(command);
  }
  return cli::UsageError("no command given");  // unreachable: require_subcommand(1)
}
