// Expressions: names, attribute and item lookup as Jinja's sandbox does them,
// calls, slices. Operators are in operators.cpp, builtins in their files.
#include <algorithm>

#include "chat/jinja/builtins.h"
#include "chat/jinja/interpreter.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"

namespace deltagen::jinja {

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(*this, e.at);
  try {
    return eval_inner(e);
  } catch (const Problem& p) {
    fail_at(e.at, p.message);
  }
}

Value Interpreter::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Literal:
      return static_cast<const LiteralExpr&>(e).value;
    case ExprKind::Name:
      return lookup(static_cast<const NameExpr&>(e).name);
    case ExprKind::List: {
      const auto& l = static_cast<const ListExpr&>(e);
      List items;
      items.reserve(l.items.size());
      for (const auto& item : l.items) items.push_back(eval(*item));
      return list(std::move(items), l.tuple);
    }
    case ExprKind::Dict: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).entries) {
        Value key = eval(*k);
        require_hashable(key);
        d->set(key, eval(*v));
      }
      step(int64_t(d->size()) / 16);
      return Value(std::shared_ptr<const Dict>(std::move(d)));
    }
    case ExprKind::Unary: {
      const auto& u = static_cast<const UnaryExpr&>(e);
      const Value v = eval(*u.operand);
      if (u.op == Op::Not) return Value(!truthy(v));
      return unary_operator(u.op, v);
    }
    case ExprKind::Binary:
      return eval_binary(static_cast<const BinaryExpr&>(e));
    case ExprKind::Compare:
      return eval_compare(static_cast<const CompareExpr&>(e));
    case ExprKind::Conditional: {
      const auto& c = static_cast<const ConditionalExpr&>(e);
      if (truthy(eval(*c.condition))) return eval(*c.then_value);
      return c.else_value
                 ? eval(*c.else_value)
                 : Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    }
    case ExprKind::Attribute: {
      const auto& a = static_cast<const AttributeExpr&>(e);
      return attribute(eval(*a.object), a.name);
    }
    case ExprKind::Item: {
      const auto& i = static_cast<const ItemExpr&>(e);
      const Value object = eval(*i.object);
      return item(object, eval(*i.index));
    }
    case ExprKind::Slice:
      return eval_slice(static_cast<const SliceExpr&>(e));
    case ExprKind::Call:
      return eval_call(static_cast<const CallExpr&>(e));
    case ExprKind::Filter: {
      const auto& f = static_cast<const FilterExpr&>(e);
      const Value operand = eval(*f.operand);
      return filter(f.name, operand, eval_args(f.args));
    }
    case ExprKind::Test: {
      const auto& t = static_cast<const FilterExpr&>(e);
      const Value operand = eval(*t.operand);
      return Value(test(t.name, operand, eval_args(t.args)) != t.negated);
    }
  }
  problem("unknown expression");
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  if (is_global_name(name)) {
    auto fn = std::make_shared<Callable>();
    fn->kind = Callable::Kind::Global;
    fn->name = name;
    return Value(std::shared_ptr<const Callable>(std::move(fn)));
  }
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::eval_binary(const BinaryExpr& e) {
  Value left = eval(*e.left);
  // and/or return one of their operands, and skip the right one when they can.
  if (e.op == Op::And) return truthy(left) ? eval(*e.right) : left;
  if (e.op == Op::Or) return truthy(left) ? left : eval(*e.right);
  const Value right = eval(*e.right);
  return binary_operator(*this, e.op, left, right);
}

