// The Jinja engine (src/chat/jinja): syntax, whitespace control, values and
// operators, control flow and scoping, macros, errors with their positions,
// and the limits that keep an untrusted template bounded. Filters, tests,
// methods and tojson are in jinja_filters_test.cpp; the real chat templates
// in chat_template_parity_test.cpp.
#include "chat/jinja/jinja.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "jinja_test_util.h"

namespace deltagen {
namespace {

using test::expect_render_error;
using test::expect_renders;
using test::render;

// ---- text and whitespace control (trim_blocks and lstrip_blocks on, as in transformers) ----

TEST(Jinja, TextAndComments) {
  expect_renders({
      {R"j(plain text)j", "", R"j(plain text)j"},
      {R"j({# comment #}a{# two
lines #}b)j",
       "", R"j(ab)j"},
      {"a\n  {# indented comment #}\nb", "", "a\nb"},
      {"x {#- strip -#}  y", "", "xy"},
      {"text\n", "", "text"},  // keep_trailing_newline is off: one final newline goes
      {"text\n\n", "", "text\n"},
      {"a\r\nb\rc\r\n", "", "a\nb\nc"},  // newlines become \n
  });
}

TEST(Jinja, TrimBlocksAndLstripBlocks) {
  expect_renders({
      {"a\n  {% if true %}\n    b\n  {% endif %}\nc\n", "", "a\n    b\nc"},
      {"{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}\n", "", "  1\n  2\n"},
      {"  {{ 1 }}  {% if true %}  x  {% endif %}  \n", "", "  1    x    "},  // lstrip only at line starts
      {"{% if true %}a{% endif %}\n\n", "", "a"},   // the final newline goes, trim_blocks takes the other
      {"  {%+ if true %}k{% endif %}", "", "  k"},  // + keeps the spaces before
      {"{% if true +%}\nj{% endif %}", "", "\nj"},  // + keeps the newline after
      {"  {# c #}\nx", "", "x"},
      {"\t {% set x = 1 %}\ny{{ x }}", "", "y1"},
  });
}

TEST(Jinja, WhitespaceMarkers) {
  expect_renders({
      {"a  {%- if true -%}  b  {%- endif -%}  c", "", "abc"},
      {"x {{- ' y ' -}} z", "", "x y z"},
      {"a \n\t {{- 1 }}", "", "a1"},
      {"{{ 1 -}}\n\n  2", "", "12"},
      {"{{- 1 }}", "", "1"},
      {"a\u3000{%- if true %}b{% endif %}", "", "ab"},  // Python's whitespace, not just ASCII
  });
}

TEST(Jinja, RawBlocks) {
  expect_renders({
      {"{% raw %}{{ not parsed }} {% if %}{% endraw %}", "", "{{ not parsed }} {% if %}"},
      {"  {% raw %}  {{ y }}  {% endraw %}\nz", "", "  {{ y }}  z"},
      {"{%- raw -%}  {{ x }}  {%- endraw -%}  after", "", "{{ x }}after"},
  });
}

// ---- literals and printing (Python's str and repr) ----

TEST(Jinja, Literals) {
  expect_renders({
      {R"j({{ 1 }}|{{ -1 }}|{{ 1_000 }}|{{ 0x1f }}|{{ 0o17 }}|{{ 0b101 }})j", "", "1|-1|1000|31|15|5"},
      {R"j({{ 1.5 }}|{{ 1e3 }}|{{ 2.5e-3 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 0.0001 }}|{{ 0.00001 }}|{{ 0.1 + 0.2 }})j", "",
       "1.5|1000.0|0.0025|1e+16|1000000000000000.0|0.0001|1e-05|0.30000000000000004"},
      {R"j({{ "a\tb\nc\\d\"e\x41\u00e9\U0001F600\101" }}|{{ 'it\'s' }}|{{ "\q" }})j", "", "a\tb\nc\\d\"eAé😀A|it's|\\q"},
      {R"j({{ "a" 'b' "c" }})j", "", "abc"},
      {R"j({{ "\é" }})j", "", "\\xe9"},  // as Jinja: a backslash before non-ASCII text stays, spelled \xNN
      {R"j({{ none }}{{ None }}{{ true }}{{ True }}{{ false }}{{ False }})j", "", "NoneNoneTrueTrueFalseFalse"},
      {R"j({{ [1, "a", none, true, 1.5, [2], {"k": "v"}] }})j", "", "[1, 'a', None, True, 1.5, [2], {'k': 'v'}]"},
      {R"j({{ (1,) }}|{{ () }}|{{ (1, 2) }}|{{ 1, 2 }}|{{ {} }}|{{ [] }})j", "", "(1,)|()|(1, 2)|(1, 2)|{}|[]"},
      {R"j({{ ["it's", 'say "hi"', "both ' \"", "tab\t", "\x00\x7f\u200b\u3000é中😀"] }})j", "",
       R"j(["it's", 'say "hi"', 'both \' "', 'tab\t', '\x00\x7f\u200b\u3000é中😀'])j"},
      {R"j({{ x }}|{{ y }}|{{ z }}|{{ w }})j", R"j({"x": null, "y": true, "z": false, "w": 3.0})j",
       "None|True|False|3.0"},
      {R"j({{ x }})j", R"j({"x": {"b": [1, {"c": null}], "a": "d"}})j", "{'b': [1, {'c': None}], 'a': 'd'}"},
  });
}

