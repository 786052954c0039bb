// The Jinja engine's builtins: filters, tests, the Python methods of str,
// dict and list, printf-style % and str.format, Markup, and tojson written
// exactly as Python's json.dumps writes it (transformers' tojson).
#include <gtest/gtest.h>

#include "jinja_test_util.h"

namespace deltagen {
namespace {

using test::expect_render_error;
using test::expect_renders;
using test::render;

TEST(JinjaFilters, Strings) {
  expect_renders({
      {R"j({{ "  a b  "|trim }}|{{ "xxaxx"|trim("x") }}|{{ "abc"|upper }}|{{ "ABC"|lower }}|{{ "hELLO"|capitalize }})j",
       "", "a b|a|ABC|abc|Hello"},
      {R"j({{ "hello wORLD-foo bar_baz"|title }}|{{ "a-b(c d"|title }})j", "", "Hello World-Foo Bar_baz|A-B(C D"},
      {R"j({{ "aaa"|replace("a", "b") }}|{{ "aaa"|replace("a", "b", 2) }}|{{ "abc"|replace("", "-") }})j", "",
       "bbb|bba|-a-b-c-"},
      {R"j({{ "a\nb\n\nc"|indent }}|{{ "a\nb"|indent(2, true) }}|{{ "a\n\nb"|indent(2, blank=true) }}|{{ "a\nb"|indent("> ") }})j",
       "", "a\n    b\n\n    c|  a\n  b|a\n  \n  b|a\n> b"},
      {R"j({{ "abc"|center(9) }}|{{ "ab"|center(9) }}|{{ "ab"|center(8) }}|{{ "a b  c"|wordcount }}|{{ "中文 text"|wordcount }})j",
       "", "   abc   |    ab   |   ab   |3|2"},
      {R"j({{ "hello world foo"|truncate(9) }}|{{ "hello world foo bar"|truncate(11, true) }}|{{ "short"|truncate(3, leeway=5) }})j",
       "", "hello...|hello wo...|short"},
      {R"j({{ "%s=%d"|format("a", 1) }}|{{ "%(k)s"|format(k="v") }}|{{ "abc"|reverse }}|{{ 5|string ~ "" }})j", "",
       "a=1|v|cba|5"},
  });
}

TEST(JinjaFilters, Numbers) {
  expect_renders({
      {R"j({{ "42"|int }}|{{ "4.7"|int }}|{{ "x"|int }}|{{ "x"|int(7) }}|{{ 3.9|int }}|{{ " 12 "|int }}|{{ "0x1A"|int(0, 16) }}|{{ "1_000"|int }})j",
       "", "42|4|0|7|3|12|26|1000"},
      {R"j({{ "3.5"|float }}|{{ "x"|float }}|{{ 3|float }}|{{ "1e3"|float }}|{{ -3|abs }}|{{ -3.5|abs }}|{{ true|int }})j",
       "", "3.5|0.0|3.0|1000.0|3|3.5|1"},
      {R"j({{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(2) }}|{{ 7|round }}|{{ 1234.5|round(-2) }}|{{ 3.1|round(0, "ceil") }}|{{ 3.9|round(method="floor") }})j",
       "", "2.0|4.0|2.67|7|1200.0|4.0|3.0"},
  });
}

TEST(JinjaFilters, Sequences) {
  const char* items = R"j({"x": [{"n": 2}, {"n": 1}, {"n": 3}]})j";
  expect_renders({
      {R"j({{ [3,1,2]|first }}|{{ [3,1,2]|last }}|{{ []|first }}|{{ "abc"|first }}|{{ "abc"|last }}|{{ {"a":1,"b":2}|first }})j",
       "", "3|2||a|c|a"},
      {R"j({{ [3,1,2]|length }}|{{ "abc"|count }}|{{ {"a":1}|length }}|{{ "ab"|list }}|{{ {"a":1}|list }}|{{ [3,1,2]|reverse|list }})j",
       "", "3|3|1|['a', 'b']|['a']|[2, 1, 3]"},
      {R"j({{ [3,1,2]|sort }}|{{ [3,1,2]|sort(reverse=true) }}|{{ ["b","A","a","B"]|sort }}|{{ ["b","A","a","B"]|sort(case_sensitive=true) }})j",
       "", "[1, 2, 3]|[3, 2, 1]|['A', 'a', 'b', 'B']|['A', 'B', 'a', 'b']"},
      {R"j({{ [1,2,3]|join(",") }}|{{ ["a","b"]|join }}|{{ x|join(", ", attribute="n") }})j", items,
       "1,2,3|ab|2, 1, 3"},
      {R"j({{ x|sort(attribute="n")|map(attribute="n")|list }}|{{ x|map(attribute="m", default=0)|list }}|{{ x|map(attribute="n")|sum }})j",
       items, "[1, 2, 3]|[0, 0, 0]|6"},
      {R"j({{ x|selectattr("n", "gt", 1)|list }}|{{ x|rejectattr("n", "eq", 1)|map(attribute="n")|list }}|{{ x|selectattr("n")|list|length }})j",
       items, "[{'n': 2}, {'n': 3}]|[2, 3]|3"},
      {R"j({{ [1,2,3,4]|select("odd")|list }}|{{ [1,2,3,4]|reject("even")|list }}|{{ [0,1,"",none,"a"]|select|list }})j",
       "", "[1, 3]|[1, 3]|[1, 'a']"},
      {R"j({{ ["a","B"]|map("upper")|list }}|{{ [1,2]|map("string")|join("-") }}|{{ [1,1,2,"a","A"]|unique|list }})j",
       "", "['A', 'B']|1-2|[1, 2, 'a']"},
      {R"j({{ [3,1,2]|min }}|{{ [3,1,2]|max }}|{{ ["b","A"]|max }}|{{ x|max(attribute="n") }}|[{{ []|max }}])j", items,
       "1|3|b|{'n': 3}|[]"},
      {R"j({{ {"b":1,"a":2}|dictsort }}|{{ {"b":1,"a":2}|dictsort(by="value") }}|{{ {"b":1,"a":2}|dictsort(reverse=true) }})j",
       "", "[('a', 2), ('b', 1)]|[('b', 1), ('a', 2)]|[('b', 1), ('a', 2)]"},
      {R"j({{ {"b":1,"a":2}|items|list }}|{{ [1,2,3,4,5]|batch(2)|list }}|{{ [1,2,3,4,5]|batch(2, 0)|list }}|{{ [1,2,3,4,5]|slice(2)|list }})j",
       "", "[('b', 1), ('a', 2)]|[[1, 2], [3, 4], [5]]|[[1, 2], [3, 4], [5, 0]]|[[1, 2, 3], [4, 5]]"},
      {R"j({{ [1,2]|sum(start=10) }}|{{ "b"|attr("upper") is defined }}|{{ {"a": 1}|attr("a") is defined }})j", "",
       "13|True|False"},
  });
}

TEST(JinjaFilters, DefaultAndString) {
  expect_renders({
      {R"j({{ x|default("d") }}|{{ none|default("d") }}|{{ ""|default("d", true) }}|{{ 0|d("z", boolean=true) }}|{{ "v"|default("d") }})j",
       "", "d|None|d|z|v"},
      {R"j({{ 1|string }}|{{ none|string }}|{{ [1,"a"]|string }}|{{ 1.0|string }}|{{ true|string|upper }}|[{{ u|string }}])j",
       "", "1|None|[1, 'a']|1.0|TRUE|[]"},
  });
}

TEST(JinjaFilters, EscapingAndMarkup) {
  expect_renders({
      {R"j({{ "<a href='x'>&</a>"|e }}|{{ "<b>"|escape|escape }}|{{ "<b>"|safe|e }}|{{ "<b>"|forceescape }}|{{ 5|e }})j",
       "", "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;|&lt;b&gt;|<b>|&lt;b&gt;|5"},
      // Markup + str escapes the str (markupsafe); ~ joins plain text
      {R"j({{ ("<b>"|safe) + "<i>" }}|{{ "<i>" + ("<b>"|safe) }}|{{ ("<b>"|safe) ~ "<i>" }}|{{ "x"|safe is escaped }})j",
       "", "<b>&lt;i&gt;|&lt;i&gt;<b>|<b><i>|True"},
  });
}

TEST(JinjaFilters, ToJsonIsPythonsJsonDumps) {
  const char* x = R"j({"x": {"b": [1, 2, {"c": null}], "a": true, "é": "ü"}})j";
  expect_renders({
      {R"j({{ x|tojson }})j", x, R"j({"b": [1, 2, {"c": null}], "a": true, "é": "ü"})j"},
      {R"j({{ x|tojson(indent=2) }})j", x,
       "{\n  \"b\": [\n    1,\n    2,\n    {\n      \"c\": null\n    }\n  ],\n  \"a\": true,\n  \"é\": \"ü\"\n}"},
      {R"j({{ x|tojson(sort_keys=true) }})j", x, R"j({"a": true, "b": [1, 2, {"c": null}], "é": "ü"})j"},
      {R"j({{ x|tojson(separators=[",", ":"]) }}|{{ [1]|tojson(indent="\t") }}|{{ {}|tojson(indent=2) }}|{{ []|tojson(indent=2) }})j",
       x, "{\"b\":[1,2,{\"c\":null}],\"a\":true,\"é\":\"ü\"}|[\n\t1\n]|{}|[]"},
      {R"j({{ "é\n\u0001\"\\/\t\b\f\r😀"|tojson }}|{{ "é😀\x7f"|tojson(ensure_ascii=true) }})j", "",
       R"j("é\n\u0001\"\\/\t\b\f\r😀"|"\u00e9\ud83d\ude00\u007f")j"},
      {R"j({{ "\x7f"|tojson }})j", "", "\"\x7f\""},  // DEL is not escaped unless ensure_ascii
      {R"j({{ [1.0, 1e-05, 1e20, 0.1, -0.0, 1e16, 123.456, 1e-7, 2.5e-300]|tojson }})j", "",
       "[1.0, 1e-05, 1e+20, 0.1, -0.0, 1e+16, 123.456, 1e-07, 2.5e-300]"},
      {R"j({{ {1: "int", 2.5: "float", true: "bool", none: "none"}|tojson }}|{{ (1, "t")|tojson }})j", "",
       R"j({"1": "bool", "2.5": "float", "null": "none"}|[1, "t"])j"},  // true == 1: one key
      {R"j({{ x|tojson }})j", R"j({"x": [9007199254740993, -5, 3.0]})j", "[9007199254740993, -5, 3.0]"},
  });
  expect_render_error("{{ namespace()|tojson }}", "Object of type Namespace is not JSON serializable", 1, 16);
}

