// tojson as transformers defines it: Python's json.dumps(value,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False), with
// those four arguments open to the template.
#pragma once
#include <optional>
#include <string>

#include "chat/jinja/value.h"

namespace deltagen::jinja {

struct JsonOptions {
  std::optional<std::string> indent;                         // unset: one line; else the text of one indent level
  std::optional<std::string> item_separator, key_separator;  // unset: Python's defaults for the indent
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Throws Problem for what json.dumps refuses (undefined, namespaces,
// functions, dict keys that are not scalars) and past max_bytes.
std::string to_json(const Value& v, const JsonOptions& options, size_t max_bytes);

}  // namespace deltagen::jinja
