// Text generation and multi-turn chat: the chat template's rendering of a
// whole conversation each turn, the state kept where the new prompt
// continues it and restored where the template re-renders history,
// streaming, stop strings, the chat CLI and tokenizer errors. The golden
// model with a tiny byte-level tokenizer that fits its vocabulary
// (tests/runtime_fixtures.h); it has no chat template, so the built-in
// ChatML format renders (templates from checkpoints: tests/chat_template_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/deltagen.h"
#include "chat/chat_template.h"
#include "runtime/text_stream.h"
#include "runtime_fixtures.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;
using test::golden_chat_engine;
using test::TempDir;

GenerationOptions greedy(int64_t new_tokens) {
  GenerationOptions o;
  o.max_new_tokens = new_tokens;
  return o;
}

TEST(ChatTemplate, TheBuiltInFormatIsChatMLWithQwensGenerationPrompt) {
  using nlohmann::ordered_json;
  ChatRenderInputs in;
  in.messages = ordered_json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  EXPECT_EQ(ChatTemplate::builtin().render(in),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  in.kwargs = {{"enable_thinking", false}};
  in.messages.push_back({{"role", "assistant"}, {"content", "Hello."}});
  in.add_generation_prompt = false;
  EXPECT_EQ(ChatTemplate::builtin().render(in),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n");
  in.add_generation_prompt = true;
  EXPECT_TRUE(ChatTemplate::builtin().render(in).ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  in.tools = ordered_json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  EXPECT_THROW(ChatTemplate::builtin().render(in), Error);  // no tools in the built-in format
}

TEST(ChatTemplate, TheTinyTokenizerKnowsTheChatTokens) {
  const Tokenizer& tok = golden_chat_engine()->tokenizer();
  EXPECT_EQ(tok.encode("<|im_start|>user\nhello<|im_end|>"),
            (std::vector<int64_t>{test::kImStartId, 'u', 's', 'e', 'r', '\n', 256, 257, 'o', test::kImEndId}));
  EXPECT_EQ(reply_end_ids(tok), (std::vector<int64_t>{test::kImEndId, test::kEndOfTextId}));
}

// What the built-in format renders for these messages (thinking off).
std::vector<int64_t> rendered(const nlohmann::ordered_json& messages, bool generation_prompt) {
  ChatRenderInputs in;
  in.messages = messages;
  in.kwargs = {{"enable_thinking", false}};
  in.add_generation_prompt = generation_prompt;
  return golden_chat_engine()->encode(ChatTemplate::builtin().render(in));
}

TEST(Chat, TurnTwoGoesBackToTheEndOfTurnOnesMessageAndEqualsOneRunOverItsPrompt) {
  using nlohmann::ordered_json;
  Chat chat(golden_chat_engine(), {.system_prompt = "You are terse.", .thinking = false});
  const ChatReply turn1 = chat.send("hello there", greedy(8));
  ordered_json messages = ordered_json::array({{{"role", "system"}, {"content", "You are terse."}},
                                               {{"role", "user"}, {"content", "hello there"}}});
  const std::vector<int64_t> message1_end = rendered(messages, false);
  EXPECT_EQ(turn1.prefilled_tokens, int64_t(rendered(messages, true).size()));
  EXPECT_EQ(turn1.reprefilled_tokens, 0);
  EXPECT_EQ(turn1.content, turn1.text);  // no reasoning, no tools
  ASSERT_EQ(chat.messages().size(), 2u);
  EXPECT_EQ(chat.messages()[1].role, "assistant");
  EXPECT_EQ(chat.messages()[1].content, turn1.content);

  // Turn 2's prompt renders reply 1 without turn 1's generation prompt
  // (<think></think>), so the state goes back to the end of message 1 and
  // runs the re-rendered reply and the new message from there.
  const ChatReply turn2 = chat.send("and then?", greedy(8));
  messages.push_back({{"role", "assistant"}, {"content", turn1.content}});
  const int64_t history_end = int64_t(rendered(messages, false).size());
  messages.push_back({{"role", "user"}, {"content", "and then?"}});
  const std::vector<int64_t> prompt2 = rendered(messages, true);
  EXPECT_EQ(turn2.prefilled_tokens, int64_t(prompt2.size() - message1_end.size()));
  EXPECT_EQ(turn2.reprefilled_tokens, history_end - int64_t(message1_end.size()));
  EXPECT_GT(turn2.reprefilled_tokens, int64_t(turn1.generated_ids.size()));

  // The same reply as one fresh run over turn 2's whole prompt.
  Conversation fresh(golden_chat_engine());
  GenerationOptions o = greedy(8);
  o.extra_stop_ids = reply_end_ids(golden_chat_engine()->tokenizer());
  EXPECT_EQ(turn2.generated_ids, fresh.generate(prompt2, o).generated_ids);
}

TEST(Chat, StreamedPiecesAddUpToTheDecodedReply) {
  Conversation c(golden_chat_engine());
  std::string streamed;
  std::vector<int64_t> seen;
  const GenerationResult r = c.generate(std::string_view("hello"), greedy(12), [&](std::string_view text, int64_t id) {
    streamed += text;
    seen.push_back(id);
    return true;
  });
  EXPECT_EQ(seen, r.generated_ids);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.text, golden_chat_engine()->tokenizer().decode(r.generated_ids, {.skip_special_tokens = true}));
  EXPECT_FALSE(r.text.empty());
}

TEST(Chat, ACallbackReturningFalseStopsTheSequenceAfterThatToken) {
  Conversation full(golden_chat_engine());
  GenerationOptions o = greedy(12);
  o.stop_at_eos = false;
  const GenerationResult whole = full.generate(test::golden_prompt_ids(), o);
  ASSERT_EQ(whole.generated_ids.size(), 12u);

  Conversation c(golden_chat_engine());
  int calls = 0;
  const GenerationResult r = c.generate(test::golden_prompt_ids(), o, [&](std::string_view, int64_t) {
    return ++calls < 3;  // stop on the third token
  });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r.stop_reason, StopReason::Cancelled);
  EXPECT_STREQ(stop_reason_name(r.stop_reason), "cancelled");
  EXPECT_EQ(r.generated_ids, std::vector<int64_t>(whole.generated_ids.begin(), whole.generated_ids.begin() + 3));
  // The conversation holds the cancelled reply and goes on from it as from any other stop.
  EXPECT_EQ(c.length(), int64_t(test::golden_prompt_ids().size()) + 3);
  o.max_new_tokens = 2;
  const GenerationResult more = c.generate(std::span<const int64_t>(), o);
  EXPECT_EQ(more.generated_ids[0], whole.generated_ids[3]);
}

TEST(Chat, StopStringEndsTheTextBeforeIt) {
  // The golden continuation decodes to "Mw490w490w381w381...": stop at "w381".
  Conversation c(golden_chat_engine());
  GenerationOptions o = greedy(16);
  o.stop_at_eos = false;
  o.stop_strings = {"w381"};
  std::string streamed;
  const GenerationResult r =
      c.generate(test::golden_prompt_ids(), o, [&](std::string_view text, int64_t) {
        streamed += text;
        return true;
      });
  EXPECT_EQ(r.generated_ids, (std::vector<int64_t>{77, 490, 490, 381}));
  EXPECT_EQ(r.stop_reason, StopReason::StopString);
  EXPECT_EQ(r.text, "Mw490w490");
  EXPECT_EQ(streamed, r.text);

  // A stop string that spans tokens ("0w3" = end of 490 + start of 381) is found too.
  Conversation c2(golden_chat_engine());
  o.stop_strings = {"nope", "0w3"};
  EXPECT_EQ(c2.generate(test::golden_prompt_ids(), o).text, "Mw490w49");
}

TEST(Chat, IdsTheTokenizerDoesNotKnowHaveNoText) {
  // Real checkpoints pad the model's vocabulary beyond the tokenizer's.
  TextStream stream(golden_chat_engine()->tokenizer(), {});
  EXPECT_EQ(stream.push(600), "");
  EXPECT_EQ(stream.push('h'), "h");
  EXPECT_EQ(stream.text(), "h");
}

TEST(Chat, ThinkingOnStartsTheReplyInsideAThinkBlock) {
  Chat thinking(golden_chat_engine(), {.thinking = true});
  thinking.send("hi", greedy(2));
  thinking.set_messages({thinking.messages()[0]});
  const auto prompt = golden_chat_engine()->encode(thinking.render());
  ASSERT_GE(prompt.size(), 3u);
  EXPECT_EQ(std::vector<int64_t>(prompt.end() - 3, prompt.end()), (std::vector<int64_t>{'\n', test::kThinkId, '\n'}));
  const auto& tokens = thinking.conversation().tokens();
  ASSERT_GT(tokens.size(), prompt.size());
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.end(), tokens.begin()));
}

