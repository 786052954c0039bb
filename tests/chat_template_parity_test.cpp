// The chat templates of Qwen3.5, Qwen3 and Qwen2.5 rendered by deltagen's
// Jinja engine (src/chat/jinja), compared byte for byte with Hugging Face's
// JS engine @huggingface/jinja (tests/jinja_reference.mjs in node) and, when
// python3 has jinja2, with Python Jinja2 set up as transformers sets it up
// (tests/jinja_reference.py). The conversations are tests/data/chat/conversations.json.
//
// Each reference runs once for all templates and cases (starting node or
// python costs more than the renders). The comparisons skip, saying why,
// only when their engine or the templates are missing:
//   - Qwen3.5's template: ../shared/reference/chat-templates/qwen3.5.jinja beside the clone;
//   - Qwen3's and Qwen2.5's: tokenizer_config.json in third_party/tokenizer/{qwen3,qwen2_5}
//     and @huggingface/jinja in third_party/tokenizer/node_modules (scripts/fetch_tokenizer_assets.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/jinja/jinja.h"
#include "test_util.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using test::TempDir;

fs::path assets_dir() {
  if (const char* e = std::getenv("DELTAGEN_TOKENIZER_ASSETS")) return e;
  return fs::path(DELTAGEN_SOURCE_DIR) / "third_party" / "tokenizer";
}
fs::path jinja_module_dir() { return assets_dir() / "node_modules" / "@huggingface" / "jinja"; }
fs::path qwen35_template_path() {
  return fs::path(DELTAGEN_SOURCE_DIR) / ".." / "shared" / "reference" / "chat-templates" / "qwen3.5.jinja";
}

struct ChatCase {
  std::string name;
  std::vector<std::string> templates;  // "qwen3.5", "qwen3", "qwen2.5"
  ojson context;
  std::string raises;  // the template's raise_exception message, if it raises
  // Where @huggingface/jinja departs from Python Jinja (see node_spelling below).
  std::vector<std::pair<std::string, std::string>> node_spelling;
};

// An engine's answer for one case: the output, or the error message.
struct Rendering {
  bool ok = false;
  std::string text;
};

std::string describe(const Rendering& r) { return (r.ok ? "output: " : "error: ") + one_line(r.text); }

class ChatTemplateParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    load_cases();
    load_templates();
    render_ours();
    const bool have_node = std::system("node --version >/dev/null 2>&1") == 0;
    if (!fs::exists(jinja_module_dir() / "package.json"))
      node_skip_ = "@huggingface/jinja missing in " + assets_dir().string() + ": run scripts/fetch_tokenizer_assets.sh";
    else if (!have_node)
      node_skip_ = "node not found: the comparison with @huggingface/jinja needs Node.js";
    else
      node_ = run_reference("node " + test::shell_quote(source("tests/jinja_reference.mjs")) + " " +
                            test::shell_quote(jinja_module_dir().string()));
    // The jinja2 transformers requires (>= 3.1).
    if (std::system("python3 -c 'import sys, jinja2; sys.exit(tuple(map(int, jinja2.__version__.split(\".\")[:2])) < "
                    "(3, 1))' >/dev/null 2>&1") != 0)
      python_skip_ = "python3 with jinja2 >= 3.1 not found: the comparison with Python Jinja is skipped";
    else
      python_ = run_reference("python3 " + test::shell_quote(source("tests/jinja_reference.py")));
  }

  static std::string source(const std::string& relative) { return (fs::path(DELTAGEN_SOURCE_DIR) / relative).string(); }

  static void load_cases() {
    const ojson doc = ojson::parse(test::read_text(source("tests/data/chat/conversations.json")));
    for (const auto& c : doc.at("cases")) {
      ChatCase cc;
      cc.name = c.at("name");
      cc.templates = c.at("templates").get<std::vector<std::string>>();
      cc.context = c.at("context");
      cc.raises = c.value("raises", "");
      if (c.contains("node_differs"))
        for (const auto& r : c["node_differs"].at("replace")) cc.node_spelling.emplace_back(r.at(0), r.at(1));
      cases_.push_back(std::move(cc));
    }
  }

  // name -> source, for the templates present.
  static void load_templates() {
    if (fs::exists(qwen35_template_path())) templates_["qwen3.5"] = test::read_text(qwen35_template_path());
    for (const auto& [name, folder] : {std::pair{"qwen3", "qwen3"}, std::pair{"qwen2.5", "qwen2_5"}}) {
      const fs::path config = assets_dir() / folder / "tokenizer_config.json";
      if (fs::exists(config)) templates_[name] = ojson::parse(test::read_text(config)).at("chat_template");
    }
  }

  static void render_ours() {
    for (const auto& [name, src] : templates_) {
      const auto t = jinja::Template::parse(src, name + ".jinja");
      for (const auto& c : cases_) {
        if (std::find(c.templates.begin(), c.templates.end(), name) == c.templates.end()) continue;
        Rendering r;
        try {
          r = {true, t.render(c.context)};
        } catch (const Error& e) {
          r = {false, e.what()};
        }
        ours_[{name, c.name}] = r;
      }
    }
  }

  // Runs a reference engine once over every (template, case) pair ours rendered.
  static std::map<std::pair<std::string, std::string>, Rendering>* run_reference(const std::string& command) {
    TempDir tmp;
    ojson groups = ojson::array();
    std::vector<std::pair<std::string, std::string>> order;
    for (const auto& [name, src] : templates_) {
      const fs::path path = tmp / (name + ".jinja");
      std::ofstream(path, std::ios::binary) << src;
      ojson group = {{"template_path", path.string()}, {"cases", ojson::array()}};
      for (const auto& c : cases_) {
        if (!ours_.count({name, c.name})) continue;
        group["cases"].push_back({{"name", c.name}, {"context", c.context}});
        order.emplace_back(name, c.name);
      }
      groups.push_back(std::move(group));
    }
    std::ofstream(tmp / "cases.json", std::ios::binary) << groups.dump();
    const std::string cmd = command + " " + test::shell_quote((tmp / "cases.json").string()) + " >" +
                            test::shell_quote((tmp / "out.json").string()) + " 2>" +
                            test::shell_quote((tmp / "err.txt").string());
    auto* results = new std::map<std::pair<std::string, std::string>, Rendering>();
    if (std::system(cmd.c_str()) != 0) {
      (*results)[{"", ""}] = {false, "reference failed: " + test::read_text(tmp / "err.txt")};
      return results;
    }
    const ojson out = ojson::parse(test::read_text(tmp / "out.json"));
    size_t k = 0;
    for (const auto& group : out)
      for (const auto& r : group) {
        const auto& key = order.at(k++);
        (*results)[key] = r.contains("output") ? Rendering{true, r["output"]} : Rendering{false, r.at("error")};
      }
    return results;
  }

  // Why the template cannot be compared, or "" when it is there.
  static std::string missing(const std::string& name) {
    if (templates_.count(name)) return "";
    return "the " + name + " chat template is missing (" +
           (name == "qwen3.5" ? qwen35_template_path().string() : "run scripts/fetch_tokenizer_assets.sh") + ")";
  }

  // Ours against @huggingface/jinja, case by case.
  void expect_node_parity(const std::string& template_name) {
    if (const std::string why = missing(template_name); !why.empty()) GTEST_SKIP() << why;
    if (!node_) GTEST_SKIP() << node_skip_;
    ASSERT_FALSE(node_->count({"", ""})) << node_->at({"", ""}).text;
    int compared = 0;
    for (const auto& c : cases_) {
      const auto key = std::pair{template_name, c.name};
      if (!ours_.count(key)) continue;
      const Rendering& mine = ours_.at(key);
      const Rendering& theirs = node_->at(key);
      ++compared;
      ASSERT_EQ(mine.ok, theirs.ok) << c.name << "\n  ours: " << describe(mine) << "\n  node: " << describe(theirs);
      if (!mine.ok) continue;  // both refuse; the message is checked in RaiseException...
      // The few documented cases where @huggingface/jinja is not Python: JavaScript
      // has one number type (JSON 1.0 arrives as 1; 1e-05 prints as 0.00001) and
      // prints booleans as true/false where Python's str() gives True/False.
      // Ours must be Python's spelling, and turn into node's by the listed swaps.
      std::string expected = mine.text;
      for (const auto& [python, js] : c.node_spelling) {
        EXPECT_NE(mine.text.find(python), std::string::npos) << c.name << ": no '" << python << "' in ours";
        for (size_t at = expected.find(python); at != std::string::npos; at = expected.find(python, at + js.size()))
          expected.replace(at, python.size(), js);
      }
      EXPECT_EQ(expected, theirs.text) << c.name;
    }
    EXPECT_GT(compared, 0);
  }

  static inline std::vector<ChatCase> cases_;
  static inline std::map<std::string, std::string> templates_;
  static inline std::map<std::pair<std::string, std::string>, Rendering> ours_;
  static inline std::map<std::pair<std::string, std::string>, Rendering>* node_ = nullptr;
  static inline std::map<std::pair<std::string, std::string>, Rendering>* python_ = nullptr;
  static inline std::string node_skip_, python_skip_;
};

