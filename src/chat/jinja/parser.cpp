// The statement half of the parser: text, {{ }}, and the block tags.
#include "chat/jinja/parser.h"

#include <algorithm>

#include "deltagen/error.h"

namespace deltagen::jinja {

// Block nesting, bounded like expression nesting; the open blocks are kept
// to name the one left unclosed.
struct Parser::BodyGuard {
  Parser& parser;
  BodyGuard(Parser& p, const Position& at, std::string tag) : parser(p) {
    if (int(parser.open_blocks_.size()) >= parser.max_depth_)
      parser.fail(at, "blocks nested more than " + std::to_string(parser.max_depth_) + " deep");
    parser.open_blocks_.emplace_back(std::move(tag), at);
  }
  ~BodyGuard() { parser.open_blocks_.pop_back(); }
};

Parser::Parser(std::vector<Token> tokens, const std::string& name, int max_depth)
    : tokens_(std::move(tokens)), name_(name), max_depth_(max_depth) {}

Body Parser::parse_template() { return parse_body({}, nullptr); }

Body Parser::parse_body(const std::vector<std::string_view>& ends, std::string* ended) {
  Body body;
  while (true) {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::End:
        if (!ends.empty()) {
          std::string wanted;
          for (auto e : ends) wanted += (wanted.empty() ? "'" : " or '") + std::string(e) + "'";
          const auto& [tag, opened] = open_blocks_.back();
          fail(opened, "unclosed '" + tag + "' block: the template ends before " + wanted);
        }
        return body;
      case TokenKind::Text: {
        Token text = next();
        body.push_back(std::make_unique<TextStmt>(position(text), std::move(text.text)));
        break;
      }
      case TokenKind::PrintBegin: {
        const Position at = position(next());
        ExprPtr value = parse_tuple(true);
        if (peek().kind != TokenKind::PrintEnd) fail_unexpected("'}}'");
        next();
        body.push_back(std::make_unique<PrintStmt>(at, std::move(value)));
        break;
      }
      case TokenKind::BlockBegin: {
        const Token& tag = peek(1);
        if (tag.kind == TokenKind::Name &&
            std::find(ends.begin(), ends.end(), std::string_view(tag.text)) != ends.end()) {
          next();  // {%
          std::string tag_name = next().text;
          if (ended) *ended = std::move(tag_name);
          return body;
        }
        body.push_back(parse_block());
        break;
      }
      default:
        fail_unexpected("text or a tag");
    }
  }
}

StmtPtr Parser::parse_block() {
  const Position at = position(next());  // {%
  if (peek().kind != TokenKind::Name) fail_unexpected("a tag name");
  const Token tag = next();
  const std::string& name = tag.text;
  if (name == "if") return parse_if(at);
  if (name == "for") return parse_for(at);
  if (name == "set") return parse_set(at);
  if (name == "macro") return parse_macro(at);
  if (name == "filter") return parse_filter_block(at);
  if (name == "with") return parse_with(at);
  if (name == "break" || name == "continue") {
    if (loop_depth_ == 0) fail(at, "'" + name + "' outside a for loop");
    end_block();
    return std::make_unique<LoopControlStmt>(name == "break" ? StmtKind::Break : StmtKind::Continue, at);
  }
  if (name == "generation") {  // transformers' AssistantTracker extension
    end_block();
    BodyGuard guard(*this, at, name);
    auto scope = std::make_unique<ScopeStmt>(at);
    scope->body = parse_body({"endgeneration"}, nullptr);
    end_block();
    return scope;
  }
  if (name == "include" || name == "import" || name == "from" || name == "extends")
    fail(at, "'" + name + "' is not supported: a chat template renders alone, with no other templates to load");
  if (name == "block" || name == "call" || name == "autoescape") fail(at, "the '" + name + "' tag is not supported");
  if (name.starts_with("end") || name == "elif" || name == "else") {
    if (open_blocks_.empty()) fail(at, "unexpected '" + name + "': no block is open here");
    const auto& [tag, opened] = open_blocks_.back();
    fail(at, "unexpected '" + name + "': the innermost open block is '" + tag + "' (opened at " +
                 std::to_string(opened.line) + ":" + std::to_string(opened.column) + ")");
  }
  fail(at, "unknown tag '" + name + "'");
}

StmtPtr Parser::parse_if(Position at) {
  BodyGuard guard(*this, at, "if");
  auto stmt = std::make_unique<IfStmt>(at);
  ExprPtr condition = parse_tuple(false);
  end_block();
  while (true) {
    std::string ended;
    Body body = parse_body({"elif", "else", "endif"}, &ended);
    stmt->branches.emplace_back(std::move(condition), std::move(body));
    if (ended == "elif") {
      condition = parse_tuple(false);
      end_block();
      continue;
    }
    end_block();
    if (ended == "else") {
      stmt->else_body = parse_body({"endif"}, nullptr);
      end_block();
    }
    return stmt;
  }
}

StmtPtr Parser::parse_for(Position at) {
  BodyGuard guard(*this, at, "for");
  auto stmt = std::make_unique<ForStmt>(at);
  stmt->target = parse_target(false);
  if (!skip_name("in")) fail_unexpected("'in'");
  stmt->iterable = parse_tuple(false, {"recursive"});
  if (skip_name("if")) stmt->filter = parse_expression();
  if (at_name("recursive")) fail(position(peek()), "recursive for loops are not supported");
  end_block();
  ++loop_depth_;
  std::string ended;
  stmt->body = parse_body({"else", "endfor"}, &ended);
  --loop_depth_;
  end_block();
  if (ended == "else") {
    stmt->else_body = parse_body({"endfor"}, nullptr);
    end_block();
  }
  return stmt;
}

