// The global functions a chat template can call: Jinja's range, dict and
// namespace (range capped as the sandbox caps it), and transformers'
// raise_exception and strftime_now.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "chat/jinja/builtins.h"
#include "chat/jinja/problem.h"

namespace deltagen::jinja {
namespace {

// Jinja's sandbox refuses larger ranges (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

int64_t range_argument(const Value& v) {
  if (!v.is_int() && !v.is_bool()) problem("'" + type_name(v) + "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value range(Interpreter& in, const Args& args) {
  if (!args.keyword.empty()) problem("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) problem("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  int64_t start = 0, stop, step = 1;
  if (p.size() == 1) {
    stop = range_argument(p[0]);
  } else {
    start = range_argument(p[0]);
    stop = range_argument(p[1]);
    if (p.size() == 3) step = range_argument(p[2]);
  }
  if (step == 0) problem("range() arg 3 must not be zero");
  // The length in long double: stop - start may not fit in 64 bits.
  const long double span = (long double)stop - (long double)start;
  long double count = step > 0 ? (span + step - 1) / step : (span + step + 1) / step;
  count = count < 0 ? 0 : std::floor(count);
  if (count > kMaxRange)
    problem("range too big: the sandbox allows at most " + std::to_string(kMaxRange) + " items (MAX_RANGE)");
  List items;
  items.reserve(size_t(count));
  // start + i * step lies between start and stop; computed unsigned, nothing overflows on the way.
  for (int64_t i = 0; i < int64_t(count); ++i)
    items.emplace_back(int64_t(uint64_t(start) + uint64_t(i) * uint64_t(step)));
  in.step(int64_t(items.size()) / 16);
  return in.list(std::move(items));
}

// dict(mapping or pairs, **kwargs), the way namespace() and dict() take them.
std::shared_ptr<Dict> dict_from(Interpreter& in, const Args& args, const char* function) {
  auto d = std::make_shared<Dict>();
  if (args.positional.size() > 1)
    problem(std::string(function) + " expected at most 1 positional argument, got " +
            std::to_string(args.positional.size()));
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      for (const auto& [k, v] : source.dict().items) d->set(k, v);
    } else if (source.is_namespace()) {
      for (const auto& [k, v] : source.ns().attrs.items) d->set(k, v);
    } else {
      for (const Value& pair : iterate(source)) {
        in.step();
        const List kv = iterate(pair);
        if (kv.size() != 2) problem(std::string(function) + ": each item must be a key and a value");
        require_hashable(kv[0]);
        d->set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d->set(Value(k), v);
  in.step(int64_t(d->size()) / 16);
  return d;
}

Value strftime_now(Interpreter& in, const Args& args) {
  ArgReader a(args, "strftime_now", {"format"});
  const std::string format = a.string_or(0, "");
  if (format.size() > 4096) problem("strftime_now: format too long");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  if (format.empty()) return in.text("");
  // strftime returns 0 both for "too small" and for an empty result: grow a few times.
  for (size_t size = 256; size <= 65536; size *= 4) {
    std::string buf(size, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
    if (n > 0) {
      buf.resize(n);
      return in.text(std::move(buf));
    }
  }
  return in.text("");
}

}  // namespace

bool is_global_name(std::string_view name) {
  return name == "range" || name == "namespace" || name == "dict" || name == "raise_exception" ||
         name == "strftime_now";
}

Value call_global(Interpreter& in, std::string_view name, Args& args) {
  if (name == "range") return range(in, args);
  if (name == "dict") return Value(std::shared_ptr<const Dict>(dict_from(in, args, "dict")));
  if (name == "namespace") {
    auto ns = std::make_shared<Namespace>();
    ns->attrs = std::move(*dict_from(in, args, "namespace"));
    return in.make_namespace(std::move(ns));
  }
  if (name == "raise_exception") {
    ArgReader a(args, "raise_exception", {"message"});
    problem(a.has(0) ? in.str(*a.get(0)) : "raise_exception called");
  }
  if (name == "strftime_now") return strftime_now(in, args);
  problem("no global function '" + std::string(name) + "'");
}

}  // namespace deltagen::jinja
