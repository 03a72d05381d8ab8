#include "recordflow/io/glob.h"

#include "recordflow/io/filesystem.h"

#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace recordflow::io {

bool IsGlobPattern(std::string_view path) {
  return path.find_first_of("*?[") != std::string_view::npos;
}

namespace {

// Object stores have no directories to glob: list the keys under the prefix before the first
// wildcard and match each whole URL, '/' never matched by a wildcard (as in a local glob).
Result<std::vector<std::string>> ExpandRemoteGlob(const std::string& pattern) {
  RF_ASSIGN_OR_RETURN(FileSystem * fs, FileSystemForPath(pattern));
  const size_t wild = pattern.find_first_of("*?[");
  RF_ASSIGN_OR_RETURN(std::vector<std::string> listed, fs->ListPrefix(pattern.substr(0, wild)));
  std::vector<std::string> matched;
  for (std::string& url : listed) {
    if (::fnmatch(pattern.c_str(), url.c_str(), FNM_PATHNAME) == 0) {
      matched.push_back(std::move(url));
    }
  }
  if (matched.empty()) return NotFoundError("no files match '" + pattern + "'");
  std::sort(matched.begin(), matched.end());
  return matched;
}

}  // namespace

Result<std::vector<std::string>> ExpandGlob(std::string_view pattern) {
  const std::string p(pattern);
  if (!IsGlobPattern(p)) return std::vector<std::string>{p};
  if (IsRemotePath(p)) return ExpandRemoteGlob(p);
  glob_t g{};
  const int rc = ::glob(p.c_str(), 0, nullptr, &g);
  // glob_t owns the matches until globfree, on every path out of here.
  struct Free {
    glob_t* g;
    ~Free() { globfree(g); }
  } free_matches{&g};
  if (rc == GLOB_NOMATCH) return NotFoundError("no files match '" + p + "'");
  if (rc == GLOB_NOSPACE) return IOError("cannot expand '" + p + "': out of memory");
  if (rc != 0) return IOError("cannot expand '" + p + "': a directory cannot be read");
  std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  std::sort(matched.begin(), matched.end());
  return matched;
}

Result<std::vector<std::string>> ExpandGlobs(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    RF_ASSIGN_OR_RETURN(std::vector<std::string> matched, ExpandGlob(p));
    out.insert(out.end(), std::make_move_iterator(matched.begin()),
               std::make_move_iterator(matched.end()));
  }
  return out;
}

}  // namespace recordflow::io