// {% set x = v %}, {% set a, b = v %}, {% set ns.x = v %}, or the block form
// {% set x | filters %}...{% endset %}.
StmtPtr Parser::parse_set(Position at) {
  Target target = parse_target(true);
  if (skip_operator("=")) {
    auto stmt = std::make_unique<SetStmt>(at);
    stmt->target = std::move(target);
    stmt->value = parse_tuple(true);
    end_block();
    return stmt;
  }
  if (target.unpack) fail_unexpected("'='");
  BodyGuard guard(*this, at, "set");
  auto stmt = std::make_unique<SetBlockStmt>(at);
  stmt->target = std::move(target);
  stmt->filters = parse_filter_chain();
  end_block();
  stmt->body = parse_body({"endset"}, nullptr);
  end_block();
  return stmt;
}

Target Parser::parse_target(bool allow_attribute) {
  Target target;
  target.at = position(peek());
  const bool parenthesized = skip_operator("(");
  while (true) {
    target.names.push_back(expect_name());
    if (allow_attribute && !parenthesized && target.names.size() == 1 && at_operator(".")) {
      next();
      target.attribute = expect_name();
      return target;
    }
    if (!skip_operator(",")) break;
    target.unpack = true;
    if (peek().kind != TokenKind::Name) break;  // a trailing comma: `for a, in ...`
  }
  if (parenthesized) {
    expect_operator(")");
    target.unpack = true;
  }
  for (const auto& n : target.names)
    if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
      fail(target.at, "cannot assign to '" + n + "'");
  return target;
}

StmtPtr Parser::parse_macro(Position at) {
  BodyGuard guard(*this, at, "macro");
  auto stmt = std::make_unique<MacroStmt>(at);
  stmt->name = expect_name();
  expect_operator("(");
  while (!skip_operator(")")) {
    if (!stmt->params.empty()) expect_operator(",");
    if (skip_operator(")")) break;  // trailing comma
    MacroParam param{expect_name(), nullptr};
    if (skip_operator("="))
      param.default_value = parse_expression();
    else if (!stmt->params.empty() && stmt->params.back().default_value)
      fail(position(peek()), "a macro parameter without a default follows one with a default");
    stmt->params.push_back(std::move(param));
  }
  end_block();
  macros_.push_back(stmt.get());
  const int outer_loops = loop_depth_;
  loop_depth_ = 0;  // break/continue cannot reach a loop outside the macro
  stmt->body = parse_body({"endmacro"}, nullptr);
  loop_depth_ = outer_loops;
  macros_.pop_back();
  if (peek().kind == TokenKind::Name && peek().text == stmt->name) next();  // {% endmacro name %}
  end_block();
  return stmt;
}

StmtPtr Parser::parse_filter_block(Position at) {
  BodyGuard guard(*this, at, "filter");
  auto stmt = std::make_unique<FilterBlockStmt>(at);
  ExprPtr first = parse_filter(nullptr, false);
  stmt->filters.push_back(std::move(first));
  for (auto& f : parse_filter_chain()) stmt->filters.push_back(std::move(f));
  end_block();
  stmt->body = parse_body({"endfilter"}, nullptr);
  end_block();
  return stmt;
}

StmtPtr Parser::parse_with(Position at) {
  BodyGuard guard(*this, at, "with");
  auto stmt = std::make_unique<WithStmt>(at);
  while (peek().kind != TokenKind::BlockEnd) {
    if (!stmt->assignments.empty()) expect_operator(",");
    Target target = parse_target(false);
    expect_operator("=");
    stmt->assignments.emplace_back(std::move(target), parse_expression());
  }
  end_block();
  stmt->body = parse_body({"endwith"}, nullptr);
  end_block();
  return stmt;
}

std::vector<ExprPtr> Parser::parse_filter_chain() {
  std::vector<ExprPtr> filters;
  while (at_operator("|")) filters.push_back(parse_filter(nullptr, true));
  return filters;
}

void Parser::end_block() {
  if (peek().kind != TokenKind::BlockEnd) fail_unexpected("'%}'");
  next();
}

// ---- tokens ----

const Token& Parser::peek(size_t ahead) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }

Token Parser::next() {
  Token t = peek();
  if (pos_ < tokens_.size() - 1) ++pos_;
  return t;
}

bool Parser::at_operator(std::string_view op) const { return peek().kind == TokenKind::Operator && peek().text == op; }
bool Parser::at_name(std::string_view name) const { return peek().kind == TokenKind::Name && peek().text == name; }

bool Parser::skip_operator(std::string_view op) {
  if (!at_operator(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

void Parser::expect_operator(std::string_view op) {
  if (!skip_operator(op)) fail_unexpected("'" + std::string(op) + "'");
}

std::string Parser::expect_name() {
  if (peek().kind != TokenKind::Name) fail_unexpected("a name");
  return next().text;
}

std::string Parser::describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::Text:
      return "template text";
    case TokenKind::PrintBegin:
      return "'{{'";
    case TokenKind::PrintEnd:
      return "'}}'";
    case TokenKind::BlockBegin:
      return "'{%'";
    case TokenKind::BlockEnd:
      return "'%}'";
    case TokenKind::String:
      return "a string";
    case TokenKind::End:
      return "the end of the template";
    default:
      return "'" + t.text + "'";
  }
}

void Parser::fail(const Position& at, const std::string& problem) const {
  throw Error(name_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " + problem);
}

void Parser::fail_unexpected(const std::string& wanted) const {
  fail(position(peek()), "expected " + wanted + ", got " + describe(peek()));
}

}  // namespace deltagen::jinja
