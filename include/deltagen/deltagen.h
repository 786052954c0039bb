// deltagen's C++ API: load a model folder written by `deltagen build`, then
// generate from token ids or text, keep a conversation's state between
// requests, snapshot and restore it, chat through the model's own chat
// template (tools, reasoning), run a batch.
//
//   auto engine = deltagen::Engine::load("out/qwen3.5-0.8b");
//   deltagen::Chat chat(engine, {.system_prompt = "Be brief."});
//   deltagen::GenerationOptions options;
//   options.sampling.temperature = 0.7;
//   deltagen::ChatReply reply = chat.send("Hello!", options, [](std::string_view text, int64_t) {
//     std::cout << text << std::flush;
//     return true;  // false stops the reply
//   });
//   // reply.reasoning, reply.content, reply.tool_calls
//
// Errors are deltagen::Error (deltagen/error.h), one line: "subject: problem".
// Objects are not thread-safe; use one Conversation / Chat per thread.
// No ONNX Runtime type appears here.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deltagen/error.h"
#include "deltagen/options.h"

namespace deltagen {

class Tokenizer;
namespace detail {
struct Access;  // the library's own way to the objects' insides (not part of the API)
}

struct EngineOptions {
  int threads = 0;  // ONNX Runtime intra-op threads; 0 = its default (one per core)
  // Tokens a conversation's state holds (the KV cache is allocated at this
  // length); 0 = the model's context length, at most 4096.
  int64_t max_length = 0;
  // tokenizer.json or its folder; empty = the model folder's, when it has one.
  std::filesystem::path tokenizer;
  // deltagen's kernels and fusions (the default), or ONNX Runtime's own.
  KernelOptions kernels;
  // Where the model runs (kernels apply to the CPU provider only); none =
  // the provider the model was built for (`build --target`), else the CPU.
  std::optional<ExecutionProvider> ep;
  // The thread pool's threads sleep once a run is over instead of spinning
  // for the next. Spinning wins when one session runs back to back (about
  // 11 % of decode on 2 cores); when two take turns (the decoder and the MTP
  // head, --speculative mtp), a spinning pool takes the cores from the other.
  bool idle_threads_sleep = false;
};

// A loaded model (and, lazily, its tokenizer). Share it between conversations.
class Engine {
 public:
  static std::shared_ptr<Engine> load(const std::filesystem::path& model_dir, const EngineOptions& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int64_t vocab_size() const;
  int64_t context_length() const;  // 0 when the model does not say
  int64_t max_length() const;      // the default length of a conversation's state
  const std::vector<int64_t>& eos_token_ids() const;  // genai_config.json eos_token_id
  // How the checkpoint recommends sampling (genai_config.json "search", from
  // its generation_config.json): what chats and the server start from.
  const SamplingOptions& sampling_defaults() const;
  const std::filesystem::path& model_dir() const;

  // Whether a tokenizer file is there; tokenizer() loads it (once) and throws
  // Error when it is missing or unsupported.
  bool has_tokenizer() const;
  const Tokenizer& tokenizer() const;
  std::vector<int64_t> encode(std::string_view text) const;  // special tokens in the text are recognized
  std::string decode(std::span<const int64_t> ids) const;

 private:
  friend struct detail::Access;
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Called with each piece of text as it becomes final (empty without a
// tokenizer) and the token that completed it. Returning false stops the
// sequence after this token (StopReason::Cancelled): a caller's stop button,
// a client that went away.
using StreamCallback = std::function<bool(std::string_view text, int64_t token)>;

// An immutable copy of a conversation's whole state: token history,
// position, KV cache up to the current length, conv and recurrent states.
class Snapshot {
 public:
  Snapshot();
  ~Snapshot();
  Snapshot(const Snapshot&);
  Snapshot& operator=(const Snapshot&);

  bool empty() const;
  const std::vector<int64_t>& tokens() const;  // the whole conversation
  // Versioned binary file with a checksum, written atomically.
  void save(const std::filesystem::path& file) const;
  // Checks the file itself (magic, version, sizes, checksum); whether it fits
  // a model is checked by Conversation::restore.
  static Snapshot load(const std::filesystem::path& file);

 private:
  friend struct detail::Access;
  struct Data;
  explicit Snapshot(std::shared_ptr<const Data> data);
  const Data& data() const;  // throws Error when empty
  std::shared_ptr<const Data> data_;
};

// One sequence whose state is kept from request to request: each request
// appends its prompt and runs only the tokens not yet run.
class Conversation {
 public:
  // max_length: tokens the state holds; 0 = engine->max_length().
  explicit Conversation(std::shared_ptr<Engine> engine, int64_t max_length = 0);
  ~Conversation();
  Conversation(Conversation&&) noexcept;
  Conversation& operator=(Conversation&&) noexcept;

  // Appends `prompt` (may be empty when the conversation has a pending
  // token: then it just continues) and generates.
  GenerationResult generate(std::span<const int64_t> prompt, const GenerationOptions& options,
                            const StreamCallback& on_text = {});
  GenerationResult generate(std::string_view prompt, const GenerationOptions& options,
                            const StreamCallback& on_text = {});
  // With images (a --vision model): `prompt` holds one <|image_pad|> token
  // per image, in order (the chat template writes
  // <|vision_start|><|image_pad|><|vision_end|>); each becomes the image's
  // tokens, as the Hugging Face processor expands it, carrying its features.
  // GenerationResult::prompt_tokens counts the expanded prompt.
  GenerationResult generate(std::span<const int64_t> prompt, std::span<const ImageInput> images,
                            const GenerationOptions& options, const StreamCallback& on_text = {});

  // Every token of the conversation, prompts and replies. The last reply's
  // last token is not run yet (it is run with the next prompt).
  const std::vector<int64_t>& tokens() const;
  int64_t length() const { return int64_t(tokens().size()); }
  int64_t max_length() const;

  Snapshot snapshot() const;
  // Throws Error if the snapshot is of another model or longer than max_length();
  // the conversation is unchanged then.
  void restore(const Snapshot& snapshot);
  void reset();

  Engine& engine() const;

 private:
  friend struct detail::Access;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ChatOptions {
  std::string system_prompt;  // empty = none
  bool thinking = true;       // the template's enable_thinking (Qwen3.5 thinks unless it is false)
  std::string tools;          // a JSON list of OpenAI tool definitions; empty = none
  std::string template_kwargs;  // a JSON object of more template variables; empty = none
  std::string chat_template;  // Jinja text to use instead of the model folder's; empty = the model's
};

// A multi-turn chat rendered by the model's own chat template
// (chat_template.jinja or tokenizer_config.json's, from the checkpoint; a
// built-in ChatML format with a warning when the folder has none), on top of
// a Conversation. Each turn renders the whole conversation; the state is
// extended where the new prompt continues it, and where the template
// re-renders history differently (dropped reasoning), the state is restored
// from the copy kept at the end of the last user message and only the rest
// runs. Generation stops at the template's turn end (<|im_end|> etc.).
class Chat {
 public:
  Chat(std::shared_ptr<Engine> engine, ChatOptions options = {}, int64_t max_length = 0);
  ~Chat();
  Chat(Chat&&) noexcept;
  Chat& operator=(Chat&&) noexcept;

  // One user turn; the reply split into reasoning, content and tool calls.
  ChatReply send(std::string_view user_message, const GenerationOptions& options, const StreamCallback& on_text = {});
  // Any message (a tool result, a user message with a name, ...).
  ChatReply send(const ChatMessage& message, const GenerationOptions& options, const StreamCallback& on_text = {});

  // The prompt the template renders for the conversation so far.
  std::string render(bool add_generation_prompt = true) const;
  const std::vector<ChatMessage>& messages() const;
  // Replaces the conversation's messages (e.g. undo, or a saved chat). The
  // state is left as it is: the next turn runs whatever no longer matches.
  void set_messages(std::vector<ChatMessage> messages);
  void reset();  // no messages, empty state

  const ChatOptions& options() const;
  void set_options(ChatOptions options);  // throws Error for bad tools / kwargs JSON or template
  const std::string& template_name() const;  // the file it came from, or "built-in"
  Conversation& conversation();
  const Conversation& conversation() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Several independent prompts at once (batch = prompts.size()): each row has
// its own sampler (seed + row), stop condition and state; results are in
// prompt order. on_text receives the row index too; false stops that row.
using BatchStreamCallback = std::function<bool(int64_t row, std::string_view text, int64_t token)>;
std::vector<GenerationResult> generate_batch(Engine& engine, std::span<const std::vector<int64_t>> prompts,
                                             const GenerationOptions& options, int64_t max_length = 0,
                                             const BatchStreamCallback& on_text = {});

}  // namespace deltagen