Value Interpreter::eval_compare(const CompareExpr& e) {
  Value left = eval(*e.first);
  for (const auto& [op, operand] : e.rest) {
    Value right = eval(*operand);
    bool holds = false;
    switch (op) {
      case Op::Eq:
        holds = equals(left, right);
        break;
      case Op::Ne:
        holds = !equals(left, right);
        break;
      case Op::Lt:
        holds = compare(left, right) < 0;
        break;
      case Op::Le:
        holds = compare(left, right) <= 0;
        break;
      case Op::Gt:
        holds = compare(left, right) > 0;
        break;
      case Op::Ge:
        holds = compare(left, right) >= 0;
        break;
      case Op::In:
        holds = contains(right, left);
        break;
      case Op::NotIn:
        holds = !contains(right, left);
        break;
      default:
        break;
    }
    if (!holds) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Args Interpreter::eval_args(const std::vector<Argument>& args) {
  Args out;
  for (const auto& a : args) {
    if (a.keyword.empty())
      out.positional.push_back(eval(*a.value));
    else
      out.keyword.emplace_back(a.keyword, eval(*a.value));
  }
  return out;
}

Value Interpreter::eval_call(const CallExpr& e) {
  const Value callee = eval(*e.callee);
  return call(callee, eval_args(e.args));
}

Value Interpreter::call(const Value& callee, Args args) {
  if (callee.is_undefined()) problem(callee.undefined_message());
  if (!callee.is_callable()) problem("'" + type_name(callee) + "' object is not callable");
  const Callable& fn = callee.callable();
  switch (fn.kind) {
    case Callable::Kind::Macro:
      return call_macro(fn, std::move(args));
    case Callable::Kind::Global:
      return call_global(*this, fn.name, args);
    case Callable::Kind::Method:
      return call_method(*this, fn.self, fn.name, args);
    case Callable::Kind::LoopCycle: {
      if (!args.keyword.empty()) problem("loop.cycle() takes no keyword arguments");
      if (args.positional.empty()) problem("no items for cycling given");
      const auto n = int64_t(args.positional.size());
      return args.positional[size_t(fn.self.loop().index0 % n)];
    }
  }
  problem("not callable");
}

namespace {

Value bound_method(const Value& self, std::string_view name) {
  auto fn = std::make_shared<Callable>();
  fn->kind = Callable::Kind::Method;
  fn->name = name;
  fn->self = self;
  return Value(std::shared_ptr<const Callable>(std::move(fn)));
}

// Python's `obj_type repr` in Jinja's undefined messages: 'dict object', 'None'.
std::string object_text(const Value& v) { return v.is_none() ? "None" : type_name(v) + " object"; }

Value missing_attribute(const Value& object, std::string_view name) {
  return Value::undefined("'" + object_text(object) + "' has no attribute '" + std::string(name) + "'");
}

Value loop_attribute(const Value& loop, std::string_view name) {
  const LoopState& s = loop.loop();
  const auto n = int64_t(s.items->size());
  const int64_t i = s.index0;
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "revindex") return Value(n - i);
  if (name == "revindex0") return Value(n - i - 1);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(int64_t(1));
  if (name == "depth0") return Value(int64_t(0));
  if (name == "previtem") return i > 0 ? (*s.items)[size_t(i - 1)] : Value::undefined("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? (*s.items)[size_t(i + 1)] : Value::undefined("there is no next item");
  if (name == "cycle") {
    auto fn = std::make_shared<Callable>();
    fn->kind = Callable::Kind::LoopCycle;
    fn->name = "cycle";
    fn->self = loop;
    return Value(std::shared_ptr<const Callable>(std::move(fn)));
  }
  return missing_attribute(loop, name);
}

}  // namespace

// Jinja's sandbox getattr: the Python attribute (a method) first, then the item.
Value Interpreter::attribute(const Value& object, std::string_view name) {
  if (object.is_undefined()) problem(object.undefined_message());
  if (object.is_loop()) return loop_attribute(object, name);
  if (object.is_namespace()) {
    if (const Value* v = object.ns().attrs.find(name)) return *v;
    return missing_attribute(object, name);
  }
  const std::string status = method_status(object, name);
  if (status.empty()) return bound_method(object, name);
  if (status != "missing") return Value::undefined(status);
  if (object.is_dict()) {
    if (const Value* v = object.dict().find(name)) return *v;
  }
  return missing_attribute(object, name);
}

// Jinja's sandbox getitem: the item first, then (for string keys) the attribute.
Value Interpreter::item(const Value& object, const Value& key) {
  if (object.is_undefined()) problem(object.undefined_message());
  if (object.is_dict()) {
    require_hashable(key);
    if (const Value* v = object.dict().find(key)) return *v;
  } else if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
    const bool is_string = object.is_string();
    const int64_t size = is_string ? int64_t(pystr::length(object.str())) : int64_t(object.list().size());
    int64_t i = key.as_int();
    if (i < 0) i += size;
    if (i >= 0 && i < size) {
      if (!is_string) return object.list()[size_t(i)];
      const auto offsets = pystr::offsets(object.str());
      return Value(object.str().substr(offsets[size_t(i)], offsets[size_t(i) + 1] - offsets[size_t(i)]));
    }
    return Value::undefined(type_name(object) + " object has no element " + std::to_string(key.as_int()));
  } else if (object.is_loop() && key.is_string()) {
    return loop_attribute(object, key.str());
  }
  if (key.is_string() && !object.is_dict() && !object.is_loop()) return attribute(object, key.str());
  if (key.is_string() && object.is_dict()) {
    const std::string status = method_status(object, key.str());
    if (status.empty()) return bound_method(object, key.str());
    if (status != "missing") return Value::undefined(status);
    return missing_attribute(object, key.str());
  }
  return Value::undefined(object_text(object) + " has no element " + short_repr(key));
}

namespace {

// Python's slice.indices(): the start, stop and step a slice means for a sequence of `size`.
void slice_bounds(const Value* start, const Value* stop, const Value* step, int64_t size, int64_t& b, int64_t& e,
                  int64_t& s) {
  auto as_index = [](const Value* v) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (!v->is_int() && !v->is_bool()) problem("slice indices must be integers or None");
    return v->as_int();
  };
  s = as_index(step).value_or(1);
  if (s == 0) problem("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) x += size;
    if (s > 0) return std::clamp<int64_t>(x, 0, size);
    return std::clamp<int64_t>(x, -1, size - 1);
  };
  b = clamp(as_index(start), s > 0 ? 0 : size - 1);
  e = clamp(as_index(stop), s > 0 ? size : -1);
}

}  // namespace

