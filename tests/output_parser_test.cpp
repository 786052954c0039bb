// The chat output parser (src/chat/output_parser.h): reasoning, content and
// tool calls out of generated text, whole and streamed. Every text here is
// also parsed in every chunking the tests can think of (each split point,
// random splits, one byte at a time): the deltas must add up to the whole
// parse.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

using nlohmann::ordered_json;

// Tools as an OpenAI request declares them; their schemas type the values.
const ordered_json& tools() {
  static const ordered_json t = ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "scale": {"type": "number"},
      "metric": {"type": "boolean"}, "where": {"type": "object"}, "hours": {"type": "array"},
      "note": {"type": ["string", "null"]}, "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
      "unit": {"enum": ["c", "f"]}, "level": {"enum": [1, 2, 3]}}}}},
    {"type": "function", "function": {"name": "run_code", "parameters": {"type": "object", "properties": {
      "code": {"type": "string"}, "timeout": {"type": "number"}}}}},
    {"name": "bare_tool", "parameters": {"properties": {"flag": {"type": "boolean"}}}},
    "not a tool", {"type": "function"}
  ])");
  return t;
}

ChatOutputParserOptions opts(bool thinking = false) {
  ChatOutputParserOptions o;
  o.starts_in_reasoning = thinking;
  o.tools = &tools();
  o.id_seed = 7;
  return o;
}

ChatDelta parse(std::string_view text, const ChatOutputParserOptions& o = opts()) { return parse_chat_output(text, o); }

void expect_same(const ChatDelta& got, const ChatDelta& want, const std::string& where) {
  EXPECT_EQ(got.reasoning, want.reasoning) << where;
  EXPECT_EQ(got.content, want.content) << where;
  ASSERT_EQ(got.tool_calls.size(), want.tool_calls.size()) << where;
  for (size_t i = 0; i < got.tool_calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].id, want.tool_calls[i].id) << where;
    EXPECT_EQ(got.tool_calls[i].name, want.tool_calls[i].name) << where;
    EXPECT_EQ(got.tool_calls[i].arguments, want.tool_calls[i].arguments) << where;
  }
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

// Pushes the text cut at `cuts` (ascending), then finishes; the deltas added
// up, which must equal what total() says.
ChatDelta stream(std::string_view text, const std::vector<size_t>& cuts, const ChatOutputParserOptions& o) {
  ChatOutputParser parser(o);
  ChatDelta sum;
  size_t from = 0;
  for (size_t cut : cuts) {
    sum.append(parser.push(text.substr(from, cut - from)));
    from = cut;
  }
  sum.append(parser.push(text.substr(from)));
  sum.append(parser.finish());
  expect_same(parser.total(), sum, "total()");
  return sum;
}

// The invariant: any chunking gives the whole parse.
void expect_chunking_invariant(std::string_view text, const ChatOutputParserOptions& o) {
  const ChatDelta whole = parse(text, o);
  for (size_t cut = 0; cut <= text.size(); ++cut)
    expect_same(stream(text, {cut}, o), whole, "split at " + std::to_string(cut) + " of: " + std::string(text));
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  expect_same(stream(text, bytes, o), whole, "1-byte chunks of: " + std::string(text));
  std::mt19937 rng(12345);
  for (int round = 0; round < 20; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i)
      if (rng() % 4 == 0) cuts.push_back(i);
    expect_same(stream(text, cuts, o), whole, "random chunks of: " + std::string(text));
  }
}

ToolCall call(std::string name, std::string arguments) { return {"", std::move(name), std::move(arguments)}; }

void expect_calls(const ChatDelta& d, const std::vector<ToolCall>& want) {
  ASSERT_EQ(d.tool_calls.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(d.tool_calls[i].name, want[i].name);
    EXPECT_EQ(d.tool_calls[i].arguments, want[i].arguments);
  }
}

// ---- reasoning ------------------------------------------------------------------

