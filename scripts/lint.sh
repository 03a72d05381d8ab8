#!/usr/bin/env bash
# Checks the tree's formatting and lint, changing nothing (scripts/test.sh runs it in CI):
#   C++     clang-format (.clang-format) over every tracked *.cc, *.h, *.inc
#   Python  ruff check ([tool.ruff] in pyproject.toml) over every tracked *.py
#   Layers  each src/ and include/ file of a layer includes only its own layer and the layers it
#           builds on (rf_add_layer(... DEPS ...) in CMakeLists.txt, transitively)
#   scripts/lint.sh --fix   applies clang-format and ruff's safe fixes in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[[ "${1:-}" == "--fix" ]] && fix=1
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
RUFF=${RUFF:-ruff}
PY=${PYTHON:-python3}
command -v "$RUFF" >/dev/null || RUFF="$PY -m ruff"

mapfile -t cxx < <(git ls-files '*.cc' '*.h' '*.inc')
mapfile -t py < <(git ls-files '*.py')
status=0

if [[ $fix == 1 ]]; then
  "$CLANG_FORMAT" -i "${cxx[@]}"
  $RUFF check --fix --quiet "${py[@]}" || true
  echo "lint --fix: applied clang-format and ruff's fixes; what remains needs a hand:"
fi

if ! "$CLANG_FORMAT" --dry-run --Werror "${cxx[@]}" 2>/tmp/rf-clang-format.$$; then
  grep -oE '^[^ :]+\.(cc|h|inc):[0-9]+:[0-9]+: (error|warning)' /tmp/rf-clang-format.$$ |
    cut -d: -f1 | sort | uniq -c | awk '{n += $1; printf "  %s: %d\n", $2, $1} END {
      print "clang-format: " n " places to change in " NR " files (scripts/lint.sh --fix)"}'
  status=1
fi
rm -f /tmp/rf-clang-format.$$

if ! $RUFF check --quiet --output-format concise "${py[@]}"; then
  status=1
fi

# Include-level layering (the link-level check is rf_check_layer in CMake).
if ! "$PY" - <<'PYEOF'
import pathlib, re, sys
deps = {}
for m in re.finditer(r"^rf_add_layer\((\w+)(?:\s+DEPS\s+([\w ]+))?\)",
                     pathlib.Path("CMakeLists.txt").read_text(), re.M):
    deps[m.group(1)] = (m.group(2) or "").split()
def closure(layer, seen=None):
    seen = set() if seen is None else seen
    for d in deps[layer]:
        if d not in seen:
            seen.add(d)
            closure(d, seen)
    return seen
bad = []
for layer in deps:
    allowed = closure(layer) | {layer}
    for root in (pathlib.Path("src/recordflow") / layer, pathlib.Path("include/recordflow") / layer):
        for f in sorted(root.glob("*")):
            if f.suffix not in (".cc", ".h", ".inc") or f.stem.endswith("_test") or \
               f.stem.endswith("_test_util"):
                continue
            for n, line in enumerate(f.read_text().splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"recordflow/(\w+)/', line)
                if m and m.group(1) in deps and m.group(1) not in allowed:
                    bad.append(f"{f}:{n}: layer '{layer}' includes '{m.group(1)}', which it does "
                               f"not build on (CMakeLists.txt: rf_add_layer({layer} DEPS ...))")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PYEOF
then
  status=1
fi

if [[ $status == 0 ]]; then
  echo "lint: clean (clang-format: ${#cxx[@]} files, ruff: ${#py[@]} files, layer includes)"
elif [[ $fix == 0 ]]; then
  echo "lint: failed; scripts/lint.sh --fix applies what can be applied automatically"
fi
exit $status
