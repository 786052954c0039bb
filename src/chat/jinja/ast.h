// The parsed template: statements (text, {{ }}, blocks) holding expressions.
// Every node keeps its line and column for error messages. Nodes are plain
// structs told apart by `kind`; the evaluator switches on it.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace deltagen::jinja {

struct Position {
  int line = 1, column = 1;
};

// ---- expressions ----

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  Literal,      // 1, 'a', true, none
  Name,         // x
  List,         // [a, b] and tuples (a, b)
  Dict,         // {k: v}
  Unary,        // -x, +x, not x
  Binary,       // arithmetic, ~, and, or
  Compare,      // a < b <= c, ==, in, not in
  Conditional,  // a if c else b
  Attribute,    // x.name
  Item,         // x[i]
  Slice,        // x[a:b:c]
  Call,         // f(args)
  Filter,       // x | f(args)
  Test,         // x is t(args)
};

enum class Op {
  Add,
  Sub,
  Mul,
  Div,
  FloorDiv,
  Mod,
  Pow,
  Concat,
  And,
  Or,
  Neg,
  Pos,
  Not,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  In,
  NotIn
};

// f(1, key=2): keyword is empty for positional arguments.
struct Argument {
  std::string keyword;
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  Position at;
  int depth = 1;  // 1 + the deepest child: the evaluator recurses this deep

  Expr(ExprKind k, Position p) : kind(k), at(p) {}
  virtual ~Expr() = default;
};

struct LiteralExpr : Expr {
  Value value;
  LiteralExpr(Position p, Value v) : Expr(ExprKind::Literal, p), value(std::move(v)) {}
};

struct NameExpr : Expr {
  std::string name;
  NameExpr(Position p, std::string n) : Expr(ExprKind::Name, p), name(std::move(n)) {}
};

struct ListExpr : Expr {
  std::vector<ExprPtr> items;
  bool tuple;
  ListExpr(Position p, bool t) : Expr(ExprKind::List, p), tuple(t) {}
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
  explicit DictExpr(Position p) : Expr(ExprKind::Dict, p) {}
};

struct UnaryExpr : Expr {
  Op op;
  ExprPtr operand;
  UnaryExpr(Position p, Op o, ExprPtr e) : Expr(ExprKind::Unary, p), op(o), operand(std::move(e)) {}
};

struct BinaryExpr : Expr {
  Op op;
  ExprPtr left, right;
  BinaryExpr(Position p, Op o, ExprPtr l, ExprPtr r)
      : Expr(ExprKind::Binary, p), op(o), left(std::move(l)), right(std::move(r)) {}
};

struct CompareExpr : Expr {
  ExprPtr first;
  std::vector<std::pair<Op, ExprPtr>> rest;
  CompareExpr(Position p, ExprPtr f) : Expr(ExprKind::Compare, p), first(std::move(f)) {}
};

struct ConditionalExpr : Expr {
  ExprPtr then_value, condition, else_value;  // else_value may be null: undefined
  explicit ConditionalExpr(Position p) : Expr(ExprKind::Conditional, p) {}
};

struct AttributeExpr : Expr {
  ExprPtr object;
  std::string name;
  AttributeExpr(Position p, ExprPtr o, std::string n)
      : Expr(ExprKind::Attribute, p), object(std::move(o)), name(std::move(n)) {}
};

struct ItemExpr : Expr {
  ExprPtr object, index;
  ItemExpr(Position p, ExprPtr o, ExprPtr i) : Expr(ExprKind::Item, p), object(std::move(o)), index(std::move(i)) {}
};

struct SliceExpr : Expr {
  ExprPtr object, start, stop, step;  // each bound may be null
  SliceExpr(Position p, ExprPtr o) : Expr(ExprKind::Slice, p), object(std::move(o)) {}
};

struct CallExpr : Expr {
  ExprPtr callee;
  std::vector<Argument> args;
  CallExpr(Position p, ExprPtr c) : Expr(ExprKind::Call, p), callee(std::move(c)) {}
};

// `x | name(args)` and `x is [not] name(args)`.
struct FilterExpr : Expr {
  ExprPtr operand;  // null in {% filter %} blocks and {% set x | f %}: the body is the operand
  std::string name;
  std::vector<Argument> args;
  bool negated = false;  // tests only
  FilterExpr(ExprKind k, Position p, ExprPtr o, std::string n)
      : Expr(k, p), operand(std::move(o)), name(std::move(n)) {}
};

// ---- statements ----

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind { Text, Print, If, For, Set, SetBlock, Macro, Break, Continue, FilterBlock, With, Scope };

struct Stmt {
  StmtKind kind;
  Position at;
  Stmt(StmtKind k, Position p) : kind(k), at(p) {}
  virtual ~Stmt() = default;
};

struct TextStmt : Stmt {
  std::string text;
  TextStmt(Position p, std::string t) : Stmt(StmtKind::Text, p), text(std::move(t)) {}
};

struct PrintStmt : Stmt {
  ExprPtr value;
  PrintStmt(Position p, ExprPtr v) : Stmt(StmtKind::Print, p), value(std::move(v)) {}
};

struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body else_body;
  explicit IfStmt(Position p) : Stmt(StmtKind::If, p) {}
};

// What `for` and `set` assign to: a name, names to unpack a sequence into,
// or a namespace attribute (set ns.attr = ...).
struct Target {
  std::vector<std::string> names;
  bool unpack = false;    // `a, b` (even `a,`): the value is unpacked
  std::string attribute;  // set only: names[0].attribute
  Position at;
};

struct ForStmt : Stmt {
  Target target;
  ExprPtr iterable, filter;  // filter: the `if` after the iterable, may be null
  Body body, else_body;
  explicit ForStmt(Position p) : Stmt(StmtKind::For, p) {}
};

struct SetStmt : Stmt {
  Target target;
  ExprPtr value;
  explicit SetStmt(Position p) : Stmt(StmtKind::Set, p) {}
};

// {% set name | filters %}...{% endset %}
struct SetBlockStmt : Stmt {
  Target target;
  std::vector<ExprPtr> filters;  // FilterExprs without operands, applied in order
  Body body;
  explicit SetBlockStmt(Position p) : Stmt(StmtKind::SetBlock, p) {}
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct MacroStmt : Stmt {
  std::string name;
  std::vector<MacroParam> params;
  Body body;
  bool takes_varargs = false, takes_kwargs = false;  // the body reads `varargs` / `kwargs`
  explicit MacroStmt(Position p) : Stmt(StmtKind::Macro, p) {}
};

// {% filter f %}...{% endfilter %}
struct FilterBlockStmt : Stmt {
  std::vector<ExprPtr> filters;
  Body body;
  explicit FilterBlockStmt(Position p) : Stmt(StmtKind::FilterBlock, p) {}
};

// {% with a = 1, b = 2 %}...{% endwith %}
struct WithStmt : Stmt {
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
  explicit WithStmt(Position p) : Stmt(StmtKind::With, p) {}
};

// A body rendered in place: transformers' {% generation %} block (it only
// marks assistant text for masks), kept so the template renders as there.
struct ScopeStmt : Stmt {
  Body body;
  explicit ScopeStmt(Position p) : Stmt(StmtKind::Scope, p) {}
};

struct LoopControlStmt : Stmt {
  using Stmt::Stmt;
};

}  // namespace deltagen::jinja
