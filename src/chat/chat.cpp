// Chat of the public API: each turn renders the whole conversation with the
// model's template and runs only what the state does not hold yet.
#include <algorithm>

#include "chat/chat_template.h"
#include "chat/messages.h"
#include "chat/output_parser.h"
#include "runtime/engine_impl.h"
#include "runtime/image_prompt.h"
#include "runtime/prefix_cache.h"

namespace deltagen {
using nlohmann::ordered_json;

namespace {

// The states a chat keeps (one per turn, at the end of its user message):
// enough for a long conversation of a small model; old ones go first.
constexpr int64_t kChatCacheBytes = int64_t(1) << 30;

ordered_json parse_json_option(const std::string& text, const char* what, bool list) {
  if (text.empty()) return list ? ordered_json() : ordered_json::object();
  ordered_json j;
  try {
    j = ordered_json::parse(text);
  } catch (const ordered_json::exception&) {
    fail(what, "is not valid JSON");
  }
  if (list ? !j.is_array() : !j.is_object()) fail(what, list ? "must be a JSON list" : "must be a JSON object");
  return j;
}

bool starts_with(std::span<const int64_t> ids, std::span<const int64_t> prefix) {
  return prefix.size() <= ids.size() && std::equal(prefix.begin(), prefix.end(), ids.begin());
}

// The reply's numbers: the prefill may have run in two parts.
void add_prefill(GenerationResult& into, const GenerationResult& part) {
  into.prefilled_tokens += part.prefilled_tokens;
  into.prompt_tokens += part.prompt_tokens;
  into.prefill_runs += part.prefill_runs;
  into.prefill_seconds += part.prefill_seconds;
}

}  // namespace

struct Chat::Impl {
  Impl(std::shared_ptr<Engine> e, int64_t max_length)
      : engine(std::move(e)), conversation(engine, max_length), cache(PrefixCacheOptions{.memory_bytes = kChatCacheBytes}) {}

  std::shared_ptr<Engine> engine;
  Conversation conversation;
  PrefixCache cache;
  ChatOptions options;
  ChatTemplate chat_template = ChatTemplate::builtin();
  ordered_json tools, kwargs;
  std::vector<ChatMessage> messages;
  std::vector<int64_t> stop_ids;

  ChatRenderInputs inputs(size_t message_count, bool generation_prompt) const {
    ChatRenderInputs in;
    if (!options.system_prompt.empty())
      in.messages.push_back(message_json(ChatMessage{.role = "system", .content = options.system_prompt}));
    for (size_t i = 0; i < message_count; ++i) in.messages.push_back(message_json(messages[i]));
    in.tools = tools;
    in.kwargs = kwargs;
    if (!options.thinking && !in.kwargs.contains("enable_thinking")) in.kwargs["enable_thinking"] = false;
    in.add_generation_prompt = generation_prompt;
    return in;
  }

  std::vector<int64_t> encode(const std::string& text) const { return text.empty() ? std::vector<int64_t>() : engine->encode(text); }

  ChatReply run_turn(const GenerationOptions& options, const StreamCallback& on_text);

