// A template is untrusted input: every way it can be wrong is a one-line
// Error "NAME:LINE:COL: problem", and every way it can try to run away
// (recursion, loops, output, memory, nesting) stops at a limit, quickly.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "chat/jinja/jinja.h"
#include "jinja_test_util.h"

namespace deltagen {
namespace {

using test::expect_render_error;
using test::render;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(JinjaErrors, SyntaxErrorsSayWhere) {
  expect_render_error("ok\n{% if x %}a", "unclosed 'if' block: the template ends before 'elif' or 'else' or 'endif'", 2,
                      1);
  expect_render_error("{% for x in y %}\n  {% if x %}\n{% endfor %}",
                      "unexpected 'endfor': the innermost open block is 'if' (opened at 2:3)", 3, 1);
  expect_render_error("{% endif %}", "unexpected 'endif': no block is open here", 1, 1);
  expect_render_error("{% macro m() %}x", "unclosed 'macro' block", 1, 1);
  expect_render_error("a {# never closed", "unclosed comment", 1, 3);
  expect_render_error("{{ 'abc }}", "unclosed string literal", 1, 4);
  expect_render_error("x\n  {{ 1 + ", "unclosed tag: no '}}'", 2, 3);
  expect_render_error("{% if true %}", "unclosed 'if' block", 1, 1);
  expect_render_error("{% if %}{% endif %}", "expected an expression, got '%}'", 1, 7);
  expect_render_error("{{ }}", "expected an expression, got '}}'", 1, 4);
  expect_render_error("{{ 1 2 }}", "expected '}}', got '2'", 1, 6);
  expect_render_error("{{ f(a=1, 2) }}", "a positional argument follows a keyword argument", 1, 11);
  expect_render_error("{{ 'a' | nosuch }}", "no filter named 'nosuch'", 1, 10);
  expect_render_error("{{ 1 is nosuch }}", "no test named 'nosuch'", 1, 9);
  expect_render_error("{{ x | urlize }}", "the 'urlize' filter is not supported", 1, 8);
  expect_render_error("{% frobnicate %}", "unknown tag 'frobnicate'", 1, 1);
  expect_render_error("{% do x.append(1) %}", "unknown tag 'do'", 1, 1);
  expect_render_error("{% break %}", "'break' outside a for loop", 1, 1);
  expect_render_error("{{ 'a\\x4' }}", "truncated \\x escape", 1, 6);
  expect_render_error("{{ '\\ud800' }}", "surrogate code point", 1, 5);
  expect_render_error("{{ 99999999999999999999 }}", "integer literal too large", 1, 4);
  expect_render_error("{{ a @ b }}", "unexpected character '@' in a tag", 1, 6);
  expect_render_error("{{ \"中文\" ~ u.x }}", "'u' is undefined", 1, 12);  // columns count characters
  expect_render_error("ok\n\xff", "invalid UTF-8", 2, 1);
}

TEST(JinjaErrors, NoFilesNoImports) {
  for (const char* tag : {"include", "import", "extends", "from"})
    expect_render_error(std::string("{% ") + tag + " 'other.jinja' %}",
                        std::string("'") + tag + "' is not supported: a chat template renders alone", 1, 1);
  expect_render_error("{% call m() %}{% endcall %}", "the 'call' tag is not supported", 1, 1);
  expect_render_error("{% for x in y recursive %}{% endfor %}", "recursive for loops are not supported", 1, 15);
  // Python internals are not reachable: they are just missing attributes.
  EXPECT_EQ(render("{{ ''.__class__ }}|{{ ns.__dict__ }}", R"j({"ns": {}})j"), "|");
  expect_render_error("{{ ''.__class__.__mro__ }}", "has no attribute '__class__'", 1, 16);
}

TEST(JinjaErrors, RuntimeErrorsSayWhere) {
  expect_render_error("{{ 1 / 0 }}", "division by zero", 1, 6);
  expect_render_error("{{ 5 % 0 }}", "integer division or modulo by zero", 1, 6);
  expect_render_error("line\n  {{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str", 2, 10);
  expect_render_error("{{ 1 - 'a' }}", "unsupported operand type(s) for -: 'int' and 'str'", 1, 6);
  expect_render_error("{% for i in 5 %}{% endfor %}", "'int' object is not iterable", 1, 1);
  expect_render_error("{{ 1 < 'a' }}", "'<' not supported between instances of 'int' and 'str'", 1, 4);
  expect_render_error("{{ 9223372036854775807 + 1 }}", "integer overflow", 1, 24);
  expect_render_error("{{ x|items }}", "Can only get item pairs from a mapping.", 1, 6, R"j({"x": [1]})j");
  expect_render_error("{{ 'a'.split('') }}", "empty separator", 1, 7);
}

// Each limit ends the render with an Error, in well under a second in a
// release build. The bound only catches a limit that does not stop the
// template (which then runs for minutes, or for ever): 5 s was missed by a
// sanitizer build on a loaded 2-core machine (5.14 s), so it is 30 s.
class JinjaLimits : public ::testing::Test {
 protected:
  void SetUp() override { start_ = std::chrono::steady_clock::now(); }
  void TearDown() override {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    EXPECT_LT(seconds, 30.0) << "a limit took too long to stop the template";
  }
  std::chrono::steady_clock::time_point start_;
};

TEST_F(JinjaLimits, EndlessMacroRecursion) {
  expect_render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested more than 128 deep", 1, 20);
  // Mutual recursion, and recursion through a filter argument.
  expect_render_error("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
                      "nested more than 128 deep", 1, 57);
}

TEST_F(JinjaLimits, RecursionThatBranchesRunsOutOfSteps) {
  // Depth 20, two calls per level: 2^20 calls, stopped by the step budget.
  jinja::Limits limits;
  limits.max_loop_iterations = 20000;
  expect_render_error("{% macro f(n) %}{% if n < 20 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}",
                      "too many loop iterations", 1, 49, "", limits);
}

TEST_F(JinjaLimits, HugeLoops) {
  expect_render_error("{% for i in range(10**9) %}{% endfor %}", "range too big", 1, 13);
  jinja::Limits tenth;
  tenth.max_loop_iterations = 100000;  // the default is 1,000,000; a tenth keeps the test quick under ASan
  expect_render_error(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}"
      "{% endfor %}{% endfor %}",
      "too many loop iterations: more than 100000", 1, 53, "", tenth);
  jinja::Limits small;
  small.max_loop_iterations = 10;
  expect_render_error("{% for i in range(11) %}{% endfor %}", "too many loop iterations: more than 10", 1, 1, "",
                      small);
  EXPECT_EQ(render("{% for i in range(10) %}{% endfor %}ok", "", small), "ok");
}

TEST_F(JinjaLimits, DeeplyNestedSource) {
  const int n = 100000;  // far past any stack: must be refused, not recursed into
  expect_render_error("{{ " + repeat("(", n) + "1" + repeat(")", n) + " }}", "expression nested more than 128 deep", 1,
                      132);
  expect_render_error("{{ " + repeat("[", n) + repeat("]", n) + " }}", "expression nested more than 128 deep", 1, 132);
  expect_render_error("{{ " + repeat("not ", n) + "x }}", "expression nested more than 128 deep", 1, 512);
  expect_render_error("{{ " + repeat("- ", n) + "1 }}", "expression nested more than 128 deep", 1, 258);
  expect_render_error("{{ x" + repeat("|trim", n) + " }}", "expression nested more than 128 deep", 1, 641);
  expect_render_error("{{ 1" + repeat(" + 1", n) + " }}", "expression nested more than 128 deep", 1, 514);
  expect_render_error("{{ x" + repeat(".a", n) + " }}", "expression nested more than 128 deep", 1, 259);
  expect_render_error(repeat("{% if true %}", 1000) + repeat("{% endif %}", 1000), "blocks nested more than 128 deep",
                      1, 1665);
  // Deep but within the limit renders.
  EXPECT_EQ(render("{{ " + repeat("(", 100) + "1" + repeat(")", 100) + " }}"), "1");
  jinja::Limits shallow;
  shallow.max_depth = 8;
  expect_render_error("{{ ((((((((1)))))))) }}", "expression nested more than 8 deep", 1, 12, "", shallow);
}

TEST_F(JinjaLimits, OutputAndStrings) {
  jinja::Limits small;
  small.max_output_bytes = 1000;
  expect_render_error("{% for i in range(600) %}xx{% endfor %}", "output too large: more than 1000 bytes", 1, 26, "",
                      small);
  expect_render_error("{{ 'x' * 10**12 }}", "string too long", 1, 8);
  expect_render_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                      "string too long", 1, 75);
  expect_render_error("{{ ('ab' * 1000000)|replace('', 'wxyz') }}", "string too long", 1, 21);
  expect_render_error("{{ [1] * 10**9 }}", "list too long", 1, 8);
  // Everything built counts, not only what is printed: 32 x max_output_bytes.
  small.max_output_bytes = 1 << 16;
  expect_render_error("{% set big = 'x' * 30000 %}{% for i in range(1000) %}{% set s = big ~ big %}{% endfor %}",
                      "built too much text", 1, 69, "", small);
}

