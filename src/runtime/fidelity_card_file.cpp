#include "runtime/fidelity_card_file.h"

#include <cmath>
#include <cstdio>

#include "deltagen/error.h"
#include "tokenizer/text_file.h"
#include "util/number_text.h"

namespace deltagen {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

double number(const ordered_json& j, std::initializer_list<const char*> path) {
  const ordered_json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return std::nan("");
    p = &(*p)[k];
  }
  return p->is_number() ? p->get<double>() : std::nan("");
}

std::string text_of(const ordered_json& j, std::initializer_list<const char*> path) {
  const ordered_json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return "?";
    p = &(*p)[k];
  }
  return p->is_string() ? p->get<std::string>() : p->dump();
}

std::string reference_label(const ordered_json& card) {
  std::string ref = text_of(card, {"reference", "name"});
  if (text_of(card, {"reference", "kind"}) == "checkpoint") ref += " float64";
  return ref;
}

// ", 4.98 bits/weight read per token (5.02 in the file)": cards written before
// the weight counts have none.
std::string weights_summary(const ordered_json& card) {
  const double read = number(card, {"weights", "read_per_token", "bits_per_weight"});
  const double file = number(card, {"weights", "file", "bits_per_weight"});
  if (std::isnan(read) || std::isnan(file)) return "";
  return fmt(", %.2f bits/weight read per token", read) + fmt(" (%.2f in the file)", file);
}

}  // namespace

std::optional<ordered_json> read_fidelity_card(const fs::path& model_dir) {
  std::error_code ec;
  const fs::path dir = fs::is_directory(model_dir, ec) ? model_dir : model_dir.parent_path();
  const fs::path file = (dir.empty() ? fs::path(".") : dir) / kFidelityCardFile;
  if (!fs::exists(file, ec)) return std::nullopt;
  ordered_json card;
  try {
    card = ordered_json::parse(read_file_bytes(file));
  } catch (const ordered_json::parse_error& e) {
    fail(file.string(), std::string("not valid JSON: ") + e.what());
  }
  if (!card.is_object()) fail(file.string(), "not a fidelity card (not a JSON object)");
  return card;
}

std::string card_summary_line(const ordered_json& card) {
  const double tokens = number(card, {"tokens"});
  return "fidelity (vs " + reference_label(card) + ", " + (std::isnan(tokens) ? "?" : std::to_string(int64_t(tokens))) +
         " tokens of " + text_of(card, {"text", "file"}) + "): mean KL " + sci(number(card, {"kl", "mean"})) +
         ", p99 " + sci(number(card, {"kl", "p99"})) + ", top-1 " +
         fmt("%.2f %%", 100 * number(card, {"top1_agreement"})) + ", ppl ratio " +
         fmt("%.4f", number(card, {"ppl", "ratio"})) + weights_summary(card);
}

std::string card_text(const ordered_json& card) {
  std::string out;
  out += "fidelity of " + text_of(card, {"model"}) + " vs " + reference_label(card) + ": " + text_of(card, {"tokens"}) +
         " tokens of " + text_of(card, {"text", "file"}) + " (" + text_of(card, {"positions"}) +
         " positions, windows of " + text_of(card, {"settings", "context"}) + ")\n";
  out += "  mean KL     " + sci(number(card, {"kl", "mean"})) + "\n";
  out += "  p99 KL      " + sci(number(card, {"kl", "p99"})) + "\n";
  out += "  max KL      " + sci(number(card, {"kl", "max"})) + "\n";
  out += "  top-1       " + fmt("%.2f %%", 100 * number(card, {"top1_agreement"})) + "\n";
  out += "  ppl         " + fmt("%.4f", number(card, {"ppl", "model"})) + " (reference " +
         fmt("%.4f", number(card, {"ppl", "reference"})) + "), ratio " + fmt("%.4f", number(card, {"ppl", "ratio"})) +
         "\n";
  if (card.contains("weights")) {
    out += "  file        " + fmt("%.2f bits/weight", number(card, {"weights", "file", "bits_per_weight"})) + ", " +
           fmt("%.1f MB", number(card, {"weights", "file", "bytes"}) / 1e6) + "\n";
    out += "  per token   " + fmt("%.2f bits/weight", number(card, {"weights", "read_per_token", "bits_per_weight"})) +
           ", " + fmt("%.1f MB read", number(card, {"weights", "read_per_token", "bytes"}) / 1e6) + "\n";
  }
  return out;
}

}  // namespace deltagen
