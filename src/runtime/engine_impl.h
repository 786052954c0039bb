// The insides of the public API objects (deltagen/deltagen.h), shared by
// their implementation files.
#pragma once
#include <memory>
#include <mutex>
#include <optional>

#include "deltagen/deltagen.h"
#include "runtime/session.h"
#include "runtime/snapshot.h"
#include "tokenizer/tokenizer.h"

namespace deltagen {

struct Engine::Impl {
  std::unique_ptr<Model> model;
  int64_t max_length = 0;
  std::filesystem::path tokenizer_path;  // empty: none found
  mutable std::once_flag tokenizer_loaded;
  mutable std::optional<Tokenizer> tokenizer;

  // The tokenizer, or nullptr when there is no tokenizer file. Throws Error
  // for a file that cannot be loaded.
  const Tokenizer* tokenizer_or_null() const;
  // The tokenizer a request decodes its text with: required (errors
  // surface) when it has stop strings; otherwise the text of id prompts is
  // best effort, and a tokenizer file that cannot be loaded leaves it empty.
  const Tokenizer* tokenizer_for(const GenerationOptions& options) const;
};

struct Snapshot::Data {
  StateSnapshot state;
  std::string origin = "snapshot";  // names it in errors: the file it came from
};

// How the library's own files reach the insides of the public objects.
struct detail::Access {
  static const Engine::Impl& engine(const Engine& engine) { return *engine.impl_; }
  static const StateSnapshot& state(const Snapshot& snapshot) { return snapshot.data().state; }
  static const std::string& origin(const Snapshot& snapshot) { return snapshot.data().origin; }
  // The images whose pads the conversation's state holds (starts in its tokens).
  static const std::vector<SnapshotImage>& images(const Conversation& conversation);
  static Snapshot snapshot(StateSnapshot state, std::string origin = "snapshot") {
    return Snapshot(std::make_shared<const Snapshot::Data>(Snapshot::Data{std::move(state), std::move(origin)}));
  }
};

// max_length for a state: `requested`, or the engine's default when 0.
int64_t resolve_max_length(const Engine& engine, int64_t requested);

}  // namespace deltagen
