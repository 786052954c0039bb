#include "measure/fidelity_card.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include "measure/compare.h"
#include "measure/corpus.h"
#include "measure/graph_facts.h"
#include "tokenizer/text_file.h"
#include "runtime/genai_config.h"
#include "util/atomic_file.h"
#include "util/sha256.h"
#include "deltagen/error.h"

namespace deltagen::measure {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

// A folder's own name ("dir/", "dir/." and "." count as the folder): the card
// names folders, never where they are on this machine.
std::string folder_name(const fs::path& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

bool has_safetensors(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

ordered_json parse_json_file(const fs::path& file) {
  try {
    return ordered_json::parse(read_file_bytes(file));
  } catch (const ordered_json::parse_error& e) {
    fail(file.string(), std::string("not valid JSON: ") + e.what());
  }
}

// The longest window the model folder's genai_config.json allows (0 = unknown).
int64_t model_context(const fs::path& model_dir) { return load_genai_config(model_dir / "genai_config.json").context_length; }

}  // namespace

void validate(const CardOptions& o) {
  if (o.max_tokens < kMinMeasuringTokens)
    fail("--max-tokens", "needs at least " + std::to_string(kMinMeasuringTokens) + " tokens");
  if (o.context < 2) fail("--context", "needs at least 2 tokens (one scored position)");
  if (o.threads < 0) fail("--threads", "must not be negative");
  if (o.text_file.empty()) fail("card", "no text file given");
  if (o.reference.empty()) fail("card", "no reference given (a checkpoint or a built model folder)");
}

ReferenceKind reference_kind(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(dir.string(), "no such folder (the reference: a checkpoint or a built model)");
  if (fs::is_regular_file(dir / "genai_config.json", ec)) return ReferenceKind::Model;
  if (fs::is_regular_file(dir / "config.json", ec) && has_safetensors(dir)) return ReferenceKind::Checkpoint;
  fail(dir.string(), "neither a checkpoint (config.json and *.safetensors) nor a built model (genai_config.json)");
}

fs::path card_tokenizer_dir(const fs::path& model_dir, const fs::path& reference) {
  for (const fs::path& d : {model_dir, reference})
    if (!d.empty() && fs::is_regular_file(d / "tokenizer.json")) return d;
  fail(model_dir.string(), "no tokenizer.json here or in the reference folder: the card's text is encoded with it");
}

void check_card_inputs(const CardOptions& o, const fs::path& tokenizer_dir) {
  validate(o);
  reference_kind(o.reference);
  load_text_for_measuring(o.text_file, tokenizer_dir);
}

ordered_json measure_fidelity_card(const fs::path& model_dir, const CardOptions& o) {
  validate(o);
  if (!fs::is_regular_file(model_dir / "genai_config.json"))
    fail(model_dir.string(), "not a built model folder (no genai_config.json)");
  const ReferenceKind kind = reference_kind(o.reference);
  // The plan read first: a bad quantization.json fails before the measurement.
  std::optional<ordered_json> quantization;
  if (fs::exists(model_dir / "quantization.json")) quantization = parse_json_file(model_dir / "quantization.json");

  const fs::path tokenizer_dir = card_tokenizer_dir(model_dir, o.reference);
  std::string text;
  std::vector<int64_t> ids = load_text_for_measuring(o.text_file, tokenizer_dir, kMinMeasuringTokens, &text);
  const int64_t text_tokens = int64_t(ids.size());
  if (text_tokens > o.max_tokens) ids.resize(size_t(o.max_tokens));

  // Windows no longer than either model serves.
  int64_t context = o.context;
  for (const fs::path& d : {model_dir, kind == ReferenceKind::Model ? o.reference : fs::path()}) {
    if (d.empty()) continue;
    const int64_t c = model_context(d);
    if (c > 0) context = std::min(context, c);
  }
  if (context < 2) fail(model_dir.string(), "its context length is below 2 tokens");
  const int64_t max_length = std::min<int64_t>(context, int64_t(ids.size()));

  auto model = onnx_source(model_dir, o.threads, max_length);
  auto reference = kind == ReferenceKind::Checkpoint ? reference_source(o.reference)
                                                     : onnx_source(o.reference, o.threads, max_length);
  if (model->vocab() != reference->vocab())
    fail(o.reference.string(), "vocabulary mismatch: the reference has " + std::to_string(reference->vocab()) +
                                   " token ids, the model " + std::to_string(model->vocab()));
  for (int64_t id : ids)
    if (id < 0 || id >= model->vocab())
      fail(o.text_file.string(), "token id " + std::to_string(id) + " is outside the model's vocabulary (" +
                                     std::to_string(model->vocab()) + "): " +
                                     (tokenizer_dir / "tokenizer.json").string() + " does not fit the model");

  CompareOptions co;
  co.context = context;
  co.greedy_tokens = 0;
  co.threads = o.threads;
  co.progress = o.progress;
  // A = the reference, B = the model: KL(reference || model), ppl ratio model / reference.
  const CompareReport r = compare_sources(*reference, *model, ids, co);
  const Fidelity& f = r.fidelity;

  ordered_json card;
  card["card"] = "deltagen fidelity card";
  card["version"] = 1;
  card["model"] = folder_name(model_dir);
  card["reference"] = {{"kind", kind == ReferenceKind::Checkpoint ? "checkpoint" : "model"},
                       {"name", folder_name(o.reference)}};
  card["text"] = {{"file", o.text_file.filename().string()},
                  {"bytes", int64_t(text.size())},
                  {"sha256", sha256_hex(text)},
                  {"tokens", text_tokens}};
  card["tokenizer"] = tokenizer_dir == model_dir ? "model" : "reference";
  card["tokens"] = r.corpus_tokens;
  card["positions"] = f.positions;
  card["windows"] = r.windows;
  card["kl"] = {{"mean", f.kl_mean}, {"median", f.kl_median}, {"p99", f.kl_p99}, {"p999", f.kl_p999}, {"max", f.kl_max}};
  card["top1_agreement"] = f.top1_agreement;
  card["ppl"] = {{"model", f.ppl_b}, {"reference", f.ppl_a}, {"ratio", f.ppl_ratio}};
  card["rms_dp"] = f.rms_dp;
  card["settings"] = {{"context", context}, {"max_tokens", o.max_tokens}};
  // Bits per weight of the file and what one decoded token reads: the cost side of the card.
  card["weights"] = weight_counts_json(graph_facts(model_dir));
  card["date"] = utc_now_iso8601();
  if (quantization) card["quantization"] = std::move(*quantization);
  return card;
}

ordered_json write_fidelity_card(const fs::path& model_dir, const CardOptions& o) {
  ordered_json card = measure_fidelity_card(model_dir, o);
  write_file_atomic(model_dir / kFidelityCardFile, card.dump(2) + "\n");
  return card;
}

}  // namespace deltagen::measure
