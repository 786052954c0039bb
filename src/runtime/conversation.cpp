// Snapshot and Conversation of the public API.
#include <algorithm>

#include "runtime/engine_impl.h"
#include "runtime/image_prompt.h"
#include "runtime/generation.h"
#include "runtime/generator.h"
#include "deltagen/error.h"

namespace deltagen {

// ---- Snapshot ---------------------------------------------------------------------

Snapshot::Snapshot() = default;
Snapshot::~Snapshot() = default;
Snapshot::Snapshot(const Snapshot&) = default;
Snapshot& Snapshot::operator=(const Snapshot&) = default;
Snapshot::Snapshot(std::shared_ptr<const Data> data) : data_(std::move(data)) {}

bool Snapshot::empty() const { return !data_; }

const Snapshot::Data& Snapshot::data() const {
  if (!data_) fail("snapshot", "empty (never taken or loaded)");
  return *data_;
}

const std::vector<int64_t>& Snapshot::tokens() const { return data().state.tokens; }

void Snapshot::save(const std::filesystem::path& file) const { save_snapshot_file(data().state, file); }

Snapshot Snapshot::load(const std::filesystem::path& file) {
  return Snapshot(std::make_shared<const Data>(Data{load_snapshot_file(file), file.string()}));
}

// ---- Conversation -----------------------------------------------------------------

struct Conversation::Impl {
  Impl(std::shared_ptr<Engine> e, int64_t max_length)
      : engine(std::move(e)), generator(*detail::Access::engine(*engine).model, 1, resolve_max_length(*engine, max_length)) {}

  // tokens = what the state has run + the pending tokens.
  void refresh_tokens() {
    tokens = generator.state().tokens(0);
    tokens.insert(tokens.end(), pending.begin(), pending.end());
  }

  // Images whose pads are in the state (or being run), for snapshots; those
  // that start past the state's length are dropped (a failed request).
  void trim_images() {
    const int64_t length = generator.state().length(0);
    std::erase_if(images, [&](const SnapshotImage& i) { return i.start >= length; });
  }

  std::shared_ptr<Engine> engine;
  Generator generator;
  std::vector<int64_t> pending;  // chosen but not yet run: the last reply's last token
  std::vector<int64_t> tokens;
  std::vector<SnapshotImage> images;
};

const std::vector<SnapshotImage>& detail::Access::images(const Conversation& conversation) {
  return conversation.impl_->images;
}

Conversation::Conversation(std::shared_ptr<Engine> engine, int64_t max_length) {
  if (!engine) fail("conversation", "no engine");
  impl_ = std::make_unique<Impl>(std::move(engine), max_length);
}
Conversation::~Conversation() = default;
Conversation::Conversation(Conversation&&) noexcept = default;
Conversation& Conversation::operator=(Conversation&&) noexcept = default;

Engine& Conversation::engine() const { return *impl_->engine; }
const std::vector<int64_t>& Conversation::tokens() const { return impl_->tokens; }
int64_t Conversation::max_length() const { return impl_->generator.max_length(); }

GenerationResult Conversation::generate(std::span<const int64_t> prompt, const GenerationOptions& options,
                                        const StreamCallback& on_text) {
  Impl& c = *impl_;
  const std::vector<std::vector<int64_t>> feeds = {[&] {
    std::vector<int64_t> feed = c.pending;
    feed.insert(feed.end(), prompt.begin(), prompt.end());
    return feed;
  }()};
  TokenCallback callback;
  if (on_text) callback = [&](int64_t, int64_t token, std::string_view text) { return on_text(text, token); };

  const int64_t length_before = c.generator.state().length(0);
  GenerationResult result;
  try {
    result = generate_rows(c.generator, feeds, options, detail::Access::engine(*c.engine).tokenizer_for(options), callback).at(0);
  } catch (...) {
    // Requests are checked before anything runs; a failure after that reset the state.
    if (c.generator.state().length(0) != length_before) c.pending.clear();
    c.trim_images();
    c.refresh_tokens();
    throw;
  }
  result.prompt_tokens = int64_t(prompt.size());
  c.pending.clear();
  if (!result.generated_ids.empty()) c.pending.push_back(result.generated_ids.back());
  c.refresh_tokens();
  return result;
}

GenerationResult Conversation::generate(std::span<const int64_t> prompt, std::span<const ImageInput> images,
                                        const GenerationOptions& options, const StreamCallback& on_text) {
  if (images.empty()) return generate(prompt, options, on_text);
  Impl& c = *impl_;
  // The pending token (text) runs first, so the positions start where it sits.
  std::vector<int64_t> feed = c.pending;
  feed.insert(feed.end(), prompt.begin(), prompt.end());
  ImagePrompt ready =
      prepare_image_prompt(*detail::Access::engine(*c.engine).model, feed, images, c.generator.next_position(0));
  const int64_t image_tokens = ready.images.rows;
  c.generator.attach_images(0, std::move(ready.images));
  const int64_t offset = c.generator.state().length(0);
  for (SnapshotImage key : ready.keys) {
    key.start += offset;
    c.images.push_back(std::move(key));
  }
  const std::vector<int64_t> expanded(ready.ids.begin() + ptrdiff_t(c.pending.size()), ready.ids.end());
  try {
    GenerationResult result = generate(std::span<const int64_t>(expanded), options, on_text);
    result.images = int64_t(images.size());
    result.image_tokens = image_tokens;
    result.image_encode_seconds = ready.encode_seconds;
    return result;
  } catch (...) {
    c.generator.detach_images(0);
    c.trim_images();
    throw;
  }
}

GenerationResult Conversation::generate(std::string_view prompt, const GenerationOptions& options,
                                        const StreamCallback& on_text) {
  const std::vector<int64_t> ids = prompt.empty() ? std::vector<int64_t>() : engine().encode(prompt);
  return generate(std::span<const int64_t>(ids), options, on_text);
}

Snapshot Conversation::snapshot() const {
  const Impl& c = *impl_;
  StateSnapshot state = capture_row(c.generator.state(), 0, c.generator.vocab(), c.pending);
  state.rope_delta = c.generator.rope_delta(0);
  state.images = c.images;
  return detail::Access::snapshot(std::move(state));
}

void Conversation::restore(const Snapshot& snapshot) {
  Impl& c = *impl_;
  const StateSnapshot& state = detail::Access::state(snapshot);
  restore_row(c.generator.state(), 0, c.generator.vocab(), state, detail::Access::origin(snapshot));
  c.generator.detach_images(0);
  c.generator.set_rope_delta(0, state.rope_delta);
  c.images = state.images;
  const auto pending = state.pending();
  c.pending.assign(pending.begin(), pending.end());
  c.refresh_tokens();
}

void Conversation::reset() {
  impl_->generator.reset();
  impl_->pending.clear();
  impl_->images.clear();
  impl_->refresh_tokens();
}

}  // namespace deltagen
