// Filters on sequences and mappings. Where Jinja returns a generator (map,
// select, unique, reverse...), these return a list: the same items, and what
// templates do with them (loop, join, |list, |length) is the same.
#include <algorithm>
#include <unordered_set>

#include "chat/jinja/filters.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/problem.h"
#include "chat/jinja/pystr.h"

namespace deltagen::jinja::filters {
namespace {

// Jinja's make_attrgetter: "a.b.0" looks up item a, then b, then index 0
// (environment.getitem at each step).
Value attribute_path(Interpreter& in, Value item, const Value& path, const Value* fallback) {
  std::vector<Value> parts;
  if (path.is_string()) {
    for (const std::string& part : pystr::split(path.str(), std::string_view("."), -1)) {
      const bool digits =
          !part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part.size() < 18;
      parts.push_back(digits ? Value(int64_t(std::stoll(part))) : Value(part));
    }
  } else {
    parts.push_back(path);
  }
  for (const Value& part : parts) {
    item = in.item(item, part);
    if (fallback && item.is_undefined()) item = *fallback;
  }
  return item;
}

Value ignore_case(Interpreter& in, const Value& v) { return v.is_string() ? in.text(pystr::lower(v.str())) : v; }

// The sort key of an item: the attribute(s) named (comma-separated), lowered unless case_sensitive.
Value sort_key(Interpreter& in, const Value& item, const Value* attribute, bool case_sensitive) {
  if (!attribute || attribute->is_none()) return case_sensitive ? item : ignore_case(in, item);
  if (attribute->is_string() && attribute->str().find(',') != std::string::npos) {
    List keys;
    for (const std::string& part : pystr::split(attribute->str(), std::string_view(","), -1)) {
      Value k = attribute_path(in, item, Value(part), nullptr);
      keys.push_back(case_sensitive ? k : ignore_case(in, k));
    }
    return in.list(std::move(keys));
  }
  Value k = attribute_path(in, item, *attribute, nullptr);
  return case_sensitive ? k : ignore_case(in, k);
}

Value min_or_max(Interpreter& in, const Value& v, const Args& args, bool want_max) {
  ArgReader a(args, want_max ? "max" : "min", {"case_sensitive", "attribute"});
  const List items = walk(in, v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool case_sensitive = a.bool_or(0, false);
  size_t best = 0;
  Value best_key = sort_key(in, items[0], a.get(1), case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(in, items[i], a.get(1), case_sensitive);
    const int c = compare(k, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

// select / reject / selectattr / rejectattr.
Value select_or_reject(Interpreter& in, const Value& v, const Args& args, bool select, bool by_attribute) {
  size_t offset = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) problem("Missing parameter for attribute name");
    attribute = args.positional[0];
    offset = 1;
  }
  std::optional<std::string> test_name;
  Args test_args;
  if (args.positional.size() > offset) {
    if (!args.positional[offset].is_string()) problem("the test name must be a string");
    test_name = args.positional[offset].str();
    if (const std::string why = check_test_name(*test_name); !why.empty()) problem(why);
    test_args.positional.assign(args.positional.begin() + std::ptrdiff_t(offset + 1), args.positional.end());
    test_args.keyword = args.keyword;
  }
  List out;
  if (!truthy(v)) return in.list(std::move(out));
  for (const Value& item : walk(in, v)) {
    const Value subject = by_attribute ? attribute_path(in, item, attribute, nullptr) : item;
    const bool passes = test_name ? in.test(*test_name, subject, test_args) : truthy(subject);
    if (passes == select) out.push_back(item);
  }
  return in.list(std::move(out));
}

}  // namespace

Value attr(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "attr", {"name"});
  const std::string name = a.string_or(0, "");
  if (v.is_dict()) {  // no fallback to the item: only dict's methods are attributes
    const std::string status = method_status(v, name);
    if (status != "")
      return Value::undefined(status == "missing" ? "'dict object' has no attribute '" + name + "'" : status);
  }
  return in.attribute(v, name);
}

Value batch(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "batch", {"linecount", "fill_with"});
  const int64_t size = a.int_or(0, 0);
  if (size <= 0) problem("batch: linecount must be positive");
  const List items = walk(in, v);
  List out, current;
  for (const Value& item : items) {
    current.push_back(item);
    if (int64_t(current.size()) == size) out.push_back(in.list(std::exchange(current, {})));
  }
  if (!current.empty()) {
    if (a.has(1) && !a.get(1)->is_none()) {
      in.step(size - int64_t(current.size()));  // the padding is work too: batch(10**12, x) stops here
      while (int64_t(current.size()) < size) current.push_back(*a.get(1));
    }
    out.push_back(in.list(std::move(current)));
  }
  return in.list(std::move(out));
}

Value dictsort(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) problem("dictsort: you can only sort by either a mapping");
  const bool case_sensitive = a.bool_or(0, false);
  const std::string by = a.string_or(1, "key");
  if (by != "key" && by != "value") problem("You can only sort by either 'key' or 'value'");
  const size_t pos = by == "key" ? 0 : 1;
  const bool reverse = a.bool_or(2, false);
  std::vector<std::pair<Value, Value>> entries;  // key, (key, value) tuple
  for (const auto& [k, item] : v.dict().items) {
    in.step();
    const Value& field = pos == 0 ? k : item;
    entries.emplace_back(case_sensitive ? field : ignore_case(in, field), in.list({k, item}, true));
  }
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& x, const auto& y) {
    return reverse ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  List out;
  for (auto& e : entries) out.push_back(std::move(e.second));
  return in.list(std::move(out));
}

