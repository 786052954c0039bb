// deltagen chat --model DIR [--system TEXT] [--no-think] [--tools FILE] [--chat-kwargs JSON]
//               [generation flags] [--load-state FILE] [--save-state FILE] [--json]
//
// Interactive multi-turn chat through the model's own chat template. Each
// line read from stdin is one user message; the reply streams to stdout.
// The model's state is kept between turns: a turn runs its own tokens, plus
// the last reply again where the template re-renders it differently
// (Qwen3.5 drops earlier reasoning), reported on stderr (or as
// "prefilled_tokens" / "reprefilled_tokens" with --json, which prints one
// JSON object per turn, with the reply split into reasoning_content, content
// and tool_calls, instead of streaming).
//
// Commands: /reset (new conversation), /undo (back to before the last turn),
// /save FILE and /load FILE (the state, and the messages beside it in
// FILE.messages.json), /image FILE (a --vision model: attaches the image to
// the next message, shown before its text; repeat for several), /help, /exit.
// --load-state continues a saved conversation; --save-state writes it at the
// end (atomically). Generation flags are those of `deltagen generate`;
// sampling starts from the model's recommended settings, --max-new-tokens 1024.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/messages.h"
#include "deltagen/deltagen.h"
#include "deltagen/error.h"
#include "runtime/engine_impl.h"
#include "runtime/genai_config.h"
#include "runtime/image_prompt.h"
#include "tools/args.h"
#include "tools/chat_flags.h"
#include "tools/commands.h"
#include "tools/generation_flags.h"
#include "util/atomic_file.h"

namespace deltagen {
namespace {

namespace fs = std::filesystem;

struct ChatCliFlags {
  std::string model_dir;
  EngineOptions engine;
  GenerationOptions options;
  ChatOptions chat;
  std::string load_state, save_state;
  bool json = false;
};

ChatCliFlags parse_chat_cli_flags(int argc, char** argv) {
  Args args(argc, argv, {"json", "stop-at-eos", "ignore-eos", "no-think"});
  ChatCliFlags f;
  f.model_dir = args.require("model");
  GenerationOptions defaults;
  defaults.max_new_tokens = 1024;
  defaults.prefill_chunk = 512;
  defaults.sampling = load_genai_config(fs::path(f.model_dir) / "genai_config.json").sampling;
  f.options = parse_generation_flags(args, defaults);
  f.engine = parse_engine_flags(args);
  f.engine.idle_threads_sleep = f.options.speculative.method == SpeculativeMethod::Mtp;  // two sessions take turns
  const ChatFlags chat = parse_chat_flags(args, false);
  f.chat.system_prompt = chat.system_prompt;
  f.chat.thinking = chat.thinking;
  f.chat.tools = chat.tools_json;
  f.chat.template_kwargs = chat.kwargs_json;
  f.load_state = args.get_or("load-state", "");
  f.save_state = args.get_or("save-state", "");
  f.json = args.flag("json");
  args.finish();
  return f;
}

std::string messages_file(const std::string& state_file) { return state_file + ".messages.json"; }

nlohmann::json reply_json(const ChatReply& r) {
  nlohmann::json j = result_json(r);
  j["reasoning_content"] = r.reasoning;
  j["content"] = r.content;
  j["tool_calls"] = nlohmann::json::array();
  for (const ToolCall& call : r.tool_calls)
    j["tool_calls"].push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  j["reprefilled_tokens"] = r.reprefilled_tokens;
  return j;
}

class ChatSession {
 public:
  ChatSession(const ChatCliFlags& flags, std::shared_ptr<Engine> engine)
      : flags_(flags), engine_(engine), chat_(std::move(engine), flags.chat) {
    if (!flags.load_state.empty()) load(flags.load_state);
  }