Value Interpreter::eval_slice(const SliceExpr& e) {
  const Value object = eval(*e.object);
  const Value start = e.start ? eval(*e.start) : Value::none();
  const Value stop = e.stop ? eval(*e.stop) : Value::none();
  const Value step_value = e.step ? eval(*e.step) : Value::none();
  if (object.is_undefined()) problem(object.undefined_message());
  if (!object.is_list() && !object.is_string()) {
    if (object.is_dict()) problem("unhashable type: 'slice'");
    return Value::undefined("'" + type_name(object) + "' object is not subscriptable");
  }
  const bool is_string = object.is_string();
  std::vector<size_t> offsets;
  if (is_string) offsets = pystr::offsets(object.str());
  const int64_t size = is_string ? int64_t(offsets.size() - 1) : int64_t(object.list().size());
  int64_t b, en, s;
  slice_bounds(&start, &stop, &step_value, size, b, en, s);
  // How many items: stride may be as large as the step (|INT64_MIN| taken as INT64_MAX,
  // which selects the same single item); k = b + i * s stays inside [0, size).
  const int64_t span = s > 0 ? en - b : b - en;
  const int64_t stride = s > 0 ? s : (s == INT64_MIN ? INT64_MAX : -s);
  const int64_t count = span > 0 ? 1 + (span - 1) / stride : 0;
  this->step(count / 16);
  auto index = [&](int64_t i) { return size_t(b + i * s); };
  if (is_string) {
    const std::string& str = object.str();
    if (count == 0) return text("");
    if (s == 1) return text(str.substr(offsets[size_t(b)], offsets[size_t(en)] - offsets[size_t(b)]));
    std::string out;
    for (int64_t i = 0; i < count; ++i) out += str.substr(offsets[index(i)], offsets[index(i) + 1] - offsets[index(i)]);
    return text(std::move(out));
  }
  List items;
  items.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) items.push_back(object.list()[index(i)]);
  return list(std::move(items), object.is_tuple());
}

Value Interpreter::filter(std::string_view name, const Value& operand, Args args) {
  return apply_filter(*this, name, operand, args);
}

bool Interpreter::test(std::string_view name, const Value& operand, Args args) {
  return apply_test(*this, name, operand, args);
}

}  // namespace deltagen::jinja
