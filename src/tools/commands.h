// The CLI subcommands. Each takes argv with argv[0] = the subcommand name,
// returns the process exit code and throws deltagen::Error for user errors.
#pragma once

namespace deltagen {

int cmd_synth(int argc, char** argv);      // tools/cmd_synth.cpp
int cmd_reference(int argc, char** argv);  // tools/cmd_reference.cpp
int cmd_build(int argc, char** argv);      // tools/cmd_build.cpp
int cmd_generate(int argc, char** argv);   // tools/cmd_generate.cpp
int cmd_chat(int argc, char** argv);       // tools/cmd_chat.cpp
int cmd_inspect(int argc, char** argv);    // tools/cmd_inspect.cpp
int cmd_tokenize(int argc, char** argv);   // tools/cmd_tokenize.cpp
int cmd_bench(int argc, char** argv);      // tools/cmd_bench.cpp
int cmd_compare(int argc, char** argv);    // tools/cmd_compare.cpp
int cmd_card(int argc, char** argv);       // tools/cmd_card.cpp
int cmd_serve(int argc, char** argv);      // tools/cmd_serve.cpp
int cmd_bench_serve(int argc, char** argv);  // tools/cmd_bench_serve.cpp

}  // namespace deltagen
