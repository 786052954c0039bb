// deltagen generate --model DIR <prompt> [flags]
//
// The prompt (exactly one of):
//   --ids 5,17,300          token ids; several prompts (a batch) separated by ';': "5,17;300,42"
//   --prompt TEXT           text (needs tokenizer.json in the model folder, or --tokenizer)
//   --prompt-file FILE      the whole file is the prompt
//   --prompts-file FILE     one prompt per non-empty line: a batch
//   (none)                  text read from stdin
// Generation: --max-new-tokens N (256), --temperature T (0 = greedy), --top-k,
//   --top-p, --min-p, --repetition-penalty, --presence-penalty,
//   --frequency-penalty, --seed, --stop TEXT, --ignore-eos, --prefill-chunk K (512).
//   --max-new-tokens 0 with --save-state runs the prompt only (e.g. to keep a
//   long system prompt's state).
// Speculative decoding (docs/speculative.md): --speculative ngram guesses the
//   next tokens from earlier text, --speculative mtp with the checkpoint's
//   multi-token-prediction head (mtp.onnx), and one run checks them (the
//   output is the plain loop's); --draft-tokens K (3, 1..8) guesses per run.
// Chat (the model's own chat template, chat/chat_template.h):
//   --chat renders the text as a user message; --messages FILE (an OpenAI
//   messages array) renders a whole conversation (implies --chat); --system
//   TEXT, --no-think, --tools FILE (OpenAI tool definitions), --chat-kwargs
//   JSON (any template variable, add_generation_prompt included). Sampling
//   starts from the model's recommended settings (genai_config.json
//   "search"); flags override them. --print-prompt writes the rendered prompt
//   to stdout byte for byte and exits (with --json: {"prompt", "prompt_ids"}).
// Images (a model built with --vision): --image FILE, repeatable (PNG, JPEG or
//   binary PPM). Each image goes where the prompt holds one <|image_pad|>
//   token, in order; with --chat and no pad in the text, the images are put
//   before the text in the user message, as
//   <|vision_start|><|image_pad|><|vision_end|> each. --logits-out covers the
//   expanded prompt. One prompt only.
// Engine: --threads T, --max-length N (tokens the state holds; default: what
//   the request needs), --tokenizer PATH, --kernels deltagen|deltagen-ops|ort,
//   --max-isa, --ep cpu|webgpu|cuda (the execution provider; kernels apply
//   to cpu only).
// State (one prompt only): --load-state FILE continues a saved conversation
//   (the prompt is appended to it; it may be empty), --save-state FILE writes
//   the state after the run (atomically). --logits-out F.npy writes f32
//   [rows, vocab]: the prefilled rows, then one row per decode step.
// Output: text prompts stream their text to stdout as it is generated; id
//   prompts print the new ids on one line per prompt; --json prints one JSON
//   object instead. Speed goes to stderr.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/output_parser.h"
#include "deltagen/deltagen.h"
#include "runtime/genai_config.h"
#include "tokenizer/tokenizer.h"
#include "tools/chat_flags.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/generation_flags.h"
#include "deltagen/error.h"
#include "util/npy.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultPrefillChunk = 512;

struct GenerateFlags {
  std::string model_dir;
  EngineOptions engine;
  GenerationOptions options;
  std::vector<std::vector<int64_t>> id_prompts;  // from --ids
  std::vector<std::string> text_prompts;         // from --prompt / files / stdin
  bool chat = false, print_prompt = false;
  ChatFlags chat_flags;
  std::string logits_out, save_state, load_state;
  std::vector<std::string> images;  // --image
  bool json = false;

  bool text_mode() const { return !text_prompts.empty(); }
  size_t batch() const { return text_mode() ? text_prompts.size() : id_prompts.size(); }
};

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the prompt file");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> non_empty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::vector<std::vector<int64_t>> parse_id_rows(const std::string& text) {
  std::vector<std::vector<int64_t>> rows;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(';', start);
    rows.push_back(parse_ids(text.substr(start, end == std::string::npos ? std::string::npos : end - start), "--ids"));
    if (end == std::string::npos) return rows;
    start = end + 1;
  }
}