// Work that grows with a string's length counts too (256 bytes scanned is a
// step): comparing, measuring, searching, indexing a 4 MB string in a loop
// stops long before the loop ends.
TEST_F(JinjaLimits, ScanningLongStringsInALoop) {
  jinja::Limits limits;
  limits.max_loop_iterations = 50000;  // 12 MB of scanning: quick under ASan too
  const std::string setup = "{% set big = 'x' * 4000000 %}{% set other = 'x' * 4000000 %}{% for i in range(100000) %}";
  for (const char* body : {"{% if big == other %}{% endif %}", "{{ big|length }}", "{{ 'y' in big }}", "{{ big[-1] }}",
                           "{{ big.find('y') }}", "{{ big < other }}"})
    test::expect_error([&] { render(setup + body + "{% endfor %}", "", limits); }, "too many loop iterations");
}

// Found by jinja_fuzz ({{ [x] * -22*10**18+62 }}): an empty sequence times
// 10**18 looped 10**18 times to build nothing.
TEST_F(JinjaLimits, EmptySequenceTimesHugeCount) {
  EXPECT_EQ(render("{{ ([] * 10**18)|length }}{{ ('' * 10**18)|length }}{{ [] * -22*10**18 }}"), "00[]");
}

TEST_F(JinjaLimits, TemplateSize) {
  jinja::Limits small;
  small.max_template_bytes = 100;
  test::expect_error([&] { jinja::Template::parse(std::string(101, 'x'), "t.jinja", small); },
                     "t.jinja: template too large: 101 bytes, more than the 100 allowed");
  EXPECT_NO_THROW(jinja::Template::parse(std::string(100, 'x'), "t.jinja", small));
}

