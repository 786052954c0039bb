// Tokens -> statements and expressions, with Jinja's grammar and operator
// precedence (lowest first): `x if c else y`, or, and, not, comparisons and
// `in`, + -, ~, * / // %, **, unary - +, then filters `|`, tests `is`,
// calls, attributes and subscripts.
//
// Unknown filters and tests, and tags a sandboxed chat template cannot use
// (include, import, extends: there is nothing to load) are errors here, as
// Jinja reports them when it compiles the template.
#pragma once
#include <string>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace deltagen::jinja {

class Parser {
 public:
  // max_depth bounds the nesting of blocks and of expressions (each), so
  // that neither the parser nor the evaluator recurses without bound.
  Parser(std::vector<Token> tokens, const std::string& name, int max_depth);

  // The whole template. Throws Error "NAME:LINE:COL: problem".
  Body parse_template();

 private:
  // ---- statements (parser.cpp) ----
  // Statements until a block tag named in `ends` (which is left unread, its
  // name in *ended); with no `ends`, until the end of the template.
  Body parse_body(const std::vector<std::string_view>& ends, std::string* ended);
  StmtPtr parse_block();
  StmtPtr parse_if(Position at);
  StmtPtr parse_for(Position at);
  StmtPtr parse_set(Position at);
  StmtPtr parse_macro(Position at);
  StmtPtr parse_filter_block(Position at);
  StmtPtr parse_with(Position at);
  Target parse_target(bool allow_attribute);
  std::vector<ExprPtr> parse_filter_chain();
  void end_block();                             // expects %}
  void end_block_named(std::string_view name);  // expects {% name %}

  // ---- expressions (parser_expr.cpp) ----
 public:
  ExprPtr parse_expression();  // with `x if c else y`
 private:
  // Comma-separated expressions: one, or a tuple if there is a comma.
  // `conditional` false: the elements are parsed without `if ... else`, so a
  // following `if` stays for the caller ({% for x in xs if x %}).
  ExprPtr parse_tuple(bool conditional, const std::vector<std::string_view>& end_names = {});
  ExprPtr parse_binary(int lowest_level);
  bool peek_binary(Op& op, int& level) const;
  ExprPtr parse_unary(bool with_filters);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filters_and_tests(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_filter(ExprPtr operand, bool with_pipe);
  ExprPtr parse_test(ExprPtr operand);
  std::vector<Argument> parse_call_arguments();

  // Sets node->depth from its children; fails past max_depth.
  ExprPtr seal(ExprPtr node);

  // ---- tokens ----
  const Token& peek(size_t ahead = 0) const;
  Token next();
  bool at_operator(std::string_view op) const;
  bool at_name(std::string_view name) const;
  bool skip_operator(std::string_view op);
  bool skip_name(std::string_view name);
  void expect_operator(std::string_view op);
  std::string expect_name();
  static std::string describe(const Token& t);
  [[noreturn]] void fail(const Position& at, const std::string& problem) const;
  [[noreturn]] void fail_unexpected(const std::string& wanted) const;
  static Position position(const Token& t) { return {t.line, t.column}; }

  struct BodyGuard;       // counts block nesting
  struct RecursionGuard;  // counts expression nesting while parsing

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  const std::string& name_;
  const int max_depth_;
  int recursion_ = 0;
  std::vector<std::pair<std::string, Position>> open_blocks_;  // tag and where it opened
  int loop_depth_ = 0;              // for loops around the current statement, inside the current macro
  std::vector<MacroStmt*> macros_;  // macros being parsed, innermost last
};

}  // namespace deltagen::jinja