// ---- operators ----

TEST(Jinja, Arithmetic) {
  expect_renders({
      {R"j({{ 7 / 2 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 7 % -3 }})j", "", "3.5|3|-4|1|2|-2"},
      {R"j({{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 7.5 // 2 }}|{{ -7.5 % 2 }})j", "",
       "1024|0.5|64|4|3.0|0.5"},
      {R"j({{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 10 / 4 * 2 }}|{{ 1 + 1.5 }}|{{ true + 1 }}|{{ 4 / 2 }})j", "",
       "7|9|5.0|2.5|2|2.0"},
      {R"j({{ "a" + "b" }}|{{ "ab" * 3 }}|{{ 3 * "ab" }}|{{ [1] * 2 }}|{{ [1] + [2] }}|{{ (1,) + (2,) }}|{{ "x" * -1 }})j",
       "", "ab|ababab|ababab|[1, 1]|[1, 2]|(1, 2)|"},
      {R"j({{ "a" ~ 1 ~ none ~ true ~ 1.0 ~ undefined_name }})j", "", "a1NoneTrue1.0"},
      {R"j({{ -9223372036854775807 - 1 }}|{{ 2**62 }}|{{ 10**18 }})j", "",
       "-9223372036854775808|4611686018427387904|1000000000000000000"},
  });
}

TEST(Jinja, ComparisonsAndLogic) {
  expect_renders({
      {R"j({{ 1 == 1.0 }}|{{ 1 == true }}|{{ "a" < "b" }}|{{ [1,2] < [1,3] }}|{{ 1 < 2 < 3 }}|{{ 3 > 2 > 2 }})j", "",
       "True|True|True|True|True|False"},
      {R"j({{ none == none }}|{{ x == y }}|{{ [1] == (1,) }}|{{ {"a":1} == {"a":1} }}|{{ 1 != 2 }})j", "",
       "True|True|False|True|True"},
      {R"j({{ "a" in "abc" }}|{{ 1 in [1,2] }}|{{ "k" in {"k":1} }}|{{ 3 not in [1] }}|{{ "x" in y }})j", "",
       "True|True|True|True|False"},
      {R"j({{ not true }}|{{ not none }}|{{ 1 and 2 }}|{{ 0 and 2 }}|{{ 0 or "x" }}|{{ [] or {} }}|{{ none or none }})j",
       "", "False|True|2|0|x|{}|None"},
      {R"j({{ "a" if true else "b" }}|{{ "a" if false else "b" }}|{{ "a" if false }}|{{ 1 if 0 else 2 if 0 else 3 }})j",
       "", "a|b||3"},
      {R"j({{ not x is defined }}|{{ -1|abs }}|{{ 1 + 2 is number }})j", "",
       "True|1|2"},  // is and | bind tightest: 1 + (2 is number)
  });
}

