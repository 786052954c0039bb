// Chat templates from checkpoints (chat/chat_template.h) and what uses them:
// where a model folder's template comes from, the OpenAI message checks, a
// round trip (Qwen3.5's template renders tool calls, the output parser reads
// them back), generate --chat's flags (--messages, --tools, --chat-kwargs,
// --print-prompt), a prompt's state saved alone and continued, and the
// checkpoint's sampling defaults (generation_config.json -> genai_config.json
// -> chats). The golden model with the tiny tokenizer; Qwen3.5's official
// template is read from ../shared/reference/chat-templates at run time.
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>

#include "chat/messages.h"
#include "chat/output_parser.h"
#include "runtime/genai_config.h"
#include "runtime_fixtures.h"
#include "test_util.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using test::TempDir;

fs::path qwen35_template_file() {
  return fs::path(DELTAGEN_SOURCE_DIR) / ".." / "shared" / "reference" / "chat-templates" / "qwen3.5.jinja";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

// The golden chat model with Qwen3.5's template in it, once per process.
const fs::path& qwen35_chat_model_dir() {
  static TempDir dir;
  static const fs::path model = [] {
    const fs::path out = dir / "model";
    test::copy_model_with_tokenizer(test::golden_model_dir(), out, test::tiny_tokenizer_json(),
                                    test::tiny_tokenizer_config_json());
    fs::copy_file(qwen35_template_file(), out / "chat_template.jinja");
    return out;
  }();
  return model;
}

ordered_json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

// ---- where the template comes from ---------------------------------------------

TEST(ChatTemplateSource, TheJinjaFileWinsOverTokenizerConfig) {
  TempDir dir;
  write_file(dir / "tokenizer_config.json", R"({"chat_template": "config {{ messages|length }}", "eos_token": "<e>"})");
  ChatRenderInputs in;
  in.messages = ordered_json::array({user("a"), user("b")});
  EXPECT_EQ(ChatTemplate::for_model(dir.path()).render(in), "config 2");
  write_file(dir / "chat_template.jinja", "jinja {{ eos_token }}");
  const ChatTemplate t = ChatTemplate::for_model(dir.path());
  EXPECT_EQ(t.render(in), "jinja <e>");  // the tokenizer's special tokens are template variables
  EXPECT_EQ(t.name(), (dir / "chat_template.jinja").string());
}

TEST(ChatTemplateSource, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  TempDir dir;
  write_file(dir / "tokenizer_config.json",
             R"({"chat_template": [{"name": "default", "template": "plain"}, {"name": "tool_use", "template": "tools {{ tools|length }}"}]})");
  const ChatTemplate t = ChatTemplate::for_model(dir.path());
  ChatRenderInputs in;
  in.messages = ordered_json::array({user("a")});
  EXPECT_EQ(t.render(in), "plain");
  in.tools = ordered_json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  EXPECT_EQ(t.render(in), "tools 1");
}

TEST(ChatTemplateSource, ChatTemplateJsonIsReadToo) {
  TempDir dir;
  write_file(dir / "chat_template.json", R"({"chat_template": "from json"})");
  EXPECT_EQ(ChatTemplate::for_model(dir.path()).render({}), "from json");
}

TEST(ChatTemplateSource, NoTemplateFallsBackToTheBuiltInFormat) {
  TempDir dir;
  EXPECT_FALSE(ChatTemplate::find(dir.path()).has_value());
  EXPECT_TRUE(ChatTemplate::for_model(dir.path()).is_builtin());
}

TEST(ChatTemplateSource, ABrokenTemplateIsAOneLineErrorNamingTheFile) {
  TempDir dir;
  write_file(dir / "chat_template.jinja", "{% for m in messages %}never closed");
  const std::string message = test::error_message([&] { ChatTemplate::for_model(dir.path()); });
  EXPECT_NE(message.find("chat_template.jinja:1:"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  write_file(dir / "chat_template.jinja", "{{ raise_exception('No way.') }}");
  const std::string raised = test::error_message([&] { ChatTemplate::for_model(dir.path()).render({}); });
  EXPECT_NE(raised.find("No way."), std::string::npos) << raised;
}

// ---- OpenAI messages ---------------------------------------------------------------

TEST(ChatMessages, ArgumentsAsAJsonStringBecomeAnObjectAndPartsAreJoined) {
  const ordered_json m = normalize_messages(ordered_json::parse(R"([
    {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
    {"role": "assistant", "content": null,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": [1, 2.5]}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "3"}])"));
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[0]["content"], "Be brief.");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"], ordered_json::parse(R"({"x": [1, 2.5]})"));
  EXPECT_EQ(m[2]["tool_call_id"], "c1");
}

TEST(ChatMessages, BadMessagesNameTheField) {
  auto error = [](const char* json) {
    return test::error_message([&] { normalize_messages(ordered_json::parse(json)); });
  };
  EXPECT_EQ(error(R"([])"), "messages: must not be empty");
  EXPECT_EQ(error(R"([{"role": "robot", "content": "x"}])"),
            "messages[0].role: 'robot' is not one of system, developer, user, assistant, tool");
  EXPECT_EQ(error(R"([{"role": "user"}])"), "messages[0].content: is missing");
  EXPECT_EQ(error(R"([{"role": "user", "content": [{"type": "image_url"}]}])"),
            "messages[0].content[0].type: 'image_url' is not supported (only text parts)");
  EXPECT_EQ(error(R"([{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}])"),
            "messages[0].tool_calls[0].function.arguments: is not valid JSON");
  EXPECT_EQ(test::error_message([] { checked_tools(ordered_json::parse(R"([{"type": "function", "function": {}}])")); }),
            "tools[0].function.name: must be a non-empty string");
}

// ---- round trip: render tool calls, parse them back -----------------------------------

TEST(ChatTemplateRoundTrip, Qwen35ToolCallsParseBackToTheSameCalls) {
  const ChatTemplate t = ChatTemplate::from_source(read_file(qwen35_template_file()), "qwen3.5.jinja");
  const ordered_json tools = ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
      "hours": {"type": "array"}, "where": {"type": "object"}}}}},
    {"type": "function", "function": {"name": "note", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}])");
  const ordered_json calls = ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "arguments": {"city": "São Paulo", "days": 3, "metric": true, "hours": [6, 12], "where": {"lat": -23.5, "lon": -46.6}}}},
    {"type": "function", "function": {"name": "note", "arguments": {"text": "two\nlines"}}}])");
  ChatRenderInputs in;
  in.messages = ordered_json::array({user("Weather?"), {{"role", "assistant"},
                                                        {"content", "Let me look."},
                                                        {"reasoning_content", "They want the weather."},
                                                        {"tool_calls", calls}}});
  in.tools = tools;
  in.add_generation_prompt = false;
  const std::string text = t.render(in);
  // The assistant turn, after its <|im_start|>assistant\n, up to its <|im_end|>.
  const std::string head = "<|im_start|>assistant\n";
  const size_t begin = text.rfind(head) + head.size();
  const std::string reply = text.substr(begin, text.rfind("<|im_end|>") - begin);

  ChatOutputParserOptions o;
  o.tools = &tools;
  const ChatDelta parsed = parse_chat_output(reply, o);
  EXPECT_EQ(parsed.reasoning, "They want the weather.");
  EXPECT_EQ(parsed.content, "Let me look.");
  ASSERT_EQ(parsed.tool_calls.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(parsed.tool_calls[i].name, calls[i]["function"]["name"]);
    EXPECT_EQ(ordered_json::parse(parsed.tool_calls[i].arguments), calls[i]["function"]["arguments"]);
  }
}

