// Statements and the render's budgets. Expressions are in interpreter_expr.cpp.
#include "chat/jinja/interpreter.h"

#include <nlohmann/json.hpp>

#include "chat/jinja/builtins.h"
#include "chat/jinja/problem.h"
#include "chat/jinja/work.h"
#include "deltagen/error.h"

namespace deltagen::jinja {

// Sends the output into `buffer` while alive (macro bodies, {% set %} and
// {% filter %} blocks render into strings).
struct Interpreter::OutputCapture {
  Interpreter& interpreter;
  std::string* saved;
  OutputCapture(Interpreter& in, std::string& buffer) : interpreter(in), saved(in.out_) { in.out_ = &buffer; }
  ~OutputCapture() { interpreter.out_ = saved; }
};

namespace {

// Makes `scope` current while alive.
struct ScopeSwitch {
  std::shared_ptr<Scope>& current;
  std::shared_ptr<Scope> saved;
  ScopeSwitch(std::shared_ptr<Scope>& cur, std::shared_ptr<Scope> scope) : current(cur), saved(std::move(cur)) {
    current = std::move(scope);
  }
  ~ScopeSwitch() { current = std::move(saved); }
};

std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

}  // namespace

Interpreter::Interpreter(const std::string& name, const Limits& limits)
    : name_(name), limits_(limits), bytes_left_(uint64_t(limits.max_output_bytes) * 32) {}

Interpreter::~Interpreter() {
  // Namespaces are the only values that can hold themselves; emptying them
  // all breaks such cycles (and frees long namespace chains without recursion).
  for (auto& ns : namespaces_) ns->attrs = Dict();
}

std::string Interpreter::render(const Body& body, const nlohmann::ordered_json& context) {
  if (!context.is_object() && !context.is_null()) throw Error(name_ + ": the context must be a JSON object");
  root_ = std::make_shared<Scope>();
  scope_ = root_;
  if (context.is_object()) {
    for (const auto& [key, value] : context.items()) {
      try {
        root_->vars[key] = from_json(value, limits_.max_depth);
      } catch (const Problem& p) {
        throw Error(name_ + ": context '" + key + "': " + p.message);
      }
    }
  }
  std::string out;
  out_ = &out;
  WorkBudget work(limits_.max_loop_iterations);
  exec_body(body);
  out_ = nullptr;
  return out;
}

// ---- budgets ----

void Interpreter::step(int64_t n) { charge_steps(n); }

Value Interpreter::text(std::string s, bool safe) {
  if (s.size() > limits_.max_output_bytes)
    problem("string too long: " + std::to_string(s.size()) + " bytes, more than the " +
            std::to_string(limits_.max_output_bytes) + " allowed");
  if (s.size() > bytes_left_) problem("the render built too much text (more than 32 times max_output_bytes)");
  bytes_left_ -= s.size();
  return Value(std::move(s), safe);
}

Value Interpreter::list(List items, bool tuple) {
  const uint64_t bytes = items.size() * sizeof(Value);
  if (bytes > bytes_left_) problem("the render built too much data (more than 32 times max_output_bytes)");
  bytes_left_ -= bytes;
  return Value(std::move(items), tuple);
}

std::string Interpreter::str(const Value& v) { return to_str(v, limits_.max_output_bytes); }

Value Interpreter::make_namespace(std::shared_ptr<Namespace> ns) {
  step();
  namespaces_.push_back(ns);
  return Value(std::move(ns));
}

void Interpreter::write(std::string_view s) {
  if (out_->size() + s.size() > limits_.max_output_bytes)
    problem("output too large: more than " + std::to_string(limits_.max_output_bytes) + " bytes");
  if (s.size() > bytes_left_) problem("the render built too much text (more than 32 times max_output_bytes)");
  bytes_left_ -= s.size();
  out_->append(s);
}

void Interpreter::fail_at(const Position& at, const std::string& problem) const {
  throw Error(name_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " + problem);
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const auto& s : body) {
    const Flow flow = exec(*s);
    if (flow != Flow::Normal) return flow;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  DepthGuard guard(*this, s.at);
  try {
    switch (s.kind) {
      case StmtKind::Text:
        write(static_cast<const TextStmt&>(s).text);
        break;
      case StmtKind::Print: {
        const Value v = eval(*static_cast<const PrintStmt&>(s).value);
        if (v.is_string())
          write(v.str());
        else
          write(str(v));
        break;
      }
      case StmtKind::If:
        return exec_if(static_cast<const IfStmt&>(s));
      case StmtKind::For:
        return exec_for(static_cast<const ForStmt&>(s));
      case StmtKind::Set:
        exec_set(static_cast<const SetStmt&>(s));
        break;
      case StmtKind::SetBlock:
        return exec_set_block(static_cast<const SetBlockStmt&>(s));
      case StmtKind::Macro:
        define_macro(static_cast<const MacroStmt&>(s));
        break;
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
      case StmtKind::FilterBlock:
        return exec_filter_block(static_cast<const FilterBlockStmt&>(s));
      case StmtKind::With:
        return exec_with(static_cast<const WithStmt&>(s));
      case StmtKind::Scope:
        return exec_body(static_cast<const ScopeStmt&>(s).body);
    }
  } catch (const Problem& p) {
    fail_at(s.at, p.message);
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_if(const IfStmt& s) {
  for (const auto& [condition, body] : s.branches)
    if (truthy(eval(*condition))) return exec_body(body);
  return exec_body(s.else_body);
}

Interpreter::Flow Interpreter::exec_for(const ForStmt& s) {
  List all = iterate(eval(*s.iterable));
  step(int64_t(all.size()) / 16);  // copying the items is work too
  auto items = std::make_shared<List>();
  if (s.filter) {
    for (auto& item : all) {
      step();
      ScopeSwitch in(scope_, child_of(scope_));
      assign(s.target, item);
      if (truthy(eval(*s.filter))) items->push_back(std::move(item));
    }
  } else {
    *items = std::move(all);
  }
  if (items->empty()) return exec_body(s.else_body);
  std::shared_ptr<const List> shared = items;
  for (size_t i = 0; i < shared->size(); ++i) {
    step();
    ScopeSwitch in(scope_, child_of(scope_));
    assign(s.target, (*shared)[i]);
    auto loop = std::make_shared<LoopState>();
    loop->items = shared;
    loop->index0 = int64_t(i);
    scope_->vars["loop"] = Value(std::shared_ptr<const LoopState>(std::move(loop)));
    if (exec_body(s.body) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::assign(const Target& target, const Value& value) {
  if (!target.attribute.empty()) {
    const Value ns = lookup(target.names[0]);
    if (!ns.is_namespace()) problem("cannot assign attribute on non-namespace object '" + target.names[0] + "'");
    ns.ns().attrs.set(Value(target.attribute), value);
    return;
  }
  if (!target.unpack) {
    scope_->vars[target.names[0]] = value;
    return;
  }
  const List items = iterate(value);
  if (items.size() != target.names.size()) {
    if (items.size() > target.names.size())
      problem("too many values to unpack (expected " + std::to_string(target.names.size()) + ")");
    problem("not enough values to unpack (expected " + std::to_string(target.names.size()) + ", got " +
            std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) scope_->vars[target.names[i]] = items[i];
}

void Interpreter::exec_set(const SetStmt& s) { assign(s.target, eval(*s.value)); }

// Renders `body` in a scope of its own into `captured`. A break or continue
// inside still reaches the loop around the block (returned).
Interpreter::Flow Interpreter::render_capture(const Body& body, std::string& captured) {
  OutputCapture capture(*this, captured);
  ScopeSwitch in(scope_, child_of(scope_));
  return exec_body(body);
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value value) {
  for (const auto& f : filters) {
    const auto& fe = static_cast<const FilterExpr&>(*f);
    try {
      value = filter(fe.name, value, eval_args(fe.args));
    } catch (const Problem& p) {
      fail_at(fe.at, p.message);
    }
  }
  return value;
}

Interpreter::Flow Interpreter::exec_set_block(const SetBlockStmt& s) {
  std::string captured;
  if (const Flow flow = render_capture(s.body, captured); flow != Flow::Normal) return flow;
  assign(s.target, apply_filters(s.filters, text(std::move(captured))));
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_filter_block(const FilterBlockStmt& s) {
  std::string captured;
  if (const Flow flow = render_capture(s.body, captured); flow != Flow::Normal) return flow;
  const Value result = apply_filters(s.filters, text(std::move(captured)));
  write(result.is_string() ? result.str() : str(result));
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_with(const WithStmt& s) {
  // The values are computed in the outer scope, then bound in the inner one.
  std::vector<Value> values;
  for (const auto& [target, expr] : s.assignments) values.push_back(eval(*expr));
  ScopeSwitch in(scope_, child_of(scope_));
  for (size_t i = 0; i < values.size(); ++i) assign(s.assignments[i].first, values[i]);
  return exec_body(s.body);
}

void Interpreter::define_macro(const MacroStmt& s) {
  auto fn = std::make_shared<Callable>();
  fn->kind = Callable::Kind::Macro;
  fn->name = s.name;
  fn->macro = &s;
  fn->closure = scope_;
  scope_->vars[s.name] = Value(std::shared_ptr<const Callable>(std::move(fn)));
}

Value Interpreter::call_macro(const Callable& fn, Args args) {
  const MacroStmt& m = *fn.macro;
  step();
  DepthGuard guard(*this, m.at);
  auto closure = fn.closure.lock();
  ScopeSwitch in(scope_, child_of(closure ? closure : root_));
  const size_t n = m.params.size();
  if (args.positional.size() > n && !m.takes_varargs)
    problem("macro '" + m.name + "' takes not more than " + std::to_string(n) + " argument(s)");
  std::vector<bool> bound(n, false);
  for (size_t i = 0; i < n && i < args.positional.size(); ++i) {
    scope_->vars[m.params[i].name] = args.positional[i];
    bound[i] = true;
  }
  auto kwargs = std::make_shared<Dict>();
  for (auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < n && m.params[i].name != key) ++i;
    if (i < n) {
      if (bound[i]) problem("macro '" + m.name + "' got multiple values for argument '" + key + "'");
      scope_->vars[key] = value;
      bound[i] = true;
    } else if (m.takes_kwargs) {
      kwargs->set(Value(key), value);
    } else {
      problem("macro '" + m.name + "' takes no keyword argument '" + key + "'");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (bound[i]) continue;
    const MacroParam& p = m.params[i];
    scope_->vars[p.name] =
        p.default_value ? eval(*p.default_value) : Value::undefined("parameter '" + p.name + "' was not provided");
  }
  if (m.takes_varargs) {
    List extra(args.positional.begin() + std::ptrdiff_t(std::min(n, args.positional.size())), args.positional.end());
    scope_->vars["varargs"] = list(std::move(extra), true);
  }
  if (m.takes_kwargs) scope_->vars["kwargs"] = Value(std::shared_ptr<const Dict>(std::move(kwargs)));
  std::string buffer;
  {
    OutputCapture capture(*this, buffer);
    exec_body(m.body);
  }
  return text(std::move(buffer));
}

}  // namespace deltagen::jinja
