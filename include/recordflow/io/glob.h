// Glob patterns in input paths: the one expansion every reader of a list of inputs uses (the
// pipeline's FromFiles, reshard, the command line, Python's from_files).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "recordflow/core/status.h"

namespace recordflow::io {

// Whether `path` holds a glob metacharacter ('*', '?' or '['), i.e. is expanded by ExpandGlob.
bool IsGlobPattern(std::string_view path);

// The paths `pattern` matches, sorted bytewise (so equal on every host). A path that is not a
// pattern (IsGlobPattern) is returned as the one element, unchecked: whether it exists is for
// its reader to say. A leading '.' in a name is matched only by a literal '.', as in the shell.
// Errors: kNotFound "no files match '<pattern>'" when nothing matches; kIOError naming the
// pattern when the directory listing fails (out of memory, unreadable directory).
//
// Thread safety: thread-safe.
Result<std::vector<std::string>> ExpandGlob(std::string_view pattern);

// ExpandGlob of each of `paths`, concatenated in the order given (each pattern's matches
// sorted among themselves). Errors: the first pattern's error.
Result<std::vector<std::string>> ExpandGlobs(const std::vector<std::string>& paths);

}  // namespace recordflow::io
