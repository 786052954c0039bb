// The expression half of the parser. Precedences are Jinja's: unary minus,
// filters and tests bind tighter than any binary operator, so `-x|abs` is
// abs(-x) and `a + b is string` tests b.
#include <algorithm>

#include "chat/jinja/builtins.h"
#include "chat/jinja/parser.h"

namespace deltagen::jinja {
namespace {

int max_depth_of(const std::vector<Argument>& args) {
  int d = 0;
  for (const auto& a : args) d = std::max(d, a.value->depth);
  return d;
}

int depth_of(const ExprPtr& e) { return e ? e->depth : 0; }

// The deepest child of `e` (0 for leaves).
int deepest_child(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal:
    case ExprKind::Name:
      return 0;
    case ExprKind::List: {
      int d = 0;
      for (const auto& item : static_cast<const ListExpr&>(e).items) d = std::max(d, item->depth);
      return d;
    }
    case ExprKind::Dict: {
      int d = 0;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).entries) d = std::max({d, k->depth, v->depth});
      return d;
    }
    case ExprKind::Unary:
      return static_cast<const UnaryExpr&>(e).operand->depth;
    case ExprKind::Binary: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      return std::max(b.left->depth, b.right->depth);
    }
    case ExprKind::Compare: {
      const auto& c = static_cast<const CompareExpr&>(e);
      int d = c.first->depth;
      for (const auto& [op, operand] : c.rest) d = std::max(d, operand->depth);
      return d;
    }
    case ExprKind::Conditional: {
      const auto& c = static_cast<const ConditionalExpr&>(e);
      return std::max({depth_of(c.then_value), depth_of(c.condition), depth_of(c.else_value)});
    }
    case ExprKind::Attribute:
      return static_cast<const AttributeExpr&>(e).object->depth;
    case ExprKind::Item: {
      const auto& i = static_cast<const ItemExpr&>(e);
      return std::max(i.object->depth, i.index->depth);
    }
    case ExprKind::Slice: {
      const auto& s = static_cast<const SliceExpr&>(e);
      return std::max({depth_of(s.object), depth_of(s.start), depth_of(s.stop), depth_of(s.step)});
    }
    case ExprKind::Call: {
      const auto& c = static_cast<const CallExpr&>(e);
      return std::max(c.callee->depth, max_depth_of(c.args));
    }
    case ExprKind::Filter:
    case ExprKind::Test: {
      const auto& f = static_cast<const FilterExpr&>(e);
      return std::max(depth_of(f.operand), max_depth_of(f.args));
    }
  }
  return 0;
}

}  // namespace

// The parser's own recursion (parentheses, brackets, arguments, `not not`,
// `- -`): checked before descending, since a node's depth is only known after.
struct Parser::RecursionGuard {
  Parser& parser;
  RecursionGuard(Parser& p, const Position& at) : parser(p) {
    if (++parser.recursion_ > parser.max_depth_)
      parser.fail(at, "expression nested more than " + std::to_string(parser.max_depth_) + " deep");
  }
  ~RecursionGuard() { --parser.recursion_; }
};

ExprPtr Parser::seal(ExprPtr node) {
  node->depth = 1 + deepest_child(*node);
  if (node->depth > max_depth_) fail(node->at, "expression nested more than " + std::to_string(max_depth_) + " deep");
  return node;
}

ExprPtr Parser::parse_expression() {
  const Position at = position(peek());
  RecursionGuard guard(*this, at);
  ExprPtr value = parse_binary(0);
  while (skip_name("if")) {
    auto c = std::make_unique<ConditionalExpr>(at);
    c->then_value = std::move(value);
    c->condition = parse_binary(0);
    if (skip_name("else")) c->else_value = parse_expression();
    value = seal(std::move(c));
  }
  return value;
}