Value first(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "first", {});
  if (v.is_list()) return v.list().empty() ? Value::undefined("No first item, sequence was empty.") : v.list().front();
  const List items = walk(in, v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value last(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "last", {});
  if (v.is_list()) return v.list().empty() ? Value::undefined("No last item, sequence was empty.") : v.list().back();
  const List items = walk(in, v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value items(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "items", {});
  if (v.is_undefined()) return in.list({});
  if (!v.is_dict()) problem("Can only get item pairs from a mapping.");
  List out;
  out.reserve(v.dict().size());
  for (const auto& [k, item] : v.dict().items) out.push_back(in.list({k, item}, true));
  in.step(int64_t(out.size()));
  return in.list(std::move(out));
}

Value join(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "join", {"d", "attribute"});
  const std::string separator = a.has(0) ? in.str(*a.get(0)) : "";
  std::string out;
  bool first_item = true;
  for (const Value& item : walk(in, v)) {
    const Value value = a.has(1) && !a.get(1)->is_none() ? attribute_path(in, item, *a.get(1), nullptr) : item;
    const std::string piece = in.str(value);
    if (out.size() + separator.size() + piece.size() > in.max_string_bytes()) problem("join: result too long");
    if (!first_item) out += separator;
    out += piece;
    first_item = false;
  }
  return in.text(std::move(out));
}

Value list(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "list", {});
  if (v.is_list() && !v.is_tuple()) return v;
  return in.list(walk(in, v));
}

Value map(Interpreter& in, const Value& v, const Args& args) {
  List out;
  if (args.positional.empty()) {
    ArgReader a(args, "map", {"attribute", "default"});
    if (!a.has(0)) problem("map requires a filter argument");
    if (!truthy(v)) return in.list(std::move(out));
    for (const Value& item : walk(in, v)) out.push_back(attribute_path(in, item, *a.get(0), a.get(1)));
    return in.list(std::move(out));
  }
  if (!args.positional[0].is_string()) problem("map: the filter name must be a string");
  const std::string name = args.positional[0].str();
  if (const std::string why = check_filter_name(name); !why.empty()) problem(why);
  Args filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  if (!truthy(v)) return in.list(std::move(out));
  for (const Value& item : walk(in, v)) out.push_back(in.filter(name, item, filter_args));
  return in.list(std::move(out));
}