TEST(ChatOutputParser, ThinkingOnTheOutputStartsInTheReasoning) {
  const ChatDelta d = parse("Two and two.\nThat is four.\n</think>\n\nIt is 4.", opts(true));
  EXPECT_EQ(d.reasoning, "Two and two.\nThat is four.");
  EXPECT_EQ(d.content, "It is 4.");
  EXPECT_TRUE(d.tool_calls.empty());
}

TEST(ChatOutputParser, ThinkingOffEverythingIsContent) {
  const ChatDelta d = parse("\nHello.\n\n  Bye.\n");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "\nHello.\n\n  Bye.\n");  // verbatim: nothing of it is template formatting
}

TEST(ChatOutputParser, GenerationThatEndsInTheReasoningStaysReasoning) {
  const ChatDelta d = parse("Let me see.\nHmm, maybe </thi", opts(true));
  EXPECT_EQ(d.reasoning, "Let me see.\nHmm, maybe </thi");
  EXPECT_EQ(d.content, "");
}

TEST(ChatOutputParser, EmptyReasoning) {
  // Qwen3.5's rendering of an empty reasoning, written by the model or as the rest of "<think>\n".
  EXPECT_EQ(parse("<think>\n\n</think>\n\nHi").reasoning, "");
  EXPECT_EQ(parse("<think>\n\n</think>\n\nHi").content, "Hi");
  EXPECT_EQ(parse("\n</think>\n\nHi", opts(true)).reasoning, "");
  EXPECT_EQ(parse("\n</think>\n\nHi", opts(true)).content, "Hi");
  EXPECT_EQ(parse("</think>Hi", opts(true)).content, "Hi");
}

TEST(ChatOutputParser, AThinkTagTheModelWritesOpensTheReasoning) {
  for (bool thinking : {false, true}) {
    const ChatDelta d = parse("<think>\nhmm\n</think>\n\nok", opts(thinking));
    EXPECT_EQ(d.reasoning, "hmm");
    EXPECT_EQ(d.content, "ok");
  }
  // Whitespace before it goes with the tag; without newlines nothing is stripped.
  const ChatDelta spaced = parse("\n\n<think>hmm</think>ok");
  EXPECT_EQ(spaced.reasoning, "hmm");
  EXPECT_EQ(spaced.content, "ok");
}

TEST(ChatOutputParser, OnlyTheTemplatesNewlinesAreStripped) {
  const ChatDelta d = parse("<think>\n\n  a\n\n</think>\n\n\nb\n");
  EXPECT_EQ(d.reasoning, "\n  a\n");
  EXPECT_EQ(d.content, "\nb\n");
}

TEST(ChatOutputParser, ThinkTagsLaterInTheContentAreContent) {
  EXPECT_EQ(parse("Use <think> and </think> tags.").content, "Use <think> and </think> tags.");
  EXPECT_EQ(parse("a\n</think>\n\nb").content, "a\n</think>\n\nb");
  const ChatDelta d = parse("r</think>c <think>x</think>", opts(true));
  EXPECT_EQ(d.reasoning, "r");
  EXPECT_EQ(d.content, "c <think>x</think>");
}

TEST(ChatOutputParser, ToolCallMarkupInTheReasoningIsReasoning) {
  const std::string text = "<tool_call>\n<function=f>\n</function>\n</tool_call>";
  const ChatDelta d = parse(text + "\n</think>\n\nok", opts(true));
  EXPECT_EQ(d.reasoning, text);
  EXPECT_TRUE(d.tool_calls.empty());
}

// ---- tool calls, XML form (Qwen3.5) -------------------------------------------------------

TEST(ChatOutputParser, XmlCallValuesAreTypedByTheToolsSchema) {
  const ChatDelta d = parse(
      "<tool_call>\n<function=get_weather>\n"
      "<parameter=city>\nNew York\n</parameter>\n"
      "<parameter=days>\n3\n</parameter>\n"
      "<parameter=scale>\n2.5\n</parameter>\n"
      "<parameter=metric>\nTrue\n</parameter>\n"
      "<parameter=where>\n{\"lat\": 40.7, \"tags\": [\"a\", \"b\"]}\n</parameter>\n"
      "<parameter=hours>\n[1, 2, 3]\n</parameter>\n"
      "<parameter=unit>\nc\n</parameter>\n"
      "<parameter=level>\n2\n</parameter>\n"
      "</function>\n</tool_call>");
  EXPECT_EQ(d.content, "");
  expect_calls(d, {call("get_weather",
                        R"({"city":"New York","days":3,"scale":2.5,"metric":true,"where":{"lat":40.7,"tags":["a","b"]},)"
                        R"("hours":[1,2,3],"unit":"c","level":2})")});
}