TEST(Jinja, SubscriptsAndSlices) {
  const char* list = R"j({"x": [1, 2, 3, 4]})j";
  expect_renders({
      {R"j({{ x[0] }}|{{ x[-1] }}|{{ x[5] }}|{{ x[1:] }}|{{ x[:2] }}|{{ x[::-1] }}|{{ x[::2] }})j", list,
       "1|4||[2, 3, 4]|[1, 2]|[4, 3, 2, 1]|[1, 3]"},
      {R"j({{ x[-2:] }}|{{ x[1:-1] }}|{{ x[10:] }}|{{ x[3:1] }}|{{ x[3:1:-1] }}|{{ x.0 }})j", list,
       "[3, 4]|[2, 3]|[]|[]|[4, 3]|1"},
      {R"j({{ s[0] }}|{{ s[-1] }}|{{ s[::-1] }}|{{ s[1:3] }}|{{ s|length }}|{{ s[10] }})j", R"j({"s": "héllo中😀"})j",
       "h|😀|😀中olléh|él|7|"},
      {R"j({{ (1, 2, 3)[1:] }})j", "", "(2, 3)"},
      // Steps and bounds at the ends of int64.
      {R"j([{{ "abc"[2:1] }}]{{ "abc"[::9223372036854775807] }}{{ [1,2,3][::-9223372036854775807-1] }})j", "",
       "[]a[3]"},
      {R"j({{ range(9223372036854775806, 9223372036854775807, 10)|list }})j", "", "[9223372036854775806]"},
  });
}

TEST(Jinja, AttributesAndItems) {
  expect_renders({
      // a.b tries the attribute (dict methods) first, then the item; a['b'] the other way round
      {R"j({{ d.a }}|{{ d["a"] }}|{{ d.b }}|{{ d.get("a") }}|{{ d["items"] }}|{{ d.items() | list }})j",
       R"j({"d": {"a": 1, "items": "X"}})j", "1|1||1|X|[('a', 1), ('items', 'X')]"},
      {R"j({{ x.1.a }}|{{ x[1]["a"] }}|{{ x[1].a }})j", R"j({"x": ["z", {"a": "b"}]})j", "b|b|b"},
      {R"j({{ none.a }}|{{ none.a is defined }}|{{ [1][5] is defined }}|{{ d._private }})j",
       R"j({"d": {"_private": 7}})j", "|False|False|7"},
  });
}

// ---- undefined ----

TEST(Jinja, UndefinedIsEmptyAndFalsy) {
  expect_renders({
      {R"j([{{ u }}]{% if u %}yes{% else %}no{% endif %}{% for i in u %}x{% endfor %})j", "", "[]no"},
      {R"j({{ u is defined }}|{{ u is undefined }}|{{ u|default("d") }}|{{ u|length }}|{{ u ~ "s" }}|{{ u == u }})j",
       "", "False|True|d|0|s|True"},
      {R"j({{ u is iterable }}|{{ u is sequence }}|{{ u is mapping }}|{{ u is string }}|{{ u|list }}|{{ u|trim }}|)j",
       "", "True|True|False|False|[]||"},
      {R"j({{ d.missing is defined }}|{{ d.missing|default(1) }})j", R"j({"d": {}})j", "False|1"},
  });
}

TEST(Jinja, UsingUndefinedFails) {
  expect_render_error("{{ u.a }}", "'u' is undefined", 1, 5);
  expect_render_error("{{ d.a.b }}", "'dict object' has no attribute 'a'", 1, 7, R"j({"d": {}})j");
  expect_render_error("{{ u + 1 }}", "'u' is undefined", 1, 6);
  expect_render_error("{{ u() }}", "'u' is undefined", 1, 4);
  expect_render_error("{{ u|tojson }}", "Object of type Undefined is not JSON serializable", 1, 6);
  expect_render_error("{{ [1][3].x }}", "list object has no element 3", 1, 10);
}

// ---- control flow and scoping ----

TEST(Jinja, IfElifElse) {
  const char* t = "{% if x %}a{% elif y %}b{% else %}c{% endif %}";
  EXPECT_EQ(render(t, R"j({"x": 1})j"), "a");
  EXPECT_EQ(render(t, R"j({"y": 1})j"), "b");
  EXPECT_EQ(render(t, "{}"), "c");
  EXPECT_EQ(render("{% if x, %}t{% endif %}", "{}"), "t");  // a tuple is truthy
}

