// deltagen compare --a DIR --b DIR [--reference CHECKPOINT]
//                  [--ids-file F | --corpus TEXT_FILE | --tokens N --seed S] [--max-tokens N]
//                  [--context C] [--chunk K] [--greedy-prompt P] [--greedy-tokens G]
//                  [--threads T] [--a-kernels deltagen|ort] [--b-kernels deltagen|ort]
//                  [--json] [--json-out FILE]
// deltagen compare --depth 24,36,48 --preset tiny|0.8b|... --build-a "FLAGS" --build-b "FLAGS"
//                  [--synth-seed S] [--work-dir DIR] [--keep] [the corpus and run flags above]
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "measure/compare.h"
#include "tools/args.h"
#include "tools/build_flags.h"
#include "tools/commands.h"
#include "deltagen/error.h"

namespace deltagen {

namespace {

namespace fs = std::filesystem;

void write_json(const std::optional<std::string>& file, const nlohmann::json& j) {
  if (!file) return;
  std::ofstream out(*file);
  out << j.dump(2) << "\n";
  if (!out) fail(*file, "cannot write the file");
}

// The first folder that has a tokenizer.json (for --corpus), else the first one.
fs::path tokenizer_dir(const std::vector<fs::path>& candidates) {
  for (const auto& d : candidates)
    if (!d.empty() && fs::exists(d / "tokenizer.json")) return d;
  for (const auto& d : candidates)
    if (!d.empty()) return d;
  return {};
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  Args args(argc, argv, {"json", "keep"});
  measure::CompareOptions o;
  o.context = args.get_int("context", o.context);
  o.chunk = args.get_int("chunk", o.chunk);
  o.greedy_prompt = args.get_int("greedy-prompt", o.greedy_prompt);
  o.greedy_tokens = args.get_int("greedy-tokens", o.greedy_tokens);
  o.threads = int(args.get_int("threads", o.threads));
  measure::CorpusSpec corpus;
  if (auto f = args.get("ids-file")) corpus.ids_file = *f;
  if (auto f = args.get("corpus")) corpus.text_file = *f;
  corpus.tokens = args.get_int("tokens", corpus.tokens);
  corpus.seed = uint64_t(args.get_int("seed", int64_t(corpus.seed)));
  corpus.limit = args.get_int("max-tokens", corpus.limit);
  const KernelSet a_fast = get_kernels_flag(args, "a-kernels"), b_fast = get_kernels_flag(args, "b-kernels");
  const bool as_json = args.flag("json");
  const auto json_out = args.get("json-out");

  const auto a_dir = args.get("a"), b_dir = args.get("b"), reference = args.get("reference");
  const auto depth = args.get("depth");
  measure::DepthStudyOptions study;
  if (depth) {
    study.depths = parse_ids(*depth, "--depth");
    study.preset = args.get_or("preset", study.preset);
    // One space between words, so equal flag sets compare equal as strings.
    study.flags_a = join_words(split_flags(args.get_or("build-a", "")));
    study.flags_b = join_words(split_flags(args.get_or("build-b", "")));
    // Parsed before anything is synthesized: a bad flag fails at once.
    study.build_a = parse_build_flags(study.flags_a);
    study.build_b = parse_build_flags(study.flags_b);
    study.seed = uint64_t(args.get_int("synth-seed", 0));
    study.work_dir = args.get_or("work-dir", "");
    study.keep = args.flag("keep");
  }
  args.finish();
  measure::validate(o);
  if (!corpus.ids_file.empty() && !corpus.text_file.empty()) fail("compare", "give --ids-file or --corpus, not both");
  o.progress = ::isatty(STDERR_FILENO) != 0;

  if (depth) {
    if (a_dir || b_dir || reference) fail("compare", "--depth builds its own models: no --a, --b or --reference");
    auto rows = measure::run_depth_study(study, o, corpus);
    const nlohmann::json j = measure::to_json(rows, study);
    write_json(json_out, j);
    std::fputs((as_json ? j.dump(2) + "\n" : measure::to_markdown(rows, study)).c_str(), stdout);
    return 0;
  }

  if (!b_dir) fail("compare", "missing required flag --b");
  if (!a_dir && !reference) fail("compare", "missing --a (or --reference CHECKPOINT to compare against the float64 reference)");
  const int64_t max_length = std::max(o.context, o.greedy_prompt + o.greedy_tokens);
  auto b = measure::onnx_source(*b_dir, o.threads, max_length, b_fast);
  std::string what;
  const fs::path tok = tokenizer_dir({*b_dir, a_dir.value_or(""), reference.value_or("")});
  const std::vector<int64_t> ids = corpus.load(b->vocab(), tok, &what);

  // Against the reference: B, and A too when given. Otherwise B against A.
  std::vector<measure::CompareReport> reports;
  if (reference) {
    auto ref = measure::reference_source(*reference);
    if (a_dir) {
      auto a = measure::onnx_source(*a_dir, o.threads, max_length, a_fast);
      reports.push_back(measure::compare_sources(*ref, *a, ids, o));
    }
    reports.push_back(measure::compare_sources(*ref, *b, ids, o));
    for (auto& r : reports) r.a_is_reference = true;
  } else {
    auto a = measure::onnx_source(*a_dir, o.threads, max_length, a_fast);
    reports.push_back(measure::compare_sources(*a, *b, ids, o));
  }
  nlohmann::json j = {{"comparisons", nlohmann::json::array()}};
  std::string text;
  for (auto& r : reports) {
    r.corpus = what;
    j["comparisons"].push_back(measure::to_json(r));
    text += (text.empty() ? "" : "\n") + measure::to_markdown(r);
  }
  write_json(json_out, j);
  std::fputs((as_json ? j.dump(2) + "\n" : text).c_str(), stdout);
  return 0;
}

}  // namespace deltagen
