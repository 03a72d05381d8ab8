// UTF-8 well-formedness, with one set of rules for every place that checks text: JSON output,
// file names written by extract, and whatever else turns bytes into text.
//
// Thread safety: pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace recordflow {

// Length (1 to 4) of the well-formed UTF-8 sequence that starts at text[i], or 0 when there is
// none there: a stray continuation byte, a truncated sequence, an overlong form, a surrogate
// (U+D800..U+DFFF) or a code point past U+10FFFF. Requires i < text.size().
size_t Utf8SequenceLength(std::string_view text, size_t i);

// True when all of `text` is well-formed UTF-8 by the rules above.
bool IsValidUtf8(std::string_view text);

}  // namespace recordflow