// Exactly one prompt source; stdin when no flag names one.
void read_prompts(Args& args, GenerateFlags& f) {
  const auto ids = args.get("ids");
  const auto prompt = args.get("prompt");
  const auto prompt_file = args.get("prompt-file");
  const auto prompts_file = args.get("prompts-file");
  const int given = int(ids.has_value()) + int(prompt.has_value()) + int(prompt_file.has_value()) +
                    int(prompts_file.has_value());
  if (given > 1) fail("generate", "--ids, --prompt, --prompt-file and --prompts-file exclude each other");
  if (ids) f.id_prompts = parse_id_rows(*ids);
  else if (prompt) f.text_prompts = {*prompt};
  else if (prompt_file) f.text_prompts = {read_file_text(*prompt_file)};
  else if (prompts_file) {
    f.text_prompts = non_empty_lines(read_file_text(*prompts_file));
    if (f.text_prompts.empty()) fail(*prompts_file, "holds no prompt");
  } else if (args.has("messages")) {
    f.text_prompts = {std::string()};  // the conversation comes from the file
  } else if (!::isatty(STDIN_FILENO)) {
    f.text_prompts = {std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>())};
  } else if (!args.has("load-state")) {
    fail("generate", "no prompt: give --prompt, --prompt-file, --prompts-file or --ids, or text on stdin");
  }
}

GenerateFlags parse_generate_flags(int argc, char** argv) {
  Args args(argc, argv, {"json", "stop-at-eos", "ignore-eos", "chat", "no-think", "print-prompt"});
  GenerateFlags f;
  f.model_dir = args.require("model");
  read_prompts(args, f);
  f.chat = args.flag("chat") || args.has("messages");
  f.chat_flags = parse_chat_flags(args, true);
  f.print_prompt = args.flag("print-prompt");
  GenerationOptions defaults;
  defaults.prefill_chunk = kDefaultPrefillChunk;
  // A chat samples as the checkpoint recommends unless flags say otherwise.
  if (f.chat) defaults.sampling = load_genai_config(fs::path(f.model_dir) / "genai_config.json").sampling;
  const bool save_state = args.has("save-state");
  f.options = parse_generation_flags(args, defaults, save_state ? 0 : 1);
  f.engine = parse_engine_flags(args);
  f.engine.idle_threads_sleep = f.options.speculative.method == SpeculativeMethod::Mtp;  // two sessions take turns
  f.logits_out = args.get_or("logits-out", "");
  f.save_state = args.get_or("save-state", "");
  f.load_state = args.get_or("load-state", "");
  f.json = args.flag("json");
  f.images = args.get_all("image");
  args.finish();
  if (!f.images.empty() && f.batch() > 1) fail("--image", "works with one prompt only");
  if (!f.images.empty() && f.chat_flags.messages) fail("--image", "goes into the user message: not with --messages");

  f.options.collect_logits = !f.logits_out.empty();
  if (f.chat && !f.text_mode()) fail("--chat", "needs a text prompt or --messages");
  if (f.print_prompt && !f.chat) fail("--print-prompt", "needs --chat or --messages");
  if (f.chat_flags.messages && f.batch() > 1) fail("--messages", "renders one conversation: no batch");
  if (f.batch() > 1 && (!f.logits_out.empty() || !f.save_state.empty() || !f.load_state.empty()))
    fail("generate", "--logits-out, --save-state and --load-state work with one prompt only");
  return f;
}

// The text a chat prompt renders to: the model's template over the
// --messages conversation, or over `text` as one user message.
std::string render_chat_prompt(const GenerateFlags& f, const std::string& text) {
  return ChatTemplate::for_model(f.model_dir).render(chat_inputs(f.chat_flags, text, int64_t(f.images.size())));
}

