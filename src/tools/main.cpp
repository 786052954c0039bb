// deltagen: Qwen3.5 checkpoints -> optimized ONNX models -> tokens.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "tools/commands.h"
#include "deltagen/error.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
};

const Command kCommands[] = {
    {"synth", deltagen::cmd_synth, "write a random-weight checkpoint in the real HF layout"},
    {"reference", deltagen::cmd_reference, "run the float64 C++ reference forward pass"},
    {"build", deltagen::cmd_build, "build an ONNX model (+ genai_config.json) from a checkpoint"},
    {"generate", deltagen::cmd_generate, "generate tokens with ONNX Runtime"},
    {"chat", deltagen::cmd_chat, "chat with a model, keeping its state between turns"},
    {"inspect", deltagen::cmd_inspect, "print node counts, I/O and weight bytes of a model"},
    {"tokenize", deltagen::cmd_tokenize, "encode text to token ids or decode ids to text"},
    {"bench", deltagen::cmd_bench, "measure prompt/generation speed (one model, or two alternately with --vs)"},
    {"compare", deltagen::cmd_compare, "measure how far one model's logits (--layers: each layer's output) are from another's or the reference"},
    {"card", deltagen::cmd_card, "write a model's fidelity card (fidelity.json): KL, top-1, perplexity vs a reference on a text"},
    {"serve", deltagen::cmd_serve, "serve a model over an OpenAI-compatible HTTP API, with a web chat page"},
    {"bench-serve", deltagen::cmd_bench_serve, "measure the server: concurrent streams, a cached conversation, HTTP cost"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: deltagen <command> [flags]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.help);
  std::fprintf(out, "\nSee README.md for the flags of each command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const deltagen::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s: %s\n", argv[1], e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "error: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