TEST(ChatOutputParser, StringValuesStayAsWritten) {
  // A string parameter keeps digits, JSON and inner newlines; only the template's "\n" each side goes.
  const ChatDelta d = parse(
      "<tool_call>\n<function=run_code>\n<parameter=code>\n"
      "def f(x):\n    return x < 3 and \"<b>\"\n\n</parameter>\n</function>\n</tool_call>");
  expect_calls(d, {call("run_code", R"({"code":"def f(x):\n    return x < 3 and \"<b>\"\n"})")});
  expect_calls(parse("<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n</function>\n</tool_call>"),
               {call("get_weather", R"({"city":"42"})")});
}

TEST(ChatOutputParser, ValuesThatDoNotFitTheirTypeStayText) {
  const ChatDelta d = parse(
      "<tool_call>\n<function=get_weather>\n"
      "<parameter=days>\nthree\n</parameter>\n<parameter=metric>\nyes\n</parameter>\n"
      "<parameter=where>\n[1]\n</parameter>\n<parameter=note>\nnull\n</parameter>\n"
      "<parameter=limit>\nNone\n</parameter>\n</function>\n</tool_call>");
  // A ["string", "null"] keeps the text; anyOf [integer, null] takes Python's None.
  expect_calls(d, {call("get_weather", R"({"days":"three","metric":"yes","where":"[1]","note":"null","limit":null})")});
}

TEST(ChatOutputParser, UnknownToolsAndParametersTakeJsonOrText) {
  // The server decides what to do with a tool it did not offer.
  const ChatDelta d = parse(
      "<tool_call>\n<function=mystery>\n<parameter=n>\n12\n</parameter>\n<parameter=o>\n{\"k\": [true]}\n</parameter>\n"
      "<parameter=s>\nhello world\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n</function>\n</tool_call>");
  expect_calls(d, {call("mystery", R"({"n":12,"o":{"k":[true]},"s":"hello world","b":"True"})")});
  expect_calls(parse("<tool_call>\n<function=bare_tool>\n<parameter=flag>\nfalse\n</parameter>\n</function>\n</tool_call>"),
               {call("bare_tool", R"({"flag":false})")});
}

TEST(ChatOutputParser, ParallelCallsAndContentBeforeThem) {
  const ChatDelta d = parse(
      "I will check both.\n\n"
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>\n");
  EXPECT_EQ(d.content, "I will check both.");
  expect_calls(d, {call("get_weather", R"({"city":"Paris"})"), call("get_weather", R"({"city":"Rome"})")});
  EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
}

TEST(ChatOutputParser, ContentAfterACallIsKept) {
  const ChatDelta d = parse("A\n<tool_call>\n<function=f>\n</function>\n</tool_call>\n\nB");
  EXPECT_EQ(d.content, "A\n\nB");
  expect_calls(d, {call("f", "{}")});
}

TEST(ChatOutputParser, MissingClosingTagsAreForgiven) {
  // Models drop </parameter> and </function> now and then.
  expect_calls(parse("<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2\n</function>\n</tool_call>"),
               {call("get_weather", R"({"city":"Oslo","days":2})")});
  expect_calls(parse("<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</tool_call>"),
               {call("get_weather", R"({"days":2})")});
}

// ---- tool calls, JSON form (Qwen3, Hermes) ------------------------------------------------

TEST(ChatOutputParser, JsonFormCalls) {
  const ChatDelta d = parse(
      "<think>\nok\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"run_code\", \"arguments\": \"{\\\"code\\\": \\\"1+1\\\"}\"}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"noargs\"}\n</tool_call>");
  EXPECT_EQ(d.reasoning, "ok");
  EXPECT_EQ(d.content, "Sure.");
  expect_calls(d, {call("get_weather", R"({"city":"Lima","days":2})"), call("run_code", R"({"code":"1+1"})"),
                   call("noargs", "{}")});
}

TEST(ChatOutputParser, BothFormsInOneReply) {
  expect_calls(parse("<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
                     "<tool_call>\n<function=b>\n</function>\n</tool_call>"),
               {call("a", "{}"), call("b", "{}")});
}

// ---- malformed output: content, verbatim ------------------------------------------------

TEST(ChatOutputParser, MalformedCallsAreContentVerbatim) {
  const std::vector<std::string> bad = {
      "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\nstray text\n</function>\n</tool_call>",
      "<tool_call>\n<function=>\n</function>\n</tool_call>",
      "<tool_call>\n<function=f\n</tool_call>",
      "<tool_call>\n<function=f>\n<parameter=>\nx\n</parameter>\n</function>\n</tool_call>",
      "<tool_call>\n<function=f>\n</function>\n<function=g>\n</function>\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>",
      "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\", \"arguments\": \"not json\"}\n</tool_call>",
      "<tool_call>\n{\"name\": \"f\"} trailing\n</tool_call>",
  };
  for (const std::string& text : bad) {
    const ChatDelta d = parse("Before.\n\n" + text + "\nAfter.");
    EXPECT_EQ(d.content, "Before.\n\n" + text + "\nAfter.") << text;
    EXPECT_TRUE(d.tool_calls.empty()) << text;
  }
}

TEST(ChatOutputParser, AnUnclosedCallIsContentAtTheEnd) {
  const std::string text = "Let me call.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar";
  ChatOutputParser parser(opts());
  const ChatDelta first = parser.push(text);
  EXPECT_EQ(first.content, "Let me call.");  // the call is held back until it closes or the output ends
  const ChatDelta rest = parser.finish();
  EXPECT_EQ(rest.content, text.substr(first.content.size()));
  EXPECT_TRUE(parser.total().tool_calls.empty());
}

TEST(ChatOutputParser, TheTagInProseIsContentAndDoesNotHoldTheRestBack) {
  ChatOutputParser parser(opts());
  EXPECT_EQ(parser.push("Wrap calls in <tool_call> tags.").content, "Wrap calls in <tool_call> tags.");
  // Then a real call still parses.
  const ChatDelta d = parser.push("\n<tool_call>\n<function=f>\n</function>\n</tool_call>");
  expect_calls(d, {call("f", "{}")});
  EXPECT_EQ(parser.total().content, "Wrap calls in <tool_call> tags.");
}

TEST(ChatOutputParser, TooLongACallIsContentAndEndsCallParsing) {
  ChatOutputParserOptions o = opts();
  o.max_held_bytes = 64;
  const std::string long_call = "<tool_call>\n<function=run_code>\n<parameter=code>\n" + std::string(100, 'x') +
                                "\n</parameter>\n</function>\n</tool_call>";
  const std::string short_call = "<tool_call>\n<function=f>\n</function>\n</tool_call>";
  const ChatDelta d = parse("a " + long_call + "\n" + short_call, o);
  EXPECT_EQ(d.content, "a " + long_call + "\n" + short_call);
  EXPECT_TRUE(d.tool_calls.empty());
  // A call that fits is still a call.
  expect_calls(parse(short_call + "\n" + long_call, o), {call("f", "{}")});
  expect_chunking_invariant("a " + long_call + "\n" + short_call, o);
  expect_chunking_invariant(short_call + "\n" + long_call, o);
  expect_chunking_invariant("a" + std::string(100, ' ') + short_call, o);
  expect_chunking_invariant(std::string(100, '\n') + "<think>x</think>y", o);
}

TEST(ChatOutputParser, DeepJsonDoesNotCrash) {
  const std::string deep(100000, '[');
  const ChatDelta xml = parse("<tool_call>\n<function=f>\n<parameter=v>\n" + deep + "\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(xml.tool_calls.size(), 1u);  // not JSON that we take: the value is the text
  EXPECT_EQ(xml.tool_calls[0].arguments, "{\"v\":\"" + deep + "\"}");
  const std::string json_call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": " + deep + "}}\n</tool_call>";
  EXPECT_EQ(parse(json_call).content, json_call);
}

TEST(ChatOutputParser, BytesThatAreNotUtf8DoNotThrow) {
  const ChatDelta d = parse("\xff\xfe<tool_call>\n<function=f\xc3>\n<parameter=a\xff>\n\xe2\x82\n</parameter>\n</function>\n</tool_call>");
  EXPECT_EQ(d.content, "\xff\xfe");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f\xc3");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\xef\xbf\xbd\":\"\xef\xbf\xbd\"}");  // U+FFFD for what is not UTF-8
}

TEST(ChatOutputParser, ToolCallParsingOff) {
  ChatOutputParserOptions o = opts();
  o.parse_tool_calls = false;
  const std::string text = "x\n\n<tool_call>\n<function=f>\n</function>\n</tool_call>\n";
  const ChatDelta d = parse(text, o);
  EXPECT_EQ(d.content, text);
  EXPECT_TRUE(d.tool_calls.empty());
}

// ---- streaming ----------------------------------------------------------------------------

TEST(ChatOutputParser, StreamingHoldsBackOnlyWhatMayBecomeATag) {
  ChatOutputParser parser(opts(true));
  EXPECT_EQ(parser.push("Think").reasoning, "Think");
  EXPECT_EQ(parser.push("ing\n").reasoning, "ing");  // the "\n" may precede </think>
  EXPECT_EQ(parser.push("</thi").reasoning, "");
  ChatDelta d = parser.push("nk>\n\nLet me look: a <");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Let me look: a");  // " <" may still be the start of a call
  EXPECT_EQ(parser.push(" b").content, " < b");
  EXPECT_EQ(parser.push(".\n\n<tool_c").content, ".");
  EXPECT_TRUE(parser.push("all>\n<function=get_weather>\n<parameter=days>\n1").empty());
  d = parser.push("\n</parameter>\n</function>\n</tool_call>");
  expect_calls(d, {call("get_weather", R"({"days":1})")});
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(parser.push("\n").empty());
  EXPECT_TRUE(parser.finish().empty());  // a newline after the last call is no content
  EXPECT_EQ(parser.total().reasoning, "Thinking");
  EXPECT_EQ(parser.total().content, "Let me look: a < b.");
}

TEST(ChatOutputParser, UnicodeSplitAcrossChunksComesOutWhole) {
  const std::string text = "Grüße 🙂 日本\n</think>\n\nПривет 🙂<tool_call>\n<function=f>\n<parameter=s>\né\n</parameter>\n</function>\n</tool_call>";
  ChatOutputParser parser(opts(true));
  for (char c : text) {
    const ChatDelta d = parser.push(std::string_view(&c, 1));
    EXPECT_TRUE(valid_utf8(d.reasoning)) << d.reasoning;
    EXPECT_TRUE(valid_utf8(d.content)) << d.content;
  }
  parser.finish();
  EXPECT_EQ(parser.total().reasoning, "Grüße 🙂 日本");
  EXPECT_EQ(parser.total().content, "Привет 🙂");
  expect_calls(parser.total(), {call("f", R"({"s":"é"})")});
}

TEST(ChatOutputParser, LessThanSignsInContentAreNotTags) {
  for (const std::string text : {"a < b", "x<y>", "if a<b and c>d", "<", "<tool", "<tool_callx>", "<tool_call",
                                 "a <tool_call", "</tool_call>", "<<tool_call>>", "<t<think>"}) {
    const ChatDelta d = parse(text);
    EXPECT_EQ(d.content, text);
    EXPECT_TRUE(d.tool_calls.empty());
    expect_chunking_invariant(text, opts());
  }
}

TEST(ChatOutputParser, IdsAreDeterministicPerSeedAndDistinct) {
  const std::string text = "<tool_call>\n<function=a>\n</function>\n</tool_call><tool_call>\n<function=b>\n</function>\n</tool_call>";
  const ChatDelta one = parse(text);
  ASSERT_EQ(one.tool_calls.size(), 2u);
  EXPECT_EQ(one.tool_calls[0].id, parse(text).tool_calls[0].id);
  EXPECT_NE(one.tool_calls[0].id, one.tool_calls[1].id);
  EXPECT_EQ(one.tool_calls[0].id.rfind("call_", 0), 0u);
  EXPECT_EQ(one.tool_calls[0].id.size(), 5u + 16u);
  ChatOutputParserOptions other = opts();
  other.id_seed = 8;
  EXPECT_NE(parse(text, other).tool_calls[0].id, one.tool_calls[0].id);
}

TEST(ChatOutputParser, NoPushAfterFinish) {
  ChatOutputParser parser(opts());
  parser.push("a");
  parser.finish();
  EXPECT_THROW(parser.push("b"), Error);
  EXPECT_THROW(parser.finish(), Error);
}

// Every text of the tests above and a few more, in every chunking.
TEST(ChatOutputParser, AnyChunkingGivesTheWholeParse) {
  const std::vector<std::string> texts = {
      "Two and two.\nThat is four.\n</think>\n\nIt is 4.",
      "<think>\n\n</think>\n\nHi",
      "\n\n<think>hmm</think>ok",
      "<think>\n\n  a\n\n</think>\n\n\nb\n",
      "r</think>c <think>x</think>",
      "  <thinking>no</thinking>",
      "<thin",
      "Grüße 🙂 日本\n</think>\n\nПривет 🙂<tool_call>\n<function=f>\n<parameter=s>\né\n</parameter>\n</function>\n</tool_call>",
      "I will check both.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
      "</tool_call>\n<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n",
      "A\n<tool_call>\n<function=f>\n</function>\n</tool_call>\n\nB  \n",
      "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>",
      "x <tool_call> tags <tool_call>\n<function=f>\n</function>\n</tool_call> y",
      "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\nstray\n</function>\n</tool_call>\nz",
      "Let me call.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
      "<tool_call>   \n\t",
      "a\n\n<tool_call>\n<function=f></tool_call></tool_call>b",
      "\xff\xe2\x82<tool_call>\n{\"name\":\"\xf0\x9f\"}\n</tool_call>\xe2",
  };
  for (const std::string& text : texts)
    for (bool thinking : {false, true}) {
      expect_chunking_invariant(text, opts(thinking));
      if (::testing::Test::HasFailure()) return;  // one text's failures are enough to read
    }
}

// Texts glued from pieces of the markup, to reach the orders of tags no one
// writes by hand; a small memory bound to reach its edge too.
TEST(ChatOutputParser, AnyChunkingOfTextsMadeOfMarkupPieces) {
  const std::vector<std::string> pieces = {
      "<think>", "</think>", "<tool_call>", "</tool_call>", "<function=f>", "<function=get_weather>",
      "<parameter=days>", "<parameter=city>", "</parameter>", "</function>", "\n", "\n\n", " ", "x", "<",
      "</", "<tool_", "{\"name\": \"f\", \"arguments\": {\"a\": [1]}}", "{", "3", "True", "\xc3\xa9", "\xe2",
      "\xf0\x9f\x99\x82"};
  std::mt19937 rng(2024);
  for (int round = 0; round < 150; ++round) {
    std::string text;
    for (size_t n = 3 + rng() % 20; n > 0; --n) text += pieces[rng() % pieces.size()];
    ChatOutputParserOptions o = opts(round % 2 == 1);
    if (round % 3 == 0) o.max_held_bytes = 24 + rng() % 40;
    expect_chunking_invariant(text, o);
    if (::testing::Test::HasFailure()) return;
  }
}

// ---- round trip through Qwen3.5's template ----------------------------------------------

// What Python's json.dumps writes (the template's tojson): ", " and ": ".
std::string python_json(const ordered_json& v) {
  if (v.is_object()) {
    std::string s = "{";
    for (const auto& [k, item] : v.items()) s += (s.size() > 1 ? ", " : "") + ordered_json(k).dump() + ": " + python_json(item);
    return s + "}";
  }
  if (v.is_array()) {
    std::string s = "[";
    for (const ordered_json& item : v) s += (s.size() > 1 ? ", " : "") + python_json(item);
    return s + "]";
  }
  return v.dump();
}

// What Python's str() writes for the other values ("args_value | string").
std::string python_str(const ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return v.dump();
}

std::string trimmed(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

struct Message {
  std::string reasoning_content, content;
  std::vector<std::pair<std::string, ordered_json>> tool_calls;  // name, arguments
};

// The assistant message as qwen3.5.jinja renders it after the last user
// query, from "<think>\n" on (its "<|im_end|>" is a special token that
// decodes to nothing).
std::string render(const Message& m) {
  const std::string content = trimmed(m.content);
  std::string s = "<think>\n" + trimmed(m.reasoning_content) + "\n</think>\n\n" + content;
  for (size_t i = 0; i < m.tool_calls.size(); ++i) {
    const auto& [name, arguments] = m.tool_calls[i];
    if (i == 0)
      s += (trimmed(content).empty() ? "" : "\n\n") + std::string("<tool_call>\n<function=") + name + ">\n";
    else
      s += "\n<tool_call>\n<function=" + name + ">\n";
    for (const auto& [arg, value] : arguments.items()) {
      s += "<parameter=" + arg + ">\n";
      s += value.is_object() || value.is_array() ? python_json(value) : python_str(value);
      s += "\n</parameter>\n";
    }
    s += "</function>\n</tool_call>";
  }
  return s;
}

TEST(ChatOutputParser, RoundTripThroughTheQwen35Template) {
  const std::vector<Message> messages = {
      {"Plain thought.", "Plain answer.", {}},
      {"", "No reasoning at all.", {}},
      {"  Thought with\n\ninner lines.\n", "\nAnswer\n\nin two paragraphs.\n", {}},
      {"Need weather.",
       "Checking.",
       {{"get_weather", ordered_json::parse(R"({"city": "São Paulo", "days": 3, "scale": 0.5, "metric": false,
           "where": {"lat": -23.5, "near": ["a", "b"]}, "hours": [6, 12], "unit": "f", "level": 3})")},
        {"run_code", ordered_json::parse(R"({"code": "for i in range(3):\n    print(i < 2)\n", "timeout": 10})")}}},
      {"Call without words.", "", {{"get_weather", ordered_json::parse(R"({"city": "Kyiv"})")}}},
      {"", "", {{"bare_tool", ordered_json::parse(R"({"flag": true})")}, {"get_weather", ordered_json::object()}}},
      {"Unknown tool, JSON values.", "ok", {{"other", ordered_json::parse(R"({"n": 12, "obj": {"x": [1, {"y": null}]}})")}}},
  };
  for (const Message& m : messages) {
    const std::string text = render(m);
    for (bool generated : {true, false}) {
      // Thinking on: the prompt ends with "<think>\n" and the model writes the rest.
      // Or the model writes it all.
      const std::string_view output = generated ? std::string_view(text).substr(8) : std::string_view(text);
      const ChatDelta d = parse(output, opts(generated));
      EXPECT_EQ(d.reasoning, trimmed(m.reasoning_content)) << text;
      EXPECT_EQ(d.content, trimmed(m.content)) << text;
      ASSERT_EQ(d.tool_calls.size(), m.tool_calls.size()) << text;
      for (size_t i = 0; i < m.tool_calls.size(); ++i) {
        EXPECT_EQ(d.tool_calls[i].name, m.tool_calls[i].first);
        EXPECT_EQ(d.tool_calls[i].arguments, m.tool_calls[i].second.dump()) << text;
      }
      // And back: the parsed message renders to the same text.
      Message back{d.reasoning, d.content, {}};
      for (const ToolCall& c : d.tool_calls) back.tool_calls.emplace_back(c.name, ordered_json::parse(c.arguments));
      EXPECT_EQ(render(back), text);
      expect_chunking_invariant(output, opts(generated));
    }
  }
}

}  // namespace
}  // namespace deltagen