TEST(Jinja, ForLoops) {
  expect_renders({
      {R"j({% for i in x %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %})j",
       R"j({"x": ["p", "q"]})j", "10TrueFalse221|21FalseTrue210|"},
      {R"j({% for i in x %}{{ loop.previtem }}>{{ i }}>{{ loop.nextitem }};{{ loop.cycle("a", "b") }} {% endfor %})j",
       R"j({"x": ["p", "q", "r"]})j", ">p>q;a p>q>r;b q>r>;a "},
      {R"j({% for i in x if i > 1 %}{{ i }}{{ loop.index }}{{ loop.length }}{% else %}none{% endfor %})j",
       R"j({"x": [1, 2, 3]})j", "212322"},
      {R"j({% for i in x if i > 1 %}{{ i }}{% else %}none{% endfor %})j", R"j({"x": [0]})j", "none"},
      {R"j({% for k, v in x|items %}{{ k }}={{ v }};{% endfor %}{% for k in x %}{{ k }}{% endfor %})j",
       R"j({"x": {"b": 1, "a": 2}})j", "b=1;a=2;ba"},
      {R"j({% for a, b in [[1, 2], (3, 4), "xy"] %}{{ a }}{{ b }} {% endfor %}{% for c in "hé" %}[{{ c }}]{% endfor %})j",
       "", "12 34 xy [h][é]"},
      {R"j({% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %})j",
       "", "0134"},
      {R"j({% for i in range(2) %}{% for j in range(2) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %})j",
       "", "001 012 1|101 112 2|"},
      // break and continue reach the loop through with and set blocks
      {R"j({% for i in [1,2,3] %}{% with %}{% if i == 2 %}{% break %}{% endif %}{% endwith %}{{ i }}{% endfor %})j", "",
       "1"},
      {R"j({% for i in [1,2] %}{% set x %}a{% continue %}{% endset %}{{ i }}{% endfor %}.)j", "", "."},
  });
}

// What a for body sets lives for one iteration; `if` adds no scope; only a
// namespace carries values out of a loop.
TEST(Jinja, Scoping) {
  expect_renders({
      {R"j({% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }},{% endfor %}{{ x }})j", "",
       "01,01,01,0"},
      {R"j({% if true %}{% set a = 5 %}{% endif %}{{ a }})j", "", "5"},
      {R"j({% for i in [1] %}{% set a = 5 %}{% endfor %}[{{ a }}|{{ i }}])j", "", "[|]"},
      {R"j({% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }})j", "",
       "6"},
      {R"j({% set x = 5 %}{% with %}{% set x = 1 %}{% endwith %}{{ x }})j", "", "5"},
      {R"j({% set messages = "mine" %}{{ messages }})j", R"j({"messages": "context"})j", "mine"},
  });
}

TEST(Jinja, SetForms) {
  expect_renders({
      {R"j({% set x = 1 %}{% set y, z = 2, 3 %}{% set t = 4, 5 %}{{ x }}{{ y }}{{ z }}{{ t }})j", "", "123(4, 5)"},
      {R"j({% set b %}inner {{ 1 }}{% endset %}[{{ b }}]{% set c | upper | trim %} up {% endset %}[{{ c }}])j", "",
       "[inner 1][UP]"},
      {R"j({% set x = "a b" | upper if true else "no" %}{{ x }})j", "", "A B"},
      {R"j({% set ns = namespace(a=1, b="x") %}{% set ns.c = [1] %}{{ ns.a }}{{ ns.b }}{{ ns.c }}{{ ns }})j", "",
       "1x[1]<Namespace {'a': 1, 'b': 'x', 'c': [1]}>"},
  });
  expect_render_error("{% set d = {} %}{% set d.a = 1 %}", "cannot assign attribute on non-namespace object 'd'", 1,
                      17);
  expect_render_error("{% set a, b = [1] %}", "not enough values to unpack (expected 2, got 1)", 1, 1);
  expect_render_error("{% set a, b = [1, 2, 3] %}", "too many values to unpack (expected 2)", 1, 1);
}

TEST(Jinja, BlocksThatCapture) {
  expect_renders({
      {R"j({% filter upper %}abc{{ "d" }}{% endfilter %})j", "", "ABCD"},
      {R"j({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}])j", "", "3[]"},
      {R"j({% generation %}reply{% endgeneration %})j", "", "reply"},  // transformers' AssistantTracker tag
  });
}