ExprPtr Parser::parse_tuple(bool conditional, const std::vector<std::string_view>& end_names) {
  const Position at = position(peek());
  auto at_end = [&] {
    const Token& t = peek();
    if (t.kind == TokenKind::PrintEnd || t.kind == TokenKind::BlockEnd || at_operator(")")) return true;
    return t.kind == TokenKind::Name &&
           std::find(end_names.begin(), end_names.end(), std::string_view(t.text)) != end_names.end();
  };
  auto tuple = std::make_unique<ListExpr>(at, true);
  bool is_tuple = false;
  while (true) {
    if (!tuple->items.empty()) expect_operator(",");
    if (!tuple->items.empty() && at_end()) break;
    tuple->items.push_back(conditional ? parse_expression() : parse_binary(0));
    if (!at_operator(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) return std::move(tuple->items.front());
  return seal(std::move(tuple));
}

namespace {

// Binary precedence levels, lowest first. `not` is a prefix operator between
// `and` and the comparisons; ** is left-associative, as in Jinja.
enum Level { kOr, kAnd, kNot, kCompare, kAdd, kConcat, kMul, kPow, kUnary };

}  // namespace

// The binary operator at the current token and its level; false if none.
bool Parser::peek_binary(Op& op, int& level) const {
  const Token& t = peek();
  if (t.kind == TokenKind::Name) {
    if (t.text == "or") return op = Op::Or, level = kOr, true;
    if (t.text == "and") return op = Op::And, level = kAnd, true;
    if (t.text == "in") return op = Op::In, level = kCompare, true;
    if (t.text == "not" && peek(1).kind == TokenKind::Name && peek(1).text == "in")
      return op = Op::NotIn, level = kCompare, true;
    return false;
  }
  if (t.kind != TokenKind::Operator) return false;
  static constexpr std::pair<std::string_view, Op> kOps[] = {
      {"==", Op::Eq}, {"!=", Op::Ne},       {"<", Op::Lt},  {"<=", Op::Le},    {">", Op::Gt},
      {">=", Op::Ge}, {"+", Op::Add},       {"-", Op::Sub}, {"~", Op::Concat}, {"*", Op::Mul},
      {"/", Op::Div}, {"//", Op::FloorDiv}, {"%", Op::Mod}, {"**", Op::Pow}};
  for (const auto& [text, o] : kOps) {
    if (t.text != text) continue;
    op = o;
    level = o == Op::Add || o == Op::Sub                                        ? kAdd
            : o == Op::Concat                                                   ? kConcat
            : o == Op::Pow                                                      ? kPow
            : o == Op::Mul || o == Op::Div || o == Op::FloorDiv || o == Op::Mod ? kMul
                                                                                : kCompare;
    return true;
  }
  return false;
}

// Operators of level `lowest` and above, by precedence climbing: one C++
// frame per parenthesis level rather than one per precedence level, which
// keeps deeply nested (hostile) templates cheap on the stack.
ExprPtr Parser::parse_binary(int lowest) {
  ExprPtr left;
  if (lowest <= kNot && at_name("not") && !(peek(1).kind == TokenKind::Name && peek(1).text == "in")) {
    const Position at = position(next());
    RecursionGuard guard(*this, at);
    ExprPtr operand = parse_binary(kNot);
    left = seal(std::make_unique<UnaryExpr>(at, Op::Not, std::move(operand)));
  } else {
    left = parse_unary(true);
  }
  Op op;
  int level;
  while (peek_binary(op, level) && level >= lowest) {
    const Position at = position(peek());
    if (op == Op::NotIn) next();
    next();
    if (level != kCompare) {
      ExprPtr right = parse_binary(level + 1);
      left = seal(std::make_unique<BinaryExpr>(at, op, std::move(left), std::move(right)));
      continue;
    }
    // a < b <= c: one node, each comparison against the previous operand.
    auto cmp = std::make_unique<CompareExpr>(left->at, std::move(left));
    cmp->rest.emplace_back(op, parse_binary(kCompare + 1));
    while (peek_binary(op, level) && level == kCompare) {
      if (op == Op::NotIn) next();
      next();
      cmp->rest.emplace_back(op, parse_binary(kCompare + 1));
    }
    left = seal(std::move(cmp));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filters) {
  ExprPtr node;
  if (at_operator("-") || at_operator("+")) {
    const Token op = next();
    RecursionGuard guard(*this, position(op));
    node = seal(std::make_unique<UnaryExpr>(position(op), op.text == "-" ? Op::Neg : Op::Pos, parse_unary(false)));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filters) node = parse_filters_and_tests(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  const Position at = position(t);
  switch (t.kind) {
    case TokenKind::Name: {
      const std::string name = next().text;
      if (name == "true" || name == "True") return std::make_unique<LiteralExpr>(at, Value(true));
      if (name == "false" || name == "False") return std::make_unique<LiteralExpr>(at, Value(false));
      if (name == "none" || name == "None") return std::make_unique<LiteralExpr>(at, Value::none());
      if (!macros_.empty() && name == "varargs") macros_.back()->takes_varargs = true;
      if (!macros_.empty() && name == "kwargs") macros_.back()->takes_kwargs = true;
      return std::make_unique<NameExpr>(at, name);
    }
    case TokenKind::String: {
      std::string text = next().text;
      while (peek().kind == TokenKind::String) text += next().text;  // 'a' 'b' is 'ab', as in Python
      return std::make_unique<LiteralExpr>(at, Value(std::move(text)));
    }
    case TokenKind::Int:
      return std::make_unique<LiteralExpr>(at, Value(next().int_value));
    case TokenKind::Float:
      return std::make_unique<LiteralExpr>(at, Value(next().float_value));
    case TokenKind::Operator:
      if (t.text == "(") {
        next();
        if (skip_operator(")")) return seal(std::make_unique<ListExpr>(at, true));  // ()
        ExprPtr inner = parse_tuple(true);
        expect_operator(")");
        return inner;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  fail_unexpected("an expression");
}

ExprPtr Parser::parse_list() {
  const Position at = position(next());  // [
  auto list = std::make_unique<ListExpr>(at, false);
  while (!skip_operator("]")) {
    if (!list->items.empty()) {
      expect_operator(",");
      if (skip_operator("]")) break;
    }
    list->items.push_back(parse_expression());
  }
  return seal(std::move(list));
}

ExprPtr Parser::parse_dict() {
  const Position at = position(next());  // {
  auto dict = std::make_unique<DictExpr>(at);
  while (!skip_operator("}")) {
    if (!dict->entries.empty()) {
      expect_operator(",");
      if (skip_operator("}")) break;
    }
    ExprPtr key = parse_expression();
    expect_operator(":");
    dict->entries.emplace_back(std::move(key), parse_expression());
  }
  return seal(std::move(dict));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_operator(".") || at_operator("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_operator("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

// A call is placed where its callee starts: raise_exception('x') reports there.
ExprPtr Parser::parse_call(ExprPtr callee) {
  const Position at = callee->at;
  auto call = std::make_unique<CallExpr>(at, std::move(callee));
  call->args = parse_call_arguments();
  return seal(std::move(call));
}

ExprPtr Parser::parse_filters_and_tests(ExprPtr node) {
  while (true) {
    if (at_operator("|")) {
      node = parse_filter(std::move(node), true);
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_operator("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token open = next();
  const Position at = position(open);
  if (open.text == ".") {
    if (peek().kind == TokenKind::Name) return seal(std::make_unique<AttributeExpr>(at, std::move(node), next().text));
    if (peek().kind == TokenKind::Int) {
      auto index = std::make_unique<LiteralExpr>(position(peek()), Value(next().int_value));
      return seal(std::make_unique<ItemExpr>(at, std::move(node), std::move(index)));
    }
    fail_unexpected("an attribute name");
  }
  // [index] or [start:stop:step]
  ExprPtr start;
  if (!at_operator(":")) start = parse_expression();
  if (skip_operator("]")) return seal(std::make_unique<ItemExpr>(at, std::move(node), std::move(start)));
  if (at_operator(",")) fail(position(peek()), "tuple subscripts (x[a, b]) are not supported");
  auto slice = std::make_unique<SliceExpr>(at, std::move(node));
  slice->start = std::move(start);
  expect_operator(":");
  if (!at_operator("]") && !at_operator(":")) slice->stop = parse_expression();
  if (skip_operator(":") && !at_operator("]")) slice->step = parse_expression();
  expect_operator("]");
  return seal(std::move(slice));
}

std::vector<Argument> Parser::parse_call_arguments() {
  expect_operator("(");
  std::vector<Argument> args;
  while (!skip_operator(")")) {
    if (!args.empty()) {
      expect_operator(",");
      if (skip_operator(")")) break;
    }
    if (at_operator("*") || at_operator("**")) fail(position(peek()), "*args and **kwargs in calls are not supported");
    Argument arg;
    if (peek().kind == TokenKind::Name && peek(1).kind == TokenKind::Operator && peek(1).text == "=") {
      arg.keyword = next().text;
      next();
    } else if (!args.empty() && !args.back().keyword.empty()) {
      fail(position(peek()), "a positional argument follows a keyword argument");
    }
    arg.value = parse_expression();
    args.push_back(std::move(arg));
  }
  return args;
}

// `| name`, `| name(args)`. Without a pipe: the first filter of {% filter %}.
ExprPtr Parser::parse_filter(ExprPtr operand, bool with_pipe) {
  if (with_pipe) expect_operator("|");
  const Position at = position(peek());
  const std::string name = expect_name();
  if (const std::string why = check_filter_name(name); !why.empty()) fail(at, why);
  auto filter = std::make_unique<FilterExpr>(ExprKind::Filter, at, std::move(operand), name);
  if (at_operator("(")) filter->args = parse_call_arguments();
  return seal(std::move(filter));
}

// `is [not] name`, `is name(args)`, or `is name arg` (one argument without parentheses).
ExprPtr Parser::parse_test(ExprPtr operand) {
  const Position at = position(next());  // is
  const bool negated = skip_name("not");
  const Position name_at = position(peek());
  const std::string name = expect_name();
  if (const std::string why = check_test_name(name); !why.empty()) fail(name_at, why);
  auto test = std::make_unique<FilterExpr>(ExprKind::Test, at, std::move(operand), name);
  test->negated = negated;
  const Token& t = peek();
  if (at_operator("(")) {
    test->args = parse_call_arguments();
  } else if ((t.kind == TokenKind::Name && t.text != "else" && t.text != "or" && t.text != "and") ||
             t.kind == TokenKind::String || t.kind == TokenKind::Int || t.kind == TokenKind::Float ||
             at_operator("[") || at_operator("{")) {
    if (at_name("is")) fail(position(t), "tests cannot be chained with 'is'");
    Argument arg;
    arg.value = parse_postfix(parse_primary());
    test->args.push_back(std::move(arg));
  }
  return seal(std::move(test));
}

}  // namespace deltagen::jinja
