// A minimal chat program on deltagen's public API.
//
//   example_chat MODEL_DIR        (a folder written by `deltagen build`, with tokenizer.json)
//
// Reads one user message per line from stdin and streams the replies. The
// conversation's state is kept between turns, so each turn runs only its own
// tokens. "/undo" rewinds to before the last turn through an in-memory snapshot.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "deltagen/deltagen.h"
#include "deltagen/error.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  try {
    auto engine = deltagen::Engine::load(argv[1]);
    deltagen::Chat chat(engine, {.system_prompt = "You are a helpful assistant.", .thinking = false});

    deltagen::GenerationOptions options;
    options.max_new_tokens = 512;
    options.sampling.temperature = 0.7;
    options.sampling.top_p = 0.8;
    options.sampling.seed = 42;

    std::vector<deltagen::Snapshot> before_turn;  // one per turn, to rewind
    std::string line;
    while (std::cout << "> " << std::flush, std::getline(std::cin, line)) {
      if (line == "/undo") {
        if (!before_turn.empty()) {
          chat.conversation().restore(before_turn.back());
          before_turn.pop_back();
        }
        continue;
      }
      before_turn.push_back(chat.conversation().snapshot());
      const deltagen::ChatReply reply =
          chat.send(line, options, [](std::string_view text, int64_t) {
            std::cout << text << std::flush;
            return true;  // false would stop the reply here
          });
      std::cout << "\n[" << reply.prefilled_tokens << " tokens prefilled, " << reply.generated_ids.size()
                << " generated, " << reply.generation_tokens_per_second() << " tokens/s]\n";
    }
    return 0;
  } catch (const deltagen::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