Value max(Interpreter& in, const Value& v, const Args& args) { return min_or_max(in, v, args, true); }
Value min(Interpreter& in, const Value& v, const Args& args) { return min_or_max(in, v, args, false); }

Value reject(Interpreter& in, const Value& v, const Args& args) { return select_or_reject(in, v, args, false, false); }
Value rejectattr(Interpreter& in, const Value& v, const Args& args) {
  return select_or_reject(in, v, args, false, true);
}
Value select(Interpreter& in, const Value& v, const Args& args) { return select_or_reject(in, v, args, true, false); }
Value selectattr(Interpreter& in, const Value& v, const Args& args) {
  return select_or_reject(in, v, args, true, true);
}

Value reverse(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "reverse", {});
  if (v.is_string()) {
    std::vector<size_t> offsets = pystr::offsets(v.str());
    in.step(int64_t(offsets.size()) / 16);
    std::string out;
    out.reserve(v.str().size());
    for (size_t k = offsets.size() - 1; k > 0; --k) out += v.str().substr(offsets[k - 1], offsets[k] - offsets[k - 1]);
    return in.text(std::move(out), v.safe());
  }
  List items = walk(in, v);
  std::reverse(items.begin(), items.end());
  return in.list(std::move(items));
}

// Splits the items into `slices` columns, the first ones one longer.
Value slice(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "slice", {"slices", "fill_with"});
  const int64_t slices = a.int_or(0, 0);
  if (slices <= 0 || slices > 100000) problem("slice: the number of slices must be between 1 and 100000");
  in.step(slices);
  const List items = walk(in, v);
  const auto length = int64_t(items.size());
  const int64_t per_slice = length / slices, with_extra = length % slices;
  List out;
  int64_t offset = 0;
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t start = offset + s * per_slice;
    if (s < with_extra) ++offset;
    const int64_t end = offset + (s + 1) * per_slice;
    List column(items.begin() + std::ptrdiff_t(start), items.begin() + std::ptrdiff_t(end));
    if (a.has(1) && !a.get(1)->is_none() && s >= with_extra) column.push_back(*a.get(1));
    out.push_back(in.list(std::move(column)));
  }
  return in.list(std::move(out));
}

Value sort(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = a.bool_or(0, false), case_sensitive = a.bool_or(1, false);
  std::vector<std::pair<Value, Value>> keyed;  // key, item
  for (const Value& item : walk(in, v)) keyed.emplace_back(sort_key(in, item, a.get(2), case_sensitive), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  List out;
  for (auto& k : keyed) out.push_back(std::move(k.second));
  return in.list(std::move(out));
}

Value sum(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "sum", {"attribute", "start"});
  Value total = a.get_or(1, Value(int64_t(0)));
  for (const Value& item : walk(in, v)) {
    const Value value = a.has(0) && !a.get(0)->is_none() ? attribute_path(in, item, *a.get(0), nullptr) : item;
    if (value.is_string()) problem("sum() can't sum strings");
    total = binary_operator(in, Op::Add, total, value);
  }
  return total;
}

Value unique(Interpreter& in, const Value& v, const Args& args) {
  ArgReader a(args, "unique", {"case_sensitive", "attribute"});
  const bool case_sensitive = a.bool_or(0, false);
  std::unordered_set<std::string> seen_strings;
  List seen_others, out;
  for (const Value& item : walk(in, v)) {
    const Value key = sort_key(in, item, a.get(1), case_sensitive);
    require_hashable(key);
    if (key.is_string()) {
      if (!seen_strings.insert(key.str()).second) continue;
    } else {
      in.step(int64_t(seen_others.size()) / 16);
      if (std::any_of(seen_others.begin(), seen_others.end(), [&](const Value& s) { return equals(s, key); })) continue;
      seen_others.push_back(key);
    }
    out.push_back(item);
  }
  return in.list(std::move(out));
}

}  // namespace deltagen::jinja::filters