  // Handles one input line; returns false on /exit.
  bool handle(const std::string& line) {
    if (line == "/exit" || line == "/quit") return false;
    if (line == "/help") {
      std::fprintf(stderr,
                   "commands:\n"
                   "  /image FILE  attach an image (PNG, JPEG, PPM) to the next message; repeat for several\n"
                   "  /undo        back to before the last turn\n"
                   "  /reset       start a new conversation\n"
                   "  /save FILE   save the conversation (state + FILE.messages.json)\n"
                   "  /load FILE   load a saved conversation\n"
                   "  /exit        end the chat\n");
    } else if (line == "/image" || line.rfind("/image ", 0) == 0) {
      const std::string file = line.size() > 7 ? line.substr(7) : "";
      if (file.empty()) fail("/image", "needs a file: /image FILE");
      ImageInput image = ImageInput::from_file(file);
      // Checked now (a model without vision, a file that is no image), so that the message does not fail later.
      const ImageShape shape = describe_image(*detail::Access::engine(*engine_).model, image);
      images_.push_back(std::move(image));
      note("image " + file + " (" + std::to_string(shape.tokens) + " tokens) goes with the next message (" +
           std::to_string(images_.size()) + " attached)");
    } else if (line == "/reset") {
      chat_.reset();
      undo_.clear();
      images_.clear();
      note("conversation reset");
    } else if (line == "/undo") {
      if (undo_.empty()) fail("/undo", "nothing to undo");
      chat_.conversation().restore(undo_.back().state);
      chat_.set_messages(undo_.back().messages);
      undo_.pop_back();
      note("back to " + std::to_string(chat_.conversation().length()) + " tokens");
    } else if (line.rfind("/save ", 0) == 0) {
      save(line.substr(6));
      note("saved " + std::to_string(chat_.conversation().length()) + " tokens to " + line.substr(6));
    } else if (line.rfind("/load ", 0) == 0) {
      load(line.substr(6));
      undo_.clear();
      note("loaded " + std::to_string(chat_.conversation().length()) + " tokens from " + line.substr(6));
    } else {
      turn(line);
    }
    return true;
  }

  void finish() {
    if (!flags_.save_state.empty()) save(flags_.save_state);
  }

 private:
  struct Before {
    Snapshot state;
    std::vector<ChatMessage> messages;
  };

  void note(const std::string& text) const { std::fprintf(stderr, "[%s]\n", text.c_str()); }

  // The state, and the messages that rendered it: the next turn renders
  // them again and goes on from the state where it still matches.
  void save(const std::string& file) {
    chat_.conversation().snapshot().save(file);
    write_file_atomic(messages_file(file), messages_json(chat_.messages()).dump(1) + "\n");
  }

  void load(const std::string& file) {
    chat_.conversation().restore(Snapshot::load(file));
    std::vector<ChatMessage> messages;
    std::ifstream in(messages_file(file));
    if (in) {
      nlohmann::ordered_json j;
      try {
        in >> j;
        std::vector<MessageImage> images;  // their files are read when a turn runs them again
        for (const auto& m : normalize_messages(j, &images)) messages.push_back(message_from_json(m));
      } catch (const std::exception& e) {
        fail(messages_file(file), std::string("cannot read the messages: ") + e.what());
      }
    } else {
      note("no " + messages_file(file) + ": the next turn starts a new conversation from the saved state");
    }
    chat_.set_messages(std::move(messages));
  }

  void turn(const std::string& message) {
    undo_.push_back({chat_.conversation().snapshot(), chat_.messages()});
    StreamCallback on_text;
    if (!flags_.json) on_text = [](std::string_view text, int64_t) {
      print_text(text);
      return true;
    };
    ChatMessage user{.role = "user", .content = message};
    user.images = std::move(images_);  // sent with this message, or dropped with it when it fails
    images_.clear();
    ChatReply r;
    try {
      r = chat_.send(user, flags_.options, on_text);
    } catch (...) {
      undo_.pop_back();
      throw;
    }
    ++turns_;
    if (flags_.json) {
      nlohmann::json j = reply_json(r);
      j["turn"] = turns_;
      j["conversation_tokens"] = chat_.conversation().length();
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    } else {
      print_text("\n");
      std::fprintf(stderr,
                   "[turn %lld: prefilled %lld tokens (%lld of the history again), generated %zu (%.1f tokens/s), "
                   "stop: %s, %lld in the conversation]\n",
                   (long long)turns_, (long long)r.prefilled_tokens, (long long)r.reprefilled_tokens,
                   r.generated_ids.size(), r.generation_tokens_per_second(), stop_reason_name(r.stop_reason),
                   (long long)chat_.conversation().length());
    }
  }

  const ChatCliFlags& flags_;
  std::shared_ptr<Engine> engine_;
  Chat chat_;
  std::vector<ImageInput> images_;  // /image: for the next message
  std::vector<Before> undo_;  // the state and messages before each turn
  int64_t turns_ = 0;
};

}  // namespace

int cmd_chat(int argc, char** argv) {
  const ChatCliFlags f = parse_chat_cli_flags(argc, argv);
  ChatSession session(f, Engine::load(f.model_dir, f.engine));
  int status = 0;
  for (std::string line; std::getline(std::cin, line);) {
    if (line.empty()) continue;
    try {
      if (!session.handle(line)) break;
    } catch (const Error& e) {
      // A bad turn or command does not end the chat; the exit status reports it.
      std::fprintf(stderr, "error: %s\n", e.what());
      status = 1;
    }
  }
  session.finish();
  return status;
}

}  // namespace deltagen