// Text -> ids; with --chat, the rendered template. A loaded state must be
// where the rendered conversation starts: only the rest is new.
std::vector<int64_t> encode_text_prompt(const Engine& engine, const GenerateFlags& f, const std::string& text,
                                        const std::vector<int64_t>& history) {
  if (!f.chat) return text.empty() ? std::vector<int64_t>() : engine.encode(text);
  const std::vector<int64_t> ids = engine.encode(render_chat_prompt(f, text));
  if (history.empty()) return ids;
  if (ids.size() < history.size() || !std::equal(history.begin(), history.end(), ids.begin()))
    fail(f.load_state, "the saved state is not the start of this conversation's rendered prompt");
  return std::vector<int64_t>(ids.begin() + ptrdiff_t(history.size()), ids.end());
}

// --print-prompt: the rendered prompt, byte for byte (no model loaded).
int print_prompt(const GenerateFlags& f) {
  const std::string prompt = render_chat_prompt(f, f.text_prompts.empty() ? std::string() : f.text_prompts[0]);
  if (!f.json) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    return 0;
  }
  const Tokenizer tokenizer = Tokenizer::load(f.engine.tokenizer.empty() ? fs::path(f.model_dir) : f.engine.tokenizer);
  nlohmann::json j;
  j["prompt"] = prompt;
  j["prompt_ids"] = tokenizer.encode(prompt);
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

// The reply split as the template's inverse reads it.
void add_chat_fields(nlohmann::json& row, const GenerateFlags& f, const GenerationResult& r, const std::string& prompt) {
  ChatOutputParserOptions o;
  o.starts_in_reasoning = prompt_opens_reasoning(prompt);
  const nlohmann::ordered_json tools =
      f.chat_flags.tools_json.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(f.chat_flags.tools_json);
  o.tools = tools.is_null() ? nullptr : &tools;
  o.parse_tool_calls = !tools.is_null();
  const ChatDelta parsed = parse_chat_output(r.text, o);
  row["reasoning_content"] = parsed.reasoning;
  row["content"] = parsed.content;
  row["tool_calls"] = nlohmann::json::array();
  for (const ToolCall& call : parsed.tool_calls)
    row["tool_calls"].push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
}

// The state length a request needs: what is already there + prompt + new
// tokens, unless --max-length says; never more than the model's context.
int64_t needed_max_length(const Engine& engine, const GenerateFlags& f, int64_t history, int64_t prompt) {
  if (f.engine.max_length > 0) return f.engine.max_length;
  int64_t total = 0;  // --max-new-tokens may be anything up to INT64_MAX
  const bool overflow = __builtin_add_overflow(history, prompt, &total) ||
                        __builtin_add_overflow(total, f.options.max_new_tokens, &total);
  const int64_t context = engine.context_length();
  if (overflow || (context > 0 && total > context)) {
    std::string what = "prompt (" + std::to_string(prompt) + ")";
    if (history > 0) what += " + loaded state (" + std::to_string(history) + ")";
    fail("generate", what + " + new tokens (" + std::to_string(f.options.max_new_tokens) +
                         ") exceed the context length " + std::to_string(context));
  }
  return std::max<int64_t>(total, 1);
}

std::string ids_line(const std::vector<int64_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  return line;
}