TEST(JinjaTests, TypesAndValues) {
  expect_renders({
      {R"j({{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ 1 is integer }}{{ "a" is string }}{{ none is none }})j",
       "", "TrueTrueFalseTrueTrueTrueTrue"},
      {R"j({{ {} is mapping }}{{ [] is sequence }}{{ "a" is sequence }}{{ {} is sequence }}{{ 1 is iterable }}{{ "s" is iterable }})j",
       "", "TrueTrueTrueTrueFalseTrue"},
      {R"j({{ true is boolean }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ x is not defined }})j",
       "", "TrueTrueFalseTrueFalseTrue"},
      {R"j({{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 1 is eq 1 }}{{ 1 is ne 1 }})j",
       "", "TrueFalseTrueFalseTrueFalse"},
      {R"j({{ "a" is in "abc" }}{{ "abc" is lower }}{{ "ABC" is upper }}{{ "aB" is lower }}{{ range is callable }}{{ 1 is callable }})j",
       "", "TrueTrueTrueFalseTrueFalse"},
      {R"j({{ 1 is lt 2 }}{{ 2 is ge 2 }}{{ 1 is sameas 1 }}{{ none is sameas none }}{{ "upper" is filter }}{{ "odd" is test }})j",
       "", "TrueTrueTrueTrueTrueTrue"},
  });
}

