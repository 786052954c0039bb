// Shared by the Jinja engine's unit tests (jinja_test.cpp, jinja_filters_test.cpp):
// table-driven renders and error checks.
//
// Every expected output in these tables is what Python Jinja2 renders in the
// environment transformers builds (trim_blocks, lstrip_blocks, loopcontrols,
// its tojson): the tables were checked against it case by case.
#pragma once
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/jinja/jinja.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen::test {

// One template, its context (a JSON object, "" for none) and what it renders.
struct RenderCase {
  const char* source;
  const char* context;
  const char* expected;
};

inline std::string render(const std::string& source, const std::string& context = "",
                          const jinja::Limits& limits = {}) {
  const auto ctx = context.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(context);
  return jinja::Template::parse(source, "t.jinja", limits).render(ctx);
}

inline void expect_renders(const std::vector<RenderCase>& cases) {
  for (const auto& c : cases) {
    try {
      EXPECT_EQ(render(c.source, c.context), c.expected) << "template: " << c.source;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "template: " << c.source << "\nthrew: " << e.what();
    }
  }
}

// The one-line Error a template gives (parsing or rendering); checks that it
// starts with "t.jinja:LINE:COL: " and contains `phrase`.
inline void expect_render_error(const std::string& source, const std::string& phrase, int line, int column,
                                const std::string& context = "", const jinja::Limits& limits = {}) {
  const std::string m = error_message([&] { render(source, context, limits); });
  const std::string where = "t.jinja:" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  EXPECT_EQ(m.rfind(where, 0), 0u) << "expected it at " << where << " in: " << m;
  EXPECT_NE(m.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << m;
}

}  // namespace deltagen::test