TEST_F(JinjaLimits, NestedValues) {
  expect_render_error("{% set ns = namespace(l=[]) %}{% for i in range(2000) %}{% set ns.l = [ns.l] %}{% endfor %}",
                      "values nested more than 512 deep", 1, 57);
  // A namespace that holds itself: printing and tojson stop instead of recursing forever.
  expect_render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nested more than 512 deep", 1, 47);
  expect_render_error("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns == namespace() }}{{ ns.me|tojson }}",
                      "is not JSON serializable", 1, 81);
  // A chain of 20000 namespaces, each holding the next: freed without recursing
  // down the chain (the render keeps every namespace and frees them in order).
  EXPECT_EQ(render("{% set ns = namespace(bottom=namespace()) %}{% for i in range(20000) %}{% set n = namespace() %}"
                   "{% set b = ns.bottom %}{% set b.next = n %}{% set ns.bottom = n %}{% endfor %}ok"),
            "ok");
  // Context nesting.
  nlohmann::ordered_json deep = 1;
  for (int i = 0; i < 2000; ++i) deep = nlohmann::ordered_json::array({deep});
  test::expect_error(
      [&] {
        jinja::Template::parse("{{ x }}", "t.jinja").render({{"x", deep}});
      },
      "t.jinja: context 'x': context nested more than 128 deep");
}

}  // namespace
}  // namespace deltagen