int run_single(const std::shared_ptr<Engine>& engine_ptr, GenerateFlags& f) {
  Engine& engine = *engine_ptr;
  Snapshot loaded;
  if (!f.load_state.empty()) loaded = Snapshot::load(f.load_state);
  const std::vector<int64_t> history = loaded.empty() ? std::vector<int64_t>() : loaded.tokens();

  std::vector<int64_t> prompt = f.text_mode() ? encode_text_prompt(engine, f, f.text_prompts[0], history)
                                              : (f.id_prompts.empty() ? std::vector<int64_t>() : f.id_prompts[0]);
  if (f.chat) {
    const auto stops = reply_end_ids(engine.tokenizer());
    f.options.extra_stop_ids.insert(f.options.extra_stop_ids.end(), stops.begin(), stops.end());
  }
  // An image's token count is known only once it is decoded: a request with
  // images gets the default state length unless --max-length says.
  Conversation conversation(engine_ptr, f.images.empty() || f.engine.max_length > 0
                                            ? needed_max_length(engine, f, int64_t(history.size()), int64_t(prompt.size()))
                                            : 0);
  if (!loaded.empty()) conversation.restore(loaded);

  const bool stream = f.text_mode() && !f.json;
  StreamCallback on_text;
  if (stream) on_text = [](std::string_view text, int64_t) {
      print_text(text);
      return true;
    };
  std::vector<ImageInput> images;
  for (const std::string& file : f.images) images.push_back(ImageInput::from_file(file));
  const GenerationResult r = conversation.generate(std::span<const int64_t>(prompt), images, f.options, on_text);

  if (!f.logits_out.empty()) write_npy_f32(f.logits_out, r.logits.data(), {r.logits_rows, r.vocab});
  if (!f.save_state.empty()) conversation.snapshot().save(f.save_state);

  if (f.json) {
    nlohmann::json row = result_json(r);
    row["prompt_ids"] = prompt;
    if (!images.empty()) {  // as run: each image's pad expanded to its tokens
      const auto& all = conversation.tokens();
      const auto first = all.begin() + ptrdiff_t(history.size());
      row["prompt_ids"] = std::vector<int64_t>(first, first + r.prompt_tokens);
    }
    if (f.chat) add_chat_fields(row, f, r, render_chat_prompt(f, f.text_prompts[0]));
    nlohmann::json j = row;
    j["model"] = f.model_dir;
    j["batch"] = 1;
    j["prefill_chunk"] = f.options.prefill_chunk;
    j["threads"] = f.engine.threads;
    j["max_length"] = conversation.max_length();
    j["conversation_tokens"] = conversation.length();
    if (!f.logits_out.empty()) j["logits_out"] = f.logits_out;
    if (!f.save_state.empty()) j["saved_state"] = f.save_state;
    j["sequences"] = nlohmann::json::array({row});
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (stream) print_text("\n");
    else std::printf("%s\n", ids_line(r.generated_ids).c_str());
    print_speed(r);
  }
  return 0;
}

int run_batch(Engine& engine, GenerateFlags& f) {
  std::vector<std::vector<int64_t>> prompts = f.id_prompts;
  if (f.text_mode()) {
    prompts.clear();
    for (const std::string& text : f.text_prompts) prompts.push_back(encode_text_prompt(engine, f, text, {}));
  }
  if (f.chat) {
    const auto stops = reply_end_ids(engine.tokenizer());
    f.options.extra_stop_ids.insert(f.options.extra_stop_ids.end(), stops.begin(), stops.end());
  }
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, int64_t(p.size()));
  const std::vector<GenerationResult> results =
      generate_batch(engine, prompts, f.options, needed_max_length(engine, f, 0, longest));

  if (f.json) {
    nlohmann::json j;
    j["model"] = f.model_dir;
    j["batch"] = results.size();
    j["prefill_chunk"] = f.options.prefill_chunk;
    j["threads"] = f.engine.threads;
    j["sequences"] = nlohmann::json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      nlohmann::json row = result_json(results[i]);
      row["prompt_ids"] = prompts[i];
      j["sequences"].push_back(row);
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (f.text_mode()) std::printf("=== %zu ===\n%s\n", i, results[i].text.c_str());
    else std::printf("%s\n", ids_line(results[i].generated_ids).c_str());
  }
  for (const GenerationResult& r : results) print_speed(r);
  return 0;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  GenerateFlags f = parse_generate_flags(argc, argv);
  if (f.print_prompt) return print_prompt(f);
  std::shared_ptr<Engine> engine = Engine::load(f.model_dir, f.engine);
  return f.batch() > 1 ? run_batch(*engine, f) : run_single(engine, f);
}

}  // namespace deltagen