  // Images: every message's, in prompt order (an image read back from a
  // saved chat's messages is read from its origin here), with their pad runs
  // in the expanded prompt.
  std::vector<const ImageInput*> images();
  // Runs `expanded[from, end)` (end = expanded.size()): its images' pads
  // collapse back to one each for Conversation::generate, which expands them again.
  GenerationResult run_part(std::span<const int64_t> expanded, const std::vector<SnapshotImage>& keys,
                            const std::vector<const ImageInput*>& inputs, const GenerationOptions& options,
                            const StreamCallback& on_text);
};

std::vector<const ImageInput*> Chat::Impl::images() {
  std::vector<const ImageInput*> out;
  for (ChatMessage& m : messages)
    for (ImageInput& image : m.images) {
      if (image.bytes.empty() && !image.origin.empty()) image = ImageInput::from_file(image.origin);
      out.push_back(&image);
    }
  return out;
}

GenerationResult Chat::Impl::run_part(std::span<const int64_t> expanded, const std::vector<SnapshotImage>& keys,
                                      const std::vector<const ImageInput*>& inputs, const GenerationOptions& options,
                                      const StreamCallback& on_text) {
  const int64_t from = conversation.length();
  std::vector<int64_t> ids;
  std::vector<ImageInput> part_images;
  size_t k = 0;
  for (int64_t i = from; i < int64_t(expanded.size());) {
    while (k < keys.size() && keys[k].start < i) ++k;
    if (k < keys.size() && keys[k].start == i) {
      ids.push_back(expanded[size_t(i)]);
      part_images.push_back(*inputs[k]);
      i += keys[k].tokens;
      continue;
    }
    ids.push_back(expanded[size_t(i)]);
    ++i;
  }
  if (part_images.empty()) return conversation.generate(std::span<const int64_t>(ids), options, on_text);
  return conversation.generate(std::span<const int64_t>(ids), part_images, options, on_text);
}

Chat::Chat(std::shared_ptr<Engine> engine, ChatOptions options, int64_t max_length) {
  if (!engine) fail("chat", "no engine");
  impl_ = std::make_unique<Impl>(std::move(engine), max_length);
  impl_->stop_ids = reply_end_ids(impl_->engine->tokenizer());
  set_options(std::move(options));
}

Chat::~Chat() = default;
Chat::Chat(Chat&&) noexcept = default;
Chat& Chat::operator=(Chat&&) noexcept = default;

void Chat::set_options(ChatOptions options) {
  Impl& c = *impl_;
  ordered_json tools = parse_json_option(options.tools, "chat tools", true);
  if (!tools.is_null()) checked_tools(tools);
  ordered_json kwargs = parse_json_option(options.template_kwargs, "chat template kwargs", false);
  const std::string& dir = c.engine->model_dir().string();
  ChatTemplate t = options.chat_template.empty() ? ChatTemplate::for_model(dir)
                                                 : ChatTemplate::from_source(options.chat_template, "chat template");
  c.chat_template = std::move(t);
  c.tools = std::move(tools);
  c.kwargs = std::move(kwargs);
  c.options = std::move(options);
}

const ChatOptions& Chat::options() const { return impl_->options; }
const std::string& Chat::template_name() const { return impl_->chat_template.name(); }
Conversation& Chat::conversation() { return impl_->conversation; }
const Conversation& Chat::conversation() const { return impl_->conversation; }
const std::vector<ChatMessage>& Chat::messages() const { return impl_->messages; }
void Chat::set_messages(std::vector<ChatMessage> messages) { impl_->messages = std::move(messages); }

void Chat::reset() {
  impl_->messages.clear();
  impl_->conversation.reset();
}

std::string Chat::render(bool add_generation_prompt) const {
  return impl_->chat_template.render(impl_->inputs(impl_->messages.size(), add_generation_prompt));
}

ChatReply Chat::send(std::string_view user_message, const GenerationOptions& options, const StreamCallback& on_text) {
  return send(ChatMessage{.role = "user", .content = std::string(user_message)}, options, on_text);
}

ChatReply Chat::send(const ChatMessage& message, const GenerationOptions& options, const StreamCallback& on_text) {
  message_json(message);  // checks it before it joins the conversation
  impl_->messages.push_back(message);
  try {
    ChatReply reply = impl_->run_turn(options, on_text);
    ChatMessage said{.role = "assistant", .content = reply.content, .reasoning_content = reply.reasoning,
                     .tool_calls = reply.tool_calls};
    impl_->messages.push_back(std::move(said));
    return reply;
  } catch (...) {
    impl_->messages.pop_back();
    throw;
  }
}

ChatReply Chat::Impl::run_turn(const GenerationOptions& options, const StreamCallback& on_text) {
  const std::string prompt_text = chat_template.render(inputs(messages.size(), true));
  const std::string base_text = chat_template.render(inputs(messages.size(), false));
  std::vector<int64_t> prompt = encode(prompt_text);
  // The end of the last message: the next turn renders the same text up to
  // here, so the state there is worth a copy.
  std::vector<int64_t> base;
  if (prompt_text.compare(0, base_text.size(), base_text) == 0) base = encode(base_text);

  // Images: each pad expanded to its image's tokens; the state matches only
  // where its images are the same (their pixel hashes) too.
  const std::vector<const ImageInput*> image_inputs = images();
  std::vector<SnapshotImage> keys;
  if (!image_inputs.empty()) {
    const Model& model = *detail::Access::engine(*engine).model;
    std::vector<ImageShape> shapes;
    for (const ImageInput* image : image_inputs) shapes.push_back(describe_image(model, *image));
    const int64_t pad = model.config().image_token_id;
    ExpandedPrompt expanded = expand_image_prompt(prompt, pad, shapes, "chat prompt");
    prompt = std::move(expanded.ids);
    keys = std::move(expanded.keys);
    const int64_t base_pads = std::count(base.begin(), base.end(), pad);
    base = base_pads == int64_t(shapes.size()) ? expand_image_prompt(base, pad, shapes, "chat prompt").ids
                                               : std::vector<int64_t>();
  }
  if (!starts_with(prompt, base) || base.size() >= prompt.size()) base.clear();

  ChatReply reply;
  const std::vector<int64_t>& held = conversation.tokens();
  const size_t run = std::min(held.size(), size_t(conversation.length()));
  const auto& held_images = detail::Access::images(conversation);
  const bool same_images = prefix_key(std::span(held).first(run), held_images) ==
                           prefix_key(std::span(prompt).first(std::min(run, prompt.size())), keys);
  if (!starts_with(prompt, held) || !same_images) {
    // The template renders the history differently from what was generated:
    // go back to the deepest state this prompt still starts with.
    int64_t old_end = 0;  // where the history before this message ends, as now rendered
    try {
      old_end = int64_t(encode(chat_template.render(inputs(messages.size() - 1, false))).size());
    } catch (const Error&) {
      // A template may refuse a history without a user message: nothing to count then.
    }
    const std::vector<int64_t> key = prefix_key(prompt, keys);
    std::shared_ptr<const StateSnapshot> kept = cache.find(std::span(key).first(key.size() - 1));
    if (kept) conversation.restore(detail::Access::snapshot(*kept, "chat"));
    else conversation.reset();
    reply.reprefilled_tokens = std::max<int64_t>(0, old_end - conversation.length());
  }
  GenerationOptions o = options;
  o.extra_stop_ids.insert(o.extra_stop_ids.end(), stop_ids.begin(), stop_ids.end());
  if (int64_t(base.size()) > conversation.length()) {
    GenerationOptions prefill_only = o;
    prefill_only.max_new_tokens = 0;
    add_prefill(reply, run_part(base, keys, image_inputs, prefill_only, {}));
    cache.insert(std::make_shared<const StateSnapshot>(detail::Access::state(conversation.snapshot())));
  }
  GenerationResult generated = run_part(prompt, keys, image_inputs, o, on_text);
  add_prefill(generated, reply);  // the first part's numbers, if any
  static_cast<GenerationResult&>(reply) = std::move(generated);

  ChatOutputParserOptions parsing;
  parsing.starts_in_reasoning = prompt_opens_reasoning(prompt_text);
  parsing.tools = tools.is_null() ? nullptr : &tools;
  parsing.parse_tool_calls = !tools.is_null();
  const ChatDelta parsed = parse_chat_output(reply.text, parsing);
  reply.reasoning = parsed.reasoning;
  reply.content = parsed.content;
  reply.tool_calls = parsed.tool_calls;
  return reply;
}

}  // namespace deltagen
