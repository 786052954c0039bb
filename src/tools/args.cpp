#include "tools/args.h"

#include <algorithm>
#include <charconv>

#include "deltagen/error.h"

namespace deltagen {

Args::Args(int argc, char** argv, std::set<std::string> switches) : command_(argc > 0 ? argv[0] : "") {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      values_[name.substr(0, eq)] = name.substr(eq + 1);
      all_values_[name.substr(0, eq)].push_back(name.substr(eq + 1));
    } else if (switches.count(name)) {
      seen_switches_.insert(name);
    } else {
      if (i + 1 >= argc) fail("--" + name, "missing value");
      values_[name] = argv[++i];
      all_values_[name].push_back(values_[name]);
    }
  }
}

bool Args::has(const std::string& f) {
  asked_.insert(f);
  return values_.count(f) || seen_switches_.count(f);
}

std::vector<std::string> Args::get_all(const std::string& f) {
  asked_.insert(f);
  auto it = all_values_.find(f);
  return it == all_values_.end() ? std::vector<std::string>() : it->second;
}

std::optional<std::string> Args::get(const std::string& f) {
  asked_.insert(f);
  auto it = values_.find(f);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::require(const std::string& f) {
  auto v = get(f);
  if (!v) fail(command_, "missing required flag --" + f);
  return *v;
}

std::string Args::get_or(const std::string& f, const std::string& fallback) {
  auto v = get(f);
  return v ? *v : fallback;
}

int64_t Args::get_int(const std::string& f, int64_t fallback) {
  auto v = get(f);
  if (!v) return fallback;
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (ec != std::errc() || p != v->data() + v->size()) fail("--" + f, "not an integer: '" + *v + "'");
  return x;
}

double Args::get_double(const std::string& f, double fallback) {
  auto v = get(f);
  if (!v) return fallback;
  try {
    size_t pos = 0;
    double x = std::stod(*v, &pos);
    if (pos != v->size()) throw std::invalid_argument("");
    return x;
  } catch (const std::exception&) {
    fail("--" + f, "not a number: '" + *v + "'");
  }
}

namespace {

// The items between commas ("" gives one empty item, "a,,b" an empty middle one).
std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

}  // namespace

std::vector<int64_t> parse_ids(const std::string& text, const std::string& what) {
  std::vector<int64_t> ids;
  for (std::string item : split_commas(text)) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int64_t x = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), x);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || x < 0)
      fail(what, "not a comma-separated list of token ids: '" + text + "'");
    ids.push_back(x);
  }
  return ids;
}

std::vector<int64_t> Args::get_ids(const std::string& f) {
  auto v = get(f);
  if (!v) return {};
  return parse_ids(*v, "--" + f);
}

bool Args::flag(const std::string& name) {
  asked_.insert(name);
  return seen_switches_.count(name) != 0;
}

void Args::finish() {
  for (auto& [k, v] : values_)
    if (!asked_.count(k)) fail(command_, "unknown flag --" + k);
  for (auto& k : seen_switches_)
    if (!asked_.count(k)) fail(command_, "unknown flag --" + k);
  if (!positional_.empty() && !asked_.count("")) fail(command_, "unexpected argument '" + positional_[0] + "'");
}

SessionConfig get_session_config_flag(Args& args, const std::string& flag) {
  SessionConfig entries;
  const auto v = args.get(flag);
  if (!v) return entries;
  for (const std::string& entry : split_commas(*v)) {
    const size_t eq = entry.find('=');
    if (eq == 0 || eq == std::string::npos)
      fail("--" + flag, "expected KEY=VALUE[,KEY=VALUE...], not '" + entry + "'");
    entries.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return entries;
}

KernelSet get_kernels_flag(Args& args, const std::string& flag) {
  const std::string v = args.get_or(flag, "deltagen");
  if (v == "deltagen") return KernelSet::Deltagen;
  if (v == "deltagen-ops") return KernelSet::DeltagenOps;
  if (v == "ort") return KernelSet::Ort;
  fail("--" + flag, "expected deltagen, deltagen-ops or ort, not '" + v + "'");
}

std::optional<ExecutionProvider> get_ep_flag(Args& args, const std::string& flag) {
  const auto given = args.get(flag);
  if (!given) return std::nullopt;
  const std::string& v = *given;
  try {
    return parse_execution_provider(v);
  } catch (const Error&) {
    fail("--" + flag, "expected cpu, webgpu or cuda, not '" + v + "'");
  }
}

KernelOptions get_kernel_flags(Args& args) {
  KernelOptions k;
  k.set = get_kernels_flag(args, "kernels");
  k.max_isa = args.get_or("max-isa", "");
  return k;
}

}  // namespace deltagen
