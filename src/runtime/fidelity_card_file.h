// The fidelity card a model folder may carry (fidelity.json, written by
// measure/fidelity_card.h): read and summed up for whoever shows it (`deltagen
// inspect`, `deltagen build --card`, the server's /v1/models). Reading a card
// is not measuring, so this sits below both measure/ and serve/.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace deltagen {

inline constexpr const char* kFidelityCardFile = "fidelity.json";

// model_dir/fidelity.json (model_dir may also be the .onnx file inside it);
// nullopt when there is none; Error naming the file when it is not a JSON object.
std::optional<nlohmann::ordered_json> read_fidelity_card(const std::filesystem::path& model_dir);

// "fidelity (vs REF, N tokens of FILE): mean KL x, p99 x, top-1 x %, ppl ratio x"
std::string card_summary_line(const nlohmann::ordered_json& card);
// A few lines for `deltagen card`: the summary line's numbers, one per line.
std::string card_text(const nlohmann::ordered_json& card);

}  // namespace deltagen
