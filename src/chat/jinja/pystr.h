// Python's str semantics over UTF-8: what a chat template's string
// operations do in transformers (Python Jinja), where a string is a sequence of
// code points. Lengths, indexes and slices count code points, whitespace is
// str.isspace()'s, and repr() quotes like Python.
//
// Every string reaching here is valid UTF-8: the template source and the
// context are checked where they enter, and everything built from them is
// built from whole code points.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deltagen::jinja::pystr {

// Decodes the code point at s[i] (valid UTF-8) and moves i past it.
char32_t next(std::string_view s, size_t& i);
void append(std::string& out, char32_t cp);

// Number of code points.
size_t length(std::string_view s);
// Byte offset of each code point, then s.size(): offsets[k] starts code point k.
std::vector<size_t> offsets(std::string_view s);
// Code point index of byte offset `byte` (which starts a code point).
int64_t index_of_byte(std::string_view s, size_t byte);

// str.isspace() of one code point (Unicode White_Space plus the ASCII
// separators \x1c..\x1f, as CPython defines it).
bool is_space(char32_t cp);
// Python's line boundaries (str.splitlines).
bool is_line_break(char32_t cp);
// str.isprintable() of one code point, for repr(): false for controls,
// format characters, separators other than ' ', surrogates and private use.
bool is_printable(char32_t cp);
// Letters that have case (str.istitle()'s notion), from the case tables below.
bool is_cased(char32_t cp);

// Case mapping: full for Latin (incl. Vietnamese), Greek, Cyrillic, Armenian
// and fullwidth Latin, which covers the text chat templates transform; other
// scripts pass through unchanged.
std::string lower(std::string_view s);
std::string upper(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize()
std::string title(std::string_view s);       // str.title()
std::string swapcase(std::string_view s);
// str.islower() / str.isupper(): some cased letter, and all of them in that case.
bool is_lower(std::string_view s);
bool is_upper(std::string_view s);

// str.strip/lstrip/rstrip: `chars` unset strips whitespace, else any of its code points.
std::string_view strip(std::string_view s, const std::optional<std::string_view>& chars, bool left, bool right);

// str.split / str.rsplit: `sep` unset splits on whitespace runs. maxsplit < 0: no limit.
// Throws std::invalid_argument for an empty separator (the caller words the Error).
std::vector<std::string> split(std::string_view s, const std::optional<std::string_view>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string_view>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);

// str.find / str.rfind over code point indexes; -1 when absent.
int64_t find(std::string_view s, std::string_view sub);
int64_t rfind(std::string_view s, std::string_view sub);
// str.count (non-overlapping).
int64_t count(std::string_view s, std::string_view sub);
// str.replace; count < 0: all. The result's size is checked against max_bytes
// before it is built (a replace can multiply a string's size).
std::string replace(std::string_view s, std::string_view old, std::string_view with, int64_t count, size_t max_bytes);

// repr(str): quoted, escaped like Python ('a', "it's", '\n', '\x00', '\u200b').
std::string repr(std::string_view s);

}  // namespace deltagen::jinja::pystr