// ---- the CLI ----------------------------------------------------------------------------

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(ChatCli, EachTurnRunsOnlyItsTokensAndMatchesTheLibrary) {
  const auto r = test::run_cli_with_input({"chat", "--model", test::golden_chat_model_dir().string(), "--system",
                                           "You are terse.", "--no-think", "--max-new-tokens", "6", "--json"},
                                          "hello there\nand then?\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto turns = json_lines(r.out);
  ASSERT_EQ(turns.size(), 2u) << r.out;

  Chat chat(golden_chat_engine(), {.system_prompt = "You are terse.", .thinking = false});
  const ChatReply t1 = chat.send("hello there", greedy(6));
  const ChatReply t2 = chat.send("and then?", greedy(6));
  EXPECT_EQ(turns[0].at("generated_ids").get<std::vector<int64_t>>(), t1.generated_ids);
  EXPECT_EQ(turns[1].at("generated_ids").get<std::vector<int64_t>>(), t2.generated_ids);
  EXPECT_EQ(turns[1].at("text").get<std::string>(), t2.text);
  EXPECT_EQ(turns[1].at("content").get<std::string>(), t2.content);
  EXPECT_EQ(turns[0].at("prefilled_tokens").get<int64_t>(), t1.prefilled_tokens);
  EXPECT_EQ(turns[1].at("prefilled_tokens").get<int64_t>(), t2.prefilled_tokens);
  EXPECT_EQ(turns[1].at("reprefilled_tokens").get<int64_t>(), t2.reprefilled_tokens);
  EXPECT_GT(t2.reprefilled_tokens, 0);
  EXPECT_LT(t2.prefilled_tokens, chat.conversation().length() - int64_t(t2.generated_ids.size()));
  EXPECT_EQ(turns[1].at("conversation_tokens").get<int64_t>(), chat.conversation().length());
}

TEST(ChatCli, StreamsRepliesAndReportsPrefilledTokens) {
  const auto r = test::run_cli_with_input(
      {"chat", "--model", test::golden_chat_model_dir().string(), "--max-new-tokens", "5"}, "hello\nagain\n/exit\nnot read\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Chat chat(golden_chat_engine());
  const std::string first = chat.send("hello", greedy(5)).text;
  const std::string second = chat.send("again", greedy(5)).text;
  EXPECT_EQ(r.out, first + "\n" + second + "\n");
  EXPECT_NE(r.err.find("[turn 2: prefilled "), std::string::npos) << r.err;
}

TEST(ChatCli, SaveUndoAndLoadCommands) {
  TempDir tmp;
  const std::string state = (tmp / "chat.state").string();
  const std::string model = test::golden_chat_model_dir().string();
  auto r = test::run_cli_with_input({"chat", "--model", model, "--max-new-tokens", "4", "--json"},
                                    "one\n/save " + state + "\ntwo\n/undo\ntwo\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto turns = json_lines(r.out);
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_EQ(turns[1].at("generated_ids"), turns[2].at("generated_ids")) << "/undo rewinds to before turn two";

  auto resumed = test::run_cli_with_input(
      {"chat", "--model", model, "--max-new-tokens", "4", "--json", "--load-state", state}, "two\n");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(json_lines(resumed.out).at(0).at("generated_ids"), turns[1].at("generated_ids"));
}

TEST(ChatCli, ABadCommandIsReportedAndTheChatGoesOn) {
  const auto r = test::run_cli_with_input(
      {"chat", "--model", test::golden_chat_model_dir().string(), "--max-new-tokens", "3", "--json"},
      "/undo\n/load /nonexistent/state\nhello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("error: /undo: nothing to undo\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("error: /nonexistent/state: cannot open the snapshot file\n"), std::string::npos) << r.err;
  EXPECT_EQ(json_lines(r.out).size(), 1u);
}

TEST(GenerateCli, TextPromptStreamsTheSameTextAsJsonReports) {
  const std::string model = test::golden_chat_model_dir().string();
  const auto text = test::run_cli({"generate", "--model", model, "--prompt", "hello", "--max-new-tokens", "8"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const auto json = test::run_cli({"generate", "--model", model, "--prompt", "hello", "--max-new-tokens", "8", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(text.out, j.at("text").get<std::string>() + "\n");
  EXPECT_EQ(j.at("prompt_ids").get<std::vector<int64_t>>(), (std::vector<int64_t>{256, 257, 'o'}));

  // The same prompt on stdin, and from a file.
  const auto from_stdin = test::run_cli_with_input({"generate", "--model", model, "--max-new-tokens", "8"}, "hello");
  EXPECT_EQ(from_stdin.out, text.out) << from_stdin.err;
  TempDir tmp;
  std::ofstream(tmp / "prompt.txt") << "hello";
  const auto from_file = test::run_cli(
      {"generate", "--model", model, "--prompt-file", (tmp / "prompt.txt").string(), "--max-new-tokens", "8"});
  EXPECT_EQ(from_file.out, text.out) << from_file.err;
}

TEST(GenerateCli, PromptsFileIsABatchAndChatWrapsEachPrompt) {
  TempDir tmp;
  std::ofstream(tmp / "prompts.txt") << "hello\n\nhow are you\n";
  const auto r = test::run_cli({"generate", "--model", test::golden_chat_model_dir().string(), "--prompts-file",
                                (tmp / "prompts.txt").string(), "--chat", "--no-think", "--max-new-tokens", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("sequences").size(), 2u);
  Chat chat(golden_chat_engine(), {.thinking = false});
  EXPECT_EQ(j.at("sequences")[1].at("generated_ids").get<std::vector<int64_t>>(),
            chat.send("how are you", greedy(5)).generated_ids);
}

TEST(GenerateCli, UnsupportedTokenizerIsAOneLineError) {
  TempDir tmp;
  auto tokenizer = nlohmann::json::parse(test::tiny_tokenizer_json());
  tokenizer["model"]["type"] = "Unigram";
  test::copy_model_with_tokenizer(test::golden_model_dir(), tmp / "model", tokenizer.dump(),
                                  test::tiny_tokenizer_config_json());
  const auto r = test::run_cli({"generate", "--model", (tmp / "model").string(), "--prompt", "hello"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("model type 'Unigram' is not supported"), std::string::npos) << r.err;
  // Token ids do not need the tokenizer.
  const auto ids = test::run_cli({"generate", "--model", (tmp / "model").string(), "--ids", "5,17", "--max-new-tokens", "2"});
  EXPECT_EQ(ids.exit_code, 0) << ids.err;
  // Nor does the chat start without one that works.
  const auto chat = test::run_cli_with_input({"chat", "--model", (tmp / "model").string()}, "hi\n");
  EXPECT_EQ(chat.exit_code, 1);
  EXPECT_NE(chat.err.find("model type 'Unigram' is not supported"), std::string::npos) << chat.err;
}

}  // namespace
}  // namespace deltagen
