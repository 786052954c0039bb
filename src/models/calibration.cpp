#include "models/calibration.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "deltagen/error.h"
#include "tokenizer/text_file.h"

namespace deltagen {

const CalibrationSite* Calibration::site_of(const std::string& weight) const {
  for (const CalibrationSite& s : sites)
    if (std::find(s.weights.begin(), s.weights.end(), weight) != s.weights.end()) return &s;
  return nullptr;
}

std::shared_ptr<const quant::InputStats> Calibration::find(const std::string& weight) const {
  const CalibrationSite* s = site_of(weight);
  if (!s) return nullptr;
  return s->spilled ? s->spilled->read(*s->stats) : s->stats;
}

SpilledGram::SpilledGram(const std::vector<float>& gram_lower, int64_t k) : k_(k) {
  std::string name = (std::filesystem::temp_directory_path() / "deltagen-gram-XXXXXX").string();
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) fail(name, "cannot create the calibration's spill file");
  ::unlink(name.c_str());
  for (int64_t i = 0; i < k; ++i) {
    const char* row = reinterpret_cast<const char*>(gram_lower.data() + i * k);
    size_t left = size_t(i + 1) * sizeof(float);
    while (left > 0) {
      const ssize_t n = ::write(fd_, row, left);
      if (n <= 0) fail(name, "cannot write the calibration's statistics (disk full?)");
      row += n;
      left -= size_t(n);
    }
  }
}

SpilledGram::~SpilledGram() {
  if (fd_ >= 0) ::close(fd_);
}

bool SpilledGram::linked() const {
  struct stat st {};
  return ::fstat(fd_, &st) == 0 && st.st_nlink > 0;
}

std::shared_ptr<quant::InputStats> SpilledGram::read(const quant::InputStats& summary) const {
  auto stats = std::make_shared<quant::InputStats>(k_, true);
  stats->tokens = summary.tokens;
  stats->diag = summary.diag;
  std::vector<float> row(static_cast<size_t>(k_));
  off_t at = 0;
  for (int64_t i = 0; i < k_; ++i) {
    const size_t bytes = size_t(i + 1) * sizeof(float);
    if (::pread(fd_, row.data(), bytes, at) != ssize_t(bytes))
      fail("calibration", "the spilled statistics cannot be read back");
    at += off_t(bytes);
    std::copy(row.begin(), row.begin() + i + 1, stats->gram.begin() + i * k_);
  }
  return stats;
}

std::vector<int64_t> calibration_ids(const std::filesystem::path& text, const std::filesystem::path& tokenizer_dir,
                                     int64_t min_tokens) {
  validate_text_file(text);
  if (!std::filesystem::exists(tokenizer_dir / "tokenizer.json"))
    fail((tokenizer_dir / "tokenizer.json").string(),
         "missing: calibration text is encoded with the checkpoint's tokenizer (copy tokenizer.json and "
         "tokenizer_config.json next to its config.json)");
  return load_text_for_measuring(text, tokenizer_dir, min_tokens);
}

Calibration calibrate(const ReferenceModel& model, const std::vector<int64_t>& ids, const CalibrationOptions& o) {
  if (o.window <= 0 || o.max_tokens <= 0) throw std::logic_error("calibrate: window and max_tokens must be positive");
  Calibration cal;
  ReferenceTrace trace;
  trace.linear_inputs = [&cal, &o](const std::vector<std::string>& weights, const Matrix64& x) {
    auto it = std::find_if(cal.sites.begin(), cal.sites.end(),
                           [&](const CalibrationSite& s) { return s.weights == weights; });
    if (it == cal.sites.end()) {
      cal.sites.push_back({weights, std::make_shared<quant::InputStats>(x.cols, o.full_gram)});
      it = cal.sites.end() - 1;
    }
    it->stats->add(x.data.data(), x.rows);
  };
  const int64_t total = std::min<int64_t>(o.max_tokens, int64_t(ids.size()));
  const bool show = o.progress && ::isatty(STDERR_FILENO);
  for (int64_t begin = 0; begin < total; begin += o.window) {
    const int64_t end = std::min(total, begin + o.window);
    ReferenceState state = model.new_state();
    // The forward pass up to the logits (the lm_head's input is all it needs of the head).
    Matrix64 h = model.embed(std::vector<int64_t>(ids.begin() + begin, ids.begin() + end));
    model.run_layers(0, h, state, &trace);
    trace.linear_inputs({model.lm_head_name()}, model.final_norm(h));
    trace.hidden.clear();
    cal.tokens = end;
    if (show) std::fprintf(stderr, "\rcalibrating: %lld / %lld tokens", (long long)end, (long long)total);
  }
  if (show) std::fputc('\n', stderr);
  return cal;
}

}  // namespace deltagen