TEST_F(ChatTemplateParity, TheConversationsCoverEachTemplate) {
  std::map<std::string, int> per_template;
  int raising = 0;
  for (const auto& c : cases_) {
    for (const auto& t : c.templates) ++per_template[t];
    raising += !c.raises.empty();
  }
  EXPECT_GE(per_template["qwen3.5"], 40);
  EXPECT_GE(per_template["qwen3"], 15);
  EXPECT_GE(per_template["qwen2.5"], 15);
  EXPECT_GE(raising, 7);  // every raise_exception of Qwen3.5's template
}

TEST_F(ChatTemplateParity, Qwen35MatchesHuggingFaceJinja) { expect_node_parity("qwen3.5"); }
TEST_F(ChatTemplateParity, Qwen3MatchesHuggingFaceJinja) { expect_node_parity("qwen3"); }
TEST_F(ChatTemplateParity, Qwen25MatchesHuggingFaceJinja) { expect_node_parity("qwen2.5"); }

// A template's raise_exception('message') is an Error whose one line holds
// that message after "NAME:LINE:COL: "; every other case renders.
TEST_F(ChatTemplateParity, RaiseExceptionGivesTheTemplatesMessage) {
  if (const std::string why = missing("qwen3.5"); !why.empty()) GTEST_SKIP() << why;
  for (const auto& c : cases_) {
    const auto it = ours_.find({"qwen3.5", c.name});
    if (it == ours_.end()) continue;
    const Rendering& r = it->second;
    if (c.raises.empty()) {
      EXPECT_TRUE(r.ok) << c.name << ": " << r.text;
      continue;
    }
    ASSERT_FALSE(r.ok) << c.name << " rendered instead of raising";
    EXPECT_EQ(r.text.find('\n'), std::string::npos);
    EXPECT_TRUE(r.text.starts_with("qwen3.5.jinja:")) << r.text;
    EXPECT_TRUE(r.text.ends_with(": " + c.raises)) << c.name << ": " << r.text;
  }
}

// A 3 MB conversation (200 turns with reasoning and tool calls) stays far
// inside the default limits: it renders at a hundredth of the work budget.
TEST_F(ChatTemplateParity, ALongConversationFitsTheDefaultLimits) {
  if (const std::string why = missing("qwen3.5"); !why.empty()) GTEST_SKIP() << why;
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  ojson messages = ojson::array({{{"role", "system"}, {"content", repeat("You are helpful. ", 100)}}});
  for (int i = 0; i < 200; ++i) {
    const std::string n = std::to_string(i);
    messages.push_back({{"role", "user"}, {"content", repeat("question " + n + " 你好 ", 300)}});
    ojson call = {{"function", {{"name", "f"}, {"arguments", {{"q", std::string(1000, 'x')}, {"n", i}}}}}};
    messages.push_back({{"role", "assistant"},
                        {"content", "<think>\n" + repeat("thinking " + n + " ", 200) + "\n</think>\n\n" +
                                        repeat("answer " + n + " ", 300)},
                        {"tool_calls", ojson::array({call})}});
    messages.push_back({{"role", "tool"}, {"content", repeat("result ", 300)}});
  }
  messages.push_back({{"role", "user"}, {"content", "final"}});
  const ojson context = {{"messages", messages}, {"add_generation_prompt", true}};
  jinja::Limits limits;
  limits.max_loop_iterations /= 100;
  const auto start = std::chrono::steady_clock::now();
  const std::string out = jinja::Template::parse(templates_["qwen3.5"], "qwen3.5.jinja", limits).render(context);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(out.size(), 2'000'000u);
  EXPECT_TRUE(out.ends_with("<|im_start|>user\nfinal<|im_end|>\n<|im_start|>assistant\n<think>\n"));
  EXPECT_LT(seconds, 3.0);
}

// Python Jinja is what transformers renders with: here there are no exceptions.
TEST_F(ChatTemplateParity, MatchesPythonJinja) {
  if (!python_) GTEST_SKIP() << python_skip_;
  ASSERT_FALSE(python_->count({"", ""})) << python_->at({"", ""}).text;
  for (const auto& [key, mine] : ours_) {
    const Rendering& theirs = python_->at(key);
    ASSERT_EQ(mine.ok, theirs.ok) << key.first << "/" << key.second << "\n  ours: " << describe(mine)
                                  << "\n  python: " << describe(theirs);
    if (mine.ok)
      EXPECT_EQ(mine.text, theirs.text) << key.first << "/" << key.second;
    else
      EXPECT_NE(theirs.text.find(mine.text.substr(mine.text.rfind(": ") + 2)), std::string::npos)
          << key.first << "/" << key.second << ": python says " << theirs.text;
  }
}

}  // namespace
}  // namespace deltagen