TEST(JinjaMethods, Strings) {
  expect_renders({
      {R"j({{ "Hello".startswith("He") }}{{ "Hello".endswith(("x","lo")) }}{{ "a,b,,c".split(",") }}{{ " a  b ".split() }})j",
       "", "TrueTrue['a', 'b', '', 'c']['a', 'b']"},
      {R"j({{ "a b c".split(" ", 1) }}{{ "a,b,c".rsplit(",", 1) }}{{ "xxhixx".strip("x") }}[{{ "  hi ".lstrip() }}][{{ "  hi ".rstrip() }}])j",
       "", "['a', 'b c']['a,b', 'c']hi[hi ][  hi]"},
      {R"j({{ "hello".find("l") }}{{ "hello".rfind("l") }}{{ "hello".find("z") }}{{ "hello".count("l") }}{{ "-".join(["a","b"]) }})j",
       "", "23-12a-b"},
      {R"j({{ "hello".replace("l", "L") }}{{ "hello".upper() }}{{ "Hello World".lower() }}{{ "hello world".title() }}{{ "Hi".swapcase() }})j",
       "", "heLLoHELLOhello worldHello WorldhI"},
      {R"j({{ "a\nb\r\nc".splitlines() }}{{ "abc".zfill(5) }}{{ "a=b=c".partition("=") }}{{ "42".isdigit() }}{{ "ab".isalpha() }})j",
       "", "['a', 'b', 'c']00abc('a', '=', 'b=c')TrueTrue"},
      {R"j({{ "ab".ljust(4, "*") }}|{{ "ab".rjust(4) }}|{{ "prefix_x".removeprefix("prefix_") }}|{{ "中文abc".find("a") }})j",
       "", "ab**|  ab|x|2"},
      {R"j({{ "{} and {}".format("a", "b") }}|{{ "{0}{1}{0}".format("x", "y") }}|{{ "{name}!".format(name="N") }})j",
       "", "a and b|xyx|N!"},
      {R"j({{ "{:>5}|{:<5}|{:^5}|{:05d}|{:.2f}|{:,}|{:x}|{!r}".format("a", "b", "c", 42, 3.14159, 1234567, 255, "q") }})j",
       "", "    a|b    |  c  |00042|3.14|1,234,567|ff|'q'"},
  });
}

