// The filter table and argument binding shared by all builtins.
#include "chat/jinja/filters.h"

#include <algorithm>
#include <unordered_map>

#include "chat/jinja/problem.h"

namespace deltagen::jinja {
namespace {

const std::unordered_map<std::string_view, filters::Filter>& filter_table() {
  using namespace filters;
  static const std::unordered_map<std::string_view, Filter> table = {
      {"abs", abs},
      {"attr", attr},
      {"batch", batch},
      {"capitalize", capitalize},
      {"center", center},
      {"count", length},
      {"d", default_value},
      {"default", default_value},
      {"dictsort", dictsort},
      {"e", escape},
      {"escape", escape},
      {"first", first},
      {"float", to_float},
      {"forceescape", forceescape},
      {"format", format},
      {"indent", indent},
      {"int", to_int},
      {"items", items},
      {"join", join},
      {"last", last},
      {"length", length},
      {"list", list},
      {"lower", lower},
      {"map", map},
      {"max", max},
      {"min", min},
      {"reject", reject},
      {"rejectattr", rejectattr},
      {"replace", replace},
      {"reverse", reverse},
      {"round", round},
      {"safe", safe},
      {"select", select},
      {"selectattr", selectattr},
      {"slice", slice},
      {"sort", sort},
      {"string", string},
      {"sum", sum},
      {"title", title},
      {"tojson", tojson},
      {"trim", trim},
      {"truncate", truncate},
      {"unique", unique},
      {"upper", upper},
      {"wordcount", wordcount},
  };
  return table;
}

// Jinja's other built-in filters: known, so that the error says why.
constexpr std::string_view kUnsupportedFilters[] = {"filesizeformat", "groupby", "pprint",   "random", "striptags",
                                                    "urlencode",      "urlize",  "wordwrap", "xmlattr"};

}  // namespace

std::string check_filter_name(std::string_view name) {
  if (filter_table().count(name)) return "";
  for (auto n : kUnsupportedFilters)
    if (n == name) return "the '" + std::string(name) + "' filter is not supported";
  return "no filter named '" + std::string(name) + "'";
}

Value apply_filter(Interpreter& in, std::string_view name, const Value& operand, Args& args) {
  auto it = filter_table().find(name);
  if (it == filter_table().end()) problem("no filter named '" + std::string(name) + "'");
  return it->second(in, operand, args);
}

ArgReader::ArgReader(const Args& args, std::string_view function, std::initializer_list<std::string_view> params)
    : function_(function), params_(params), bound_(params.size(), nullptr) {
  if (args.positional.size() > params_.size())
    problem(function_ + " takes at most " + std::to_string(params_.size()) + " argument(s), " +
            std::to_string(args.positional.size()) + " given");
  for (size_t i = 0; i < args.positional.size(); ++i) bound_[i] = &args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    auto it = std::find(params_.begin(), params_.end(), key);
    if (it == params_.end()) problem(function_ + " got an unexpected keyword argument '" + key + "'");
    const size_t i = size_t(it - params_.begin());
    if (bound_[i]) problem(function_ + " got multiple values for argument '" + key + "'");
    bound_[i] = &value;
  }
}

std::string ArgReader::string_or(size_t i, std::string fallback) const {
  if (!bound_[i]) return fallback;
  if (!bound_[i]->is_string())
    problem(function_ + ": argument '" + std::string(params_[i]) + "' must be a string, not " + type_name(*bound_[i]));
  return bound_[i]->str();
}

int64_t ArgReader::int_or(size_t i, int64_t fallback) const {
  if (!bound_[i]) return fallback;
  if (!bound_[i]->is_int() && !bound_[i]->is_bool())
    problem(function_ + ": argument '" + std::string(params_[i]) + "' must be an integer, not " +
            type_name(*bound_[i]));
  return bound_[i]->as_int();
}

bool ArgReader::bool_or(size_t i, bool fallback) const { return bound_[i] ? truthy(*bound_[i]) : fallback; }

std::optional<std::string> ArgReader::optional_string(size_t i) const {
  if (!bound_[i] || bound_[i]->is_none()) return std::nullopt;
  return string_or(i, "");
}

namespace filters {

Value soft_str(Interpreter& in, const Value& v) {
  if (v.is_string()) return v;
  return in.text(in.str(v));
}

List walk(Interpreter& in, const Value& v) {
  List items = iterate(v);
  in.step(int64_t(items.size()));
  return items;
}

}  // namespace filters
}  // namespace deltagen::jinja
