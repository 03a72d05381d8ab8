// `recordflow doctor GLOB... [options]`: diagnoses an input pipeline over the given files.
//
// The doctor's engine is Python (recordflow.doctor, which rf.diagnose also is): it runs Dataset
// pipelines, Python stages included, and times variants of them. Writing it twice would give
// two engines that drift apart, so this command only finds a Python interpreter and replaces
// itself with it (execv, an argv list, no shell), passing every argument through untouched;
// the options, --help and the exit codes are recordflow.doctor's (docs/cli.md lists them).
//
// The interpreter: $RECORDFLOW_PYTHON when set (an explicit choice wins, and is not second-
// guessed); else python3/python in the directory of this binary (pip installs both into the
// same bin/ of a virtualenv); else python3 on PATH.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "common.h"

namespace recordflow::cli {
namespace {

// Run by `python -c`: a missing package is a clear error that names the interpreter, not a
// traceback. sys.argv[1:] are the user's arguments.
constexpr char kLauncher[] = R"PY(import sys
try:
    from recordflow.doctor import main
except ImportError as e:
    sys.stderr.write(
        "recordflow: NotFound: 'recordflow doctor' runs in Python, and " + sys.executable +
        " cannot import the recordflow package (" + str(e) + "). Install it into that Python "
        "(pip install recordflow), or set RECORDFLOW_PYTHON to a Python that has it.\n")
    sys.exit(1)
sys.exit(main(sys.argv[1:], prog="recordflow doctor"))
)PY";

struct Interpreter {
  std::string path;
  bool search_path = false;  // a bare name, looked up on PATH by execvp
};

std::vector<Interpreter> Candidates() {
  if (const char* env = std::getenv("RECORDFLOW_PYTHON"); env != nullptr && *env != '\0') {
    return {{env, std::strchr(env, '/') == nullptr}};
  }
  std::vector<Interpreter> out;
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    for (const char* name : {"python3", "python"}) {
      const std::filesystem::path candidate = self.parent_path() / name;
      if (::access(candidate.c_str(), X_OK) == 0) out.push_back({candidate.string(), false});
    }
  }
  out.push_back({"python3", true});
  return out;
}

int RunDoctor(const std::vector<std::string>& args) {
  std::string tried;
  for (const Interpreter& interpreter : Candidates()) {
    std::vector<std::string> argv_strings = {interpreter.path, "-c", kLauncher};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& s : argv_strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    if (interpreter.search_path) {
      ::execvp(argv[0], argv.data());
    } else {
      ::execv(argv[0], argv.data());
    }
    // Only a failed exec returns.
    tried += (tried.empty() ? "" : ", ") + interpreter.path + " (" + std::strerror(errno) + ")";
  }
  PrintError(NotFoundError("'recordflow doctor' needs a Python interpreter with the recordflow "
                           "package; none could be started: " + tried +
                           ". Set RECORDFLOW_PYTHON to one."));
  return kExitError;
}

}  // namespace

Command AddDoctorCommand(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "doctor",
      "Diagnose an input pipeline over the files: its ceiling, whether a (simulated) training "
      "step waits on data, the slowest stage, and what would help, measured. Runs Python's "
      "recordflow.doctor; 'recordflow doctor --help' lists its options.");
  // Every argument, --help included, belongs to recordflow.doctor's own parser.
  command->set_help_flag();
  command->allow_extras();
  command->prefix_command();
  return {command, [command] { return RunDoctor(command->remaining()); }};
}

}  // namespace recordflow::cli