// ---- generate --chat ------------------------------------------------------------------

TEST(GenerateChatCli, PrintPromptWritesTheRenderedTemplateByteForByte) {
  TempDir tmp;
  const ordered_json messages = ordered_json::array({user("  Hi there  "), {{"role", "assistant"}, {"content", "<think>\nx\n</think>\n\nHello!"}}, user("More?")});
  write_file(tmp / "conv.json", messages.dump());
  const std::string model = qwen35_chat_model_dir().string();
  const auto r = test::run_cli({"generate", "--model", model, "--messages", (tmp / "conv.json").string(), "--print-prompt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ChatRenderInputs in;
  in.messages = normalize_messages(messages);
  EXPECT_EQ(r.out, ChatTemplate::for_model(model).render(in));
  // The template trims messages and drops the reasoning of replies before the last user message.
  EXPECT_EQ(r.out, "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                   "<|im_start|>user\nMore?<|im_end|>\n<|im_start|>assistant\n<think>\n");

  const auto j = test::run_cli({"generate", "--model", model, "--messages", (tmp / "conv.json").string(), "--print-prompt",
                                "--json", "--chat-kwargs", R"({"add_generation_prompt": false})"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto printed = nlohmann::json::parse(j.out);
  const std::string prompt = printed["prompt"];
  EXPECT_TRUE(prompt.ends_with("<|im_start|>user\nMore?<|im_end|>\n")) << prompt;
  EXPECT_EQ(printed["prompt_ids"].get<std::vector<int64_t>>(), test::golden_chat_engine()->encode(prompt));
}

TEST(GenerateChatCli, ToolsAndStringArgumentsRenderAsTheTemplateExpects) {
  TempDir tmp;
  write_file(tmp / "tools.json", R"([{"type": "function", "function": {"name": "add", "description": "Adds.",
    "parameters": {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}}}])");
  auto conversation = [](const ordered_json& arguments) {
    return ordered_json::array({user("Add 1."),
                                {{"role", "assistant"}, {"content", ""},
                                 {"tool_calls", {{{"id", "c"}, {"type", "function"}, {"function", {{"name", "add"}, {"arguments", arguments}}}}}}},
                                {{"role", "tool"}, {"tool_call_id", "c"}, {"content", "2"}}});
  };
  write_file(tmp / "as_string.json", conversation(R"({"a": 1})").dump());     // OpenAI's convention
  write_file(tmp / "as_object.json", conversation({{"a", 1}}).dump());        // Hugging Face's
  const std::string model = qwen35_chat_model_dir().string();
  auto print = [&](const char* file) {
    return test::run_cli({"generate", "--model", model, "--messages", (tmp / file).string(), "--tools",
                          (tmp / "tools.json").string(), "--print-prompt"});
  };
  const auto a = print("as_string.json"), b = print("as_object.json");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out.find(R"({"type": "function", "function": {"name": "add", "description": "Adds.")"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"),
            std::string::npos) << a.out;
  EXPECT_NE(a.out.find("<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>"), std::string::npos) << a.out;

  write_file(tmp / "bad.json", R"([{"role": "user", "content": 5}])");
  const auto bad = test::run_cli({"generate", "--model", model, "--messages", (tmp / "bad.json").string(), "--print-prompt"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "error: " + (tmp / "bad.json").string() +
                         ": messages[0].content: must be a string, null or a list of content parts\n");
}

TEST(GenerateChatCli, ATemplatesRaiseExceptionIsTheError) {
  TempDir tmp;
  write_file(tmp / "conv.json", R"([{"role": "assistant", "content": "only me"}])");
  const auto r = test::run_cli({"generate", "--model", qwen35_chat_model_dir().string(), "--messages",
                                (tmp / "conv.json").string(), "--print-prompt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("No user query found in messages."), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(GenerateChatCli, APromptsStateSavedAloneContinuesTheConversation) {
  TempDir tmp;
  const std::string model = qwen35_chat_model_dir().string();
  // The system prompt's turn alone, run and saved without generating.
  const auto saved = test::run_cli({"generate", "--model", model, "--prompt", "<|im_start|>system\nBe terse.<|im_end|>\n",
                                    "--max-new-tokens", "0", "--save-state", (tmp / "system.state").string(), "--json"});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  EXPECT_TRUE(nlohmann::json::parse(saved.out)["generated_ids"].empty());
  EXPECT_EQ(test::run_cli({"generate", "--model", model, "--prompt", "x", "--max-new-tokens", "0"}).exit_code, 1);

  const std::vector<std::string> chat = {"generate", "--model", model, "--chat", "--system", "Be terse.",
                                         "--prompt", "Hi", "--max-new-tokens", "6", "--json"};
  const auto whole = test::run_cli(chat);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  std::vector<std::string> continued = chat;
  continued.insert(continued.end(), {"--load-state", (tmp / "system.state").string()});
  const auto rest = test::run_cli(continued);
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  const auto w = nlohmann::json::parse(whole.out), c = nlohmann::json::parse(rest.out);
  EXPECT_EQ(c["generated_ids"], w["generated_ids"]);
  EXPECT_LT(c["prefilled_tokens"].get<int64_t>(), w["prefilled_tokens"].get<int64_t>());

  // A state that is not where the conversation starts is refused.
  std::vector<std::string> other = continued;
  other[5] = "Be verbose.";
  const auto refused = test::run_cli(other);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("is not the start of this conversation's rendered prompt"), std::string::npos) << refused.err;
}

// ---- sampling defaults from the checkpoint ---------------------------------------------

TEST(GenerationConfig, SamplingAndEosIdsGoIntoGenaiConfigAndChatsStartFromThem) {
  TempDir tmp;
  for (const auto& e : fs::directory_iterator(test::golden_checkpoint()))
    if (e.is_regular_file()) fs::copy_file(e.path(), tmp / e.path().filename().string());
  write_file(tmp / "generation_config.json",
             R"({"do_sample": true, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "eos_token_id": [511, 509]})");
  const auto built = test::run_cli({"build", "--checkpoint", tmp.path().string(), "--out", (tmp / "model").string()});
  ASSERT_EQ(built.exit_code, 0) << built.err;
  const auto genai = nlohmann::json::parse(read_file(tmp / "model" / "genai_config.json"));
  EXPECT_EQ(genai["search"]["do_sample"], true);
  EXPECT_EQ(genai["search"]["temperature"], 0.6);
  EXPECT_EQ(genai["search"]["top_p"], 0.95);
  EXPECT_EQ(genai["search"]["top_k"], 20);
  EXPECT_EQ(genai["model"]["eos_token_id"], nlohmann::json::parse("[511, 509]"));
  const GenaiConfig config = load_genai_config(tmp / "model" / "genai_config.json");
  EXPECT_EQ(config.sampling.temperature, 0.6);
  EXPECT_EQ(config.sampling.top_k, 20);
  EXPECT_EQ(config.eos_token_ids, (std::vector<int64_t>{511, 509}));

  // generate --chat samples as the checkpoint says unless flags say otherwise.
  test::copy_model_with_tokenizer(tmp / "model", tmp / "chat", test::tiny_tokenizer_json(), test::tiny_tokenizer_config_json());
  const std::vector<std::string> base = {"generate", "--model", (tmp / "chat").string(), "--chat", "--prompt", "hello",
                                         "--max-new-tokens", "12", "--seed", "3", "--ignore-eos", "--json"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["generated_ids"];
  };
  const auto defaults = run({});
  EXPECT_EQ(defaults, run({"--temperature", "0.6", "--top-p", "0.95", "--top-k", "20"}));
  EXPECT_NE(defaults, run({"--temperature", "0"}));

  // Without a generation_config.json the search stays greedy.
  const auto plain = nlohmann::json::parse(read_file(test::golden_model_dir() / "genai_config.json"));
  EXPECT_EQ(plain["search"]["do_sample"], false);
  EXPECT_TRUE(load_genai_config(test::golden_model_dir() / "genai_config.json").sampling.greedy());
}

}  // namespace
}  // namespace deltagen