TEST(JinjaMethods, DictsAndLists) {
  expect_renders({
      {R"j({{ [1,2,3].index(2) }}{{ [1,2,2].count(2) }}{{ {"a":1}.keys()|list }}{{ {"a":1}.values()|list }}{{ {"a":1}.items()|list }})j",
       "", "12['a'][1][('a', 1)]"},
      {R"j({{ d.get("z", 5) }}|{{ d.get("z") }}|{{ d.get("a") }})j", R"j({"d": {"a": 1}})j", "5|None|1"},
  });
  // The sandbox transformers renders in is immutable.
  expect_render_error("{{ [1,2].append(3) }}", "access to attribute 'append' of 'list' object is unsafe.", 1, 9);
  expect_render_error("{% set d = {} %}{{ d.update({'a': 1}) }}",
                      "access to attribute 'update' of 'dict' object is unsafe.", 1, 21);
}

TEST(JinjaOperators, PercentFormatting) {
  expect_renders({
      {R"j({{ "%s-%d" % ("a", 3) }}|{{ "%5.2f|%r" % (3.14159, "x") }}|{{ "%(a)s-%(b)d" % {"a": 1, "b": 2} }}|{{ "%s" % [1,2] }})j",
       "", "a-3| 3.14|'x'|1-2|[1, 2]"},
      {R"j({{ "%d" % 2.7 }}|{{ "%s" % none }}|{{ "%.3s" % "abcdef" }}|{{ "%05.1f" % -2.25 }}|{{ "%i" % true }})j", "",
       "2|None|abc|-02.2|1"},
      {R"j({{ "%x %X %o %e %g %c %%" % (255, 255, 8, 1e-7, 0.0001, 65) }})j", "", "ff FF 10 1.000000e-07 0.0001 A %"},
  });
  expect_render_error(R"j({{ "%s %s" % (1,) }})j", "not enough arguments for format string", 1, 12);
}

TEST(JinjaUnicode, CaseMapping) {
  expect_renders({
      {R"j({{ "ÀÉÎõü"|upper }}|{{ "ΑΒΓ ΟΔΟΣ"|lower }}|{{ "straße"|upper }}|{{ "ПРИВЕТ мир"|lower }}|{{ "привет мир"|title }})j",
       "", "ÀÉÎÕÜ|αβγ οδος|STRASSE|привет мир|Привет Мир"},
      {R"j({{ "ǅ"|lower }}|{{ "Việt Nam"|upper }}|{{ "ǆemal".capitalize() }}|{{ "ÉCOLE"|capitalize }}|{{ "中文"|upper }})j",
       "", "ǆ|VIỆT NAM|ǅemal|École|中文"},
  });
}

}  // namespace
}  // namespace deltagen
