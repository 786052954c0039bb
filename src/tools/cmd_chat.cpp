// deltagen chat --model DIR [--system TEXT] [--no-think] [generation flags]
//               [--load-state FILE] [--save-state FILE] [--json]
//
// Interactive multi-turn chat in Qwen's format. Each line read from stdin is
// one user message; the reply streams to stdout. The model's state is kept
// between turns, so a turn runs only its own tokens (reported on stderr, or
// as "prefilled_tokens" with --json, which prints one JSON object per turn
// instead of streaming).
//
// Commands: /reset (new conversation), /undo (back to before the last turn),
// /save FILE and /load FILE (state snapshots), /exit.
// --load-state continues a saved conversation; --save-state writes the state
// at the end (atomically). Generation flags are those of `deltagen generate`;
// the default is greedy, --max-new-tokens 1024.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deltagen/deltagen.h"
#include "tools/args.h"
#include "tools/commands.h"
#include "tools/generation_flags.h"
#include "deltagen/error.h"

namespace deltagen {
namespace {

struct ChatFlags {
  std::string model_dir;
  EngineOptions engine;
  GenerationOptions options;
  ChatOptions chat;
  std::string load_state, save_state;
  bool json = false;
};

ChatFlags parse_flags(int argc, char** argv) {
  Args args(argc, argv, {"json", "stop-at-eos", "ignore-eos", "no-think"});
  ChatFlags f;
  f.model_dir = args.require("model");
  GenerationOptions defaults;
  defaults.max_new_tokens = 1024;
  defaults.prefill_chunk = 512;
  f.options = parse_generation_flags(args, defaults);
  f.engine = parse_engine_flags(args);
  f.chat.system_prompt = args.get_or("system", "");
  f.chat.thinking = !args.flag("no-think");
  f.load_state = args.get_or("load-state", "");
  f.save_state = args.get_or("save-state", "");
  f.json = args.flag("json");
  args.finish();
  return f;
}

void print_text(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

class ChatSession {
 public:
  ChatSession(const ChatFlags& flags, std::shared_ptr<Engine> engine)
      : flags_(flags), chat_(std::move(engine), flags.chat) {
    if (!flags.load_state.empty()) chat_.conversation().restore(Snapshot::load(flags.load_state));
  }

  // Handles one input line; returns false on /exit.
  bool handle(const std::string& line) {
    if (line == "/exit" || line == "/quit") return false;
    if (line == "/reset") {
      chat_.conversation().reset();
      undo_.clear();
      note("conversation reset");
    } else if (line == "/undo") {
      if (undo_.empty()) fail("/undo", "nothing to undo");
      chat_.conversation().restore(undo_.back());
      undo_.pop_back();
      note("back to " + std::to_string(chat_.conversation().length()) + " tokens");
    } else if (line.rfind("/save ", 0) == 0) {
      chat_.conversation().snapshot().save(line.substr(6));
      note("saved " + std::to_string(chat_.conversation().length()) + " tokens to " + line.substr(6));
    } else if (line.rfind("/load ", 0) == 0) {
      chat_.conversation().restore(Snapshot::load(line.substr(6)));
      undo_.clear();
      note("loaded " + std::to_string(chat_.conversation().length()) + " tokens from " + line.substr(6));
    } else {
      turn(line);
    }
    return true;
  }

  void finish() {
    if (!flags_.save_state.empty()) chat_.conversation().snapshot().save(flags_.save_state);
  }

 private:
  void note(const std::string& text) const { std::fprintf(stderr, "[%s]\n", text.c_str()); }

  void turn(const std::string& message) {
    undo_.push_back(chat_.conversation().snapshot());
    StreamCallback on_text;
    if (!flags_.json) on_text = [](std::string_view text, int64_t) {
      print_text(text);
      return true;
    };
    GenerationResult r;
    try {
      r = chat_.send(message, flags_.options, on_text);
    } catch (...) {
      undo_.pop_back();
      throw;
    }
    ++turns_;
    if (flags_.json) {
      nlohmann::json j = result_json(r);
      j["turn"] = turns_;
      j["conversation_tokens"] = chat_.conversation().length();
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    } else {
      print_text("\n");
      std::fprintf(stderr, "[turn %lld: prefilled %lld tokens, generated %zu (%.1f tokens/s), stop: %s, %lld in the conversation]\n",
                   (long long)turns_, (long long)r.prefilled_tokens, r.generated_ids.size(),
                   r.generation_tokens_per_second(), stop_reason_name(r.stop_reason),
                   (long long)chat_.conversation().length());
    }
  }

  const ChatFlags& flags_;
  Chat chat_;
  std::vector<Snapshot> undo_;  // the state before each turn
  int64_t turns_ = 0;
};

}  // namespace

int cmd_chat(int argc, char** argv) {
  const ChatFlags f = parse_flags(argc, argv);
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
