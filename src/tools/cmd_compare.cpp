// deltagen compare --a DIR --b DIR [--reference CHECKPOINT]
//                  [--ids-file F | --corpus TEXT_FILE | --tokens N --seed S] [--max-tokens N]
//                  [--context C] [--chunk K] [--greedy-prompt P] [--greedy-tokens G]
//                  [--threads T] [--a-kernels deltagen|ort] [--b-kernels deltagen|ort]
//                  [--a-ep cpu|webgpu|cuda] [--b-ep cpu|webgpu|cuda] (also with --layers, --depth)
//                  [--json] [--json-out FILE]
// deltagen compare --layers (--a DIR --b DIR | --reference CHECKPOINT --a DIR [--b DIR])
//                  [--jump-factor 10] [--rel-threshold 0.5] [--noise-floor 1e-3]
//                  [the corpus and run flags above but the greedy ones]
//   (models built with --layer-outputs; measure/layer_compare.h)
// deltagen compare --depth 24,36,48 --preset tiny|0.8b|... --build-a "FLAGS" --build-b "FLAGS"
//                  [--synth-seed S] [--work-dir DIR] [--keep] [the corpus and run flags above]
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "measure/compare.h"
#include "measure/layer_compare.h"
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

struct LayerJob {
  std::optional<std::string> a_dir, b_dir, reference;
  KernelSet a_kernels = KernelSet::Deltagen, b_kernels = KernelSet::Deltagen;
  measure::DivergenceRule rule;
  std::optional<ExecutionProvider> a_ep, b_ep;
};

// --layers: each model against the reference, or B against A.
std::pair<nlohmann::json, std::string> compare_layers(const LayerJob& job, const measure::CompareOptions& o,
                                                      const measure::CorpusSpec& corpus) {
  if (job.reference && !job.a_dir && !job.b_dir)
    fail("compare", "--layers --reference needs a model to compare: --a DIR (built with --layer-outputs)");
  if (!job.reference && (!job.a_dir || !job.b_dir))
    fail("compare", "--layers needs --a DIR and --b DIR (built with --layer-outputs), or --a DIR and --reference CHECKPOINT");
  std::vector<std::unique_ptr<measure::LogitSource>> models;
  if (job.a_dir) models.push_back(measure::onnx_source(*job.a_dir, o.threads, o.context, job.a_kernels, true, job.a_ep));
  if (job.b_dir) models.push_back(measure::onnx_source(*job.b_dir, o.threads, o.context, job.b_kernels, true, job.b_ep));
  std::string what;
  const fs::path tok = tokenizer_dir({job.a_dir.value_or(""), job.b_dir.value_or(""), job.reference.value_or("")});
  const std::vector<int64_t> ids = corpus.load(models[0]->vocab(), tok, &what);

  std::vector<measure::LayerReport> reports;
  if (job.reference) {
    auto ref = measure::reference_source(*job.reference, true);
    for (auto& m : models) {
      reports.push_back(measure::compare_layers(*ref, *m, ids, o, job.rule));
      reports.back().a_is_reference = true;
    }
  } else {
    reports.push_back(measure::compare_layers(*models[0], *models[1], ids, o, job.rule));
  }
  nlohmann::json j = {{"layer_comparisons", nlohmann::json::array()}};
  std::string text;
  for (auto& r : reports) {
    r.corpus = what;
    j["layer_comparisons"].push_back(measure::to_json(r));
    if (!text.empty()) text += '\n';  // piece by piece: GCC 12 warns (-Wrestrict, falsely) on "" + string
    text += measure::to_markdown(r);
  }
  return {j, text};
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  Args args(argc, argv, {"json", "keep", "layers"});
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
  o.ep_a = get_ep_flag(args, "a-ep");
  o.ep_b = get_ep_flag(args, "b-ep");
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
  const bool layers = args.flag("layers");
  LayerJob job{a_dir, b_dir, reference, a_fast, b_fast, {}, o.ep_a, o.ep_b};
  job.rule.jump_factor = args.get_double("jump-factor", job.rule.jump_factor);
  job.rule.rel_threshold = args.get_double("rel-threshold", job.rule.rel_threshold);
  job.rule.noise_floor = args.get_double("noise-floor", job.rule.noise_floor);
  for (const char* f : {"jump-factor", "rel-threshold", "noise-floor"})
    if (!layers && args.has(f)) fail(std::string("--") + f, "only applies to --layers");
  for (const char* f : {"greedy-prompt", "greedy-tokens"})
    if (layers && args.has(f)) fail(std::string("--") + f, "does not apply to --layers (it compares no continuation)");
  args.finish();
  measure::validate(o);
  if (layers) measure::validate(job.rule);
  if (!corpus.ids_file.empty() && !corpus.text_file.empty()) fail("compare", "give --ids-file or --corpus, not both");
  o.progress = ::isatty(STDERR_FILENO) != 0;

  if (layers) {
    if (depth) fail("--layers", "does not combine with --depth");
    auto [j, text] = compare_layers(job, o, corpus);
    write_json(json_out, j);
    std::fputs((as_json ? j.dump(2) + "\n" : text).c_str(), stdout);
    return 0;
  }

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
  auto b = measure::onnx_source(*b_dir, o.threads, max_length, b_fast, false, o.ep_b);
  std::string what;
  const fs::path tok = tokenizer_dir({*b_dir, a_dir.value_or(""), reference.value_or("")});
  const std::vector<int64_t> ids = corpus.load(b->vocab(), tok, &what);

  // Against the reference: B, and A too when given. Otherwise B against A.
  std::vector<measure::CompareReport> reports;
  if (reference) {
    auto ref = measure::reference_source(*reference);
    if (a_dir) {
      auto a = measure::onnx_source(*a_dir, o.threads, max_length, a_fast, false, o.ep_a);
      reports.push_back(measure::compare_sources(*ref, *a, ids, o));
    }
    reports.push_back(measure::compare_sources(*ref, *b, ids, o));
    for (auto& r : reports) r.a_is_reference = true;
  } else {
    auto a = measure::onnx_source(*a_dir, o.threads, max_length, a_fast, false, o.ep_a);
    reports.push_back(measure::compare_sources(*a, *b, ids, o));
  }
  nlohmann::json j = {{"comparisons", nlohmann::json::array()}};
  std::string text;
  for (auto& r : reports) {
    r.corpus = what;
    j["comparisons"].push_back(measure::to_json(r));
    if (!text.empty()) text += '\n';  // piece by piece: GCC 12 warns (-Wrestrict, falsely) on "" + string
    text += measure::to_markdown(r);
  }
  write_json(json_out, j);
  std::fputs((as_json ? j.dump(2) + "\n" : text).c_str(), stdout);
  return 0;
}

}  // namespace deltagen
