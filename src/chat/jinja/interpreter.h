// Renders a parsed template: runs the statements, evaluates expressions with
// Python's semantics, and keeps every render within its Limits (nesting,
// work, output, memory). One Interpreter per render.
//
// Scopes follow Jinja's: a for body gets a fresh scope each iteration (what
// it sets is gone after the iteration), a macro call gets its own scope on
// top of the one the macro was defined in, `if` adds none. Only a
// namespace's attributes outlive the scope that sets them.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/jinja.h"
#include "chat/jinja/value.h"

namespace deltagen::jinja {

// Arguments of a call, filter or test, evaluated.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

// What a callable value calls.
struct Callable {
  enum class Kind { Macro, Global, Method, LoopCycle };
  Kind kind;
  std::string name;  // macro, global or method name
  Value self;        // Method: the object; LoopCycle: the loop
  const MacroStmt* macro = nullptr;
  std::weak_ptr<Scope> closure;  // Macro: where it was defined (the root scope once that is gone)
};

class Interpreter {
 public:
  Interpreter(const std::string& name, const Limits& limits);
  ~Interpreter();

  std::string render(const Body& body, const nlohmann::ordered_json& context);

  // ---- for the builtins ----
  // A string value; its bytes count toward the render's memory budget and
  // it may not exceed max_output_bytes.
  Value text(std::string s, bool safe = false);
  // A list value; its items count toward the memory budget.
  Value list(List items, bool tuple = false);
  // Work: loop iterations, macro calls, items a filter walks (work.h).
  void step(int64_t n = 1);
  size_t max_string_bytes() const { return limits_.max_output_bytes; }

  Value call(const Value& callee, Args args);
  Value attribute(const Value& object, std::string_view name);  // x.name (falls back to x['name'])
  Value item(const Value& object, const Value& key);            // x[key] (falls back to x.key)
  Value filter(std::string_view name, const Value& operand, Args args);
  bool test(std::string_view name, const Value& operand, Args args);
  // A namespace, registered so the render can break any cycles through it at the end.
  Value make_namespace(std::shared_ptr<Namespace> ns);
  // str(v) with the render's limits.
  std::string str(const Value& v);

 private:
  // Evaluation nesting: expressions, blocks and macro calls together.
  struct DepthGuard {
    Interpreter& in;
    DepthGuard(Interpreter& i, const Position& at) : in(i) {
      if (++in.depth_ > in.limits_.max_depth)
        in.fail_at(at, "nested more than " + std::to_string(in.limits_.max_depth) +
                           " deep (expressions, blocks and macro calls together)");
    }
    ~DepthGuard() { --in.depth_; }
  };
  struct OutputCapture;
  enum class Flow { Normal, Break, Continue };

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_if(const IfStmt& s);
  Flow exec_for(const ForStmt& s);
  void exec_set(const SetStmt& s);
  Flow exec_set_block(const SetBlockStmt& s);
  Flow exec_filter_block(const FilterBlockStmt& s);
  Flow exec_with(const WithStmt& s);
  void define_macro(const MacroStmt& s);
  void assign(const Target& target, const Value& value);
  Flow render_capture(const Body& body, std::string& captured);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value value);

  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value eval_name(const NameExpr& e);
  Value eval_binary(const BinaryExpr& e);
  Value eval_compare(const CompareExpr& e);
  Value eval_call(const CallExpr& e);
  Value eval_slice(const SliceExpr& e);
  Args eval_args(const std::vector<Argument>& args);
  Value call_macro(const Callable& macro, Args args);

  void write(std::string_view s);
  [[noreturn]] void fail_at(const Position& at, const std::string& problem) const;
  Value lookup(const std::string& name) const;

  const std::string& name_;
  const Limits& limits_;
  int depth_ = 0;
  uint64_t bytes_left_;  // budget for everything built while rendering
  std::string* out_ = nullptr;
  std::shared_ptr<Scope> root_, scope_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

}  // namespace deltagen::jinja