TEST(Jinja, Macros) {
  expect_renders({
      {R"j({% macro m(a, b=2, c="x") %}{{ a }}-{{ b }}-{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(1, c="y") }}|{{ m(a=5) }})j",
       "", "1-2-x|1-3-x|1-2-y|5-2-x"},
      {R"j({% macro m(a, b=a ~ "!") %}{{ b }}{% endmacro %}{{ m("hi") }})j", "", "hi!"},
      {R"j({% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }})j", "", "54321"},
      {R"j({% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }})j", "", "(1, 2){'k': 3}"},
      {R"j({% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }})j", "", "[]"},  // a missing argument is undefined
      {R"j({% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% for i in [0] %}{% set x = 2 %}{{ m() }}{% endfor %})j",
       "", "11"},  // a macro sees the template's variables, not its caller's
      {R"j({% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %})j", "", "12"},
      {R"j({% macro m(x) %} {{ x }} {% endmacro %}{% set v = m(1) | trim %}[{{ v }}])j", "", "[1]"},
  });
  expect_render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "macro 'm' takes not more than 1 argument(s)", 1,
                      34);
  expect_render_error("{% macro m(a) %}{% endmacro %}{{ m(b=2) }}", "macro 'm' takes no keyword argument 'b'", 1, 34);
}

TEST(Jinja, GlobalFunctions) {
  expect_renders({
      {R"j({{ range(5)|list }}|{{ range(2, 5)|list }}|{{ range(5, 0, -2)|list }}|{{ range(0)|list }})j", "",
       "[0, 1, 2, 3, 4]|[2, 3, 4]|[5, 3, 1]|[]"},
      {R"j({{ dict(a=1, b=2) }}|{{ dict({"z": 1}, y=2) }}|{{ namespace({"q": 1}).q }})j", "",
       "{'a': 1, 'b': 2}|{'z': 1, 'y': 2}|1"},
      {R"j({% set range = "shadowed" %}{{ range }})j", "", "shadowed"},
  });
  const std::string year = render("{{ strftime_now('%Y') }}");
  EXPECT_EQ(year.size(), 4u);
  EXPECT_EQ(render("{{ strftime_now('%d %B %Y')|length > 10 }}"), "True");
}

TEST(Jinja, RaiseExceptionSaysTheTemplatesMessage) {
  expect_render_error("{%- if not messages %}\n    {{- raise_exception('No messages provided.') }}\n{%- endif %}",
                      "No messages provided.", 2, 9);
  const std::string m = test::error_message([] { render("{{ raise_exception('a\nb') }}"); });
  EXPECT_EQ(m, "t.jinja:1:4: a\\nb");  // one line, the newline spelled out
}

// ---- context ----

TEST(Jinja, ContextKeepsKeyOrderAndTypes) {
  EXPECT_EQ(render("{{ x|tojson }}|{{ x|list }}", R"j({"x": {"z": 1, "a": 2.0, "m": [true, null]}})j"),
            R"j({"z": 1, "a": 2.0, "m": [true, null]}|['z', 'a', 'm'])j");
  EXPECT_EQ(jinja::Template::parse("{{ 1 }}", "t").render(nullptr), "1");  // no context at all
  test::expect_error([] { jinja::Template::parse("x", "t.jinja").render(nlohmann::ordered_json::array()); },
                     "t.jinja: the context must be a JSON object");
  test::expect_error(
      [] {
        jinja::Template::parse("x", "t.jinja").render({{"s", std::string("\xff")}});
      },
      "t.jinja: context 's': context string is not valid UTF-8");
}

TEST(Jinja, RendersFromManyThreadsAtOnce) {
  const auto t = jinja::Template::parse("{% for i in range(50) %}{{ i ~ x }}{% endfor %}", "t.jinja");
  std::vector<std::thread> threads;
  std::vector<std::string> out(4);
  for (int k = 0; k < 4; ++k) threads.emplace_back([&, k] { out[size_t(k)] = t.render({{"x", std::to_string(k)}}); });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(out[size_t(k)].size(), 90u + 50u) << k;
}

}  // namespace
}  // namespace deltagen
