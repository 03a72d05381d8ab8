#include "recordflow/io/glob.h"

#include <glob.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace recordflow::io {

bool IsGlobPattern(std::string_view path) {
  return path.find_first_of("*?[") != std::string_view::npos;
}

Result<std::vector<std::string>> ExpandGlob(std::string_view pattern) {
  const std::string p(pattern);
  if (!IsGlobPattern(p)) return std::vector<std::string>{p};
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
