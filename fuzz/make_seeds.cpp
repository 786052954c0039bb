// Writes the starting corpus of every fuzz target into OUT/<target>/:
// small but real files made with deltagen's own writers (a synthetic tiny
// checkpoint built to ONNX, its config and genai_config.json, .npy arrays,
// state snapshots, tokenizer.json files, chat templates). Kept small on
// purpose: libFuzzer mutates small inputs much faster, and -max_len follows
// the largest seed.
//
//   make_seeds OUT [QWEN_TOKENIZER_DIR]
//
// Run from the repository root: the chat-template seeds also read
// ../shared/reference/chat-templates/qwen3.5.jinja and tests/data/chat/conversations.json.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "models/build.h"
#include "runtime/snapshot.h"
#include "runtime/state.h"
#include "synth/synth.h"
#include "tiny_state.h"
#include "tokenizer/byte_level.h"
#include "deltagen/error.h"
#include "util/npy.h"
#include "vision/image_encode.h"

namespace fs = std::filesystem;
using namespace deltagen;
using nlohmann::json;

namespace {

fs::path out_root;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
  fs::create_directories(out_root / target);
  std::ofstream(out_root / target / name, std::ios::binary) << bytes;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void safetensors_seeds() {
  // Every tensor name of the tiny model with a small shape, in all three dtypes.
  const ModelConfig cfg = synth_preset("tiny");
  std::vector<std::vector<uint8_t>> storage;
  std::vector<TensorToWrite> tensors;
  int i = 0;
  for (const auto& spec : qwen35_tensor_specs(cfg)) {
    const DType dtype = i % 3 == 0 ? DType::F32 : i % 3 == 1 ? DType::F16 : DType::BF16;
    std::vector<int64_t> shape = spec.shape.size() == 1 ? std::vector<int64_t>{4} : std::vector<int64_t>{2, 3};
    storage.emplace_back(size_t(shape.size() == 1 ? 4 : 6) * dtype_size(dtype), uint8_t(i));
    tensors.push_back({"model.language_model." + spec.name, dtype, shape, storage.back().data(), storage.back().size()});
    ++i;
  }
  const fs::path tmp = out_root / "tmp.safetensors";
  write_safetensors(tmp, tensors, {{"format", "pt"}});
  write("safetensors", "tiny_names.safetensors", read(tmp));
  write_safetensors(tmp, {tensors.begin(), tensors.begin() + 3});
  write("safetensors", "three.safetensors", read(tmp));
  write_safetensors(tmp, {});
  write("safetensors", "empty.safetensors", read(tmp));
  fs::remove(tmp);
}

void config_seeds() {
  for (const char* preset : {"tiny", "0.8b", "2b", "4b", "9b"}) {
    const ModelConfig cfg = synth_preset(preset);
    write("config", std::string(preset) + "_text.json", config_to_json(cfg, false).dump(2));
    write("config", std::string(preset) + "_vl.json", config_to_json(cfg, true).dump(2));
  }
}

// A tiny checkpoint built to ONNX with every weight external, so model.onnx
// holds only the graph (a few tens of KB).
void model_seeds() {
  const fs::path ckpt = out_root / "tmp-checkpoint", model = out_root / "tmp-model";
  fs::remove_all(ckpt);
  fs::remove_all(model);
  SynthOptions so;
  so.dtype = DType::F32;
  write_synthetic_checkpoint(synth_preset("tiny"), so, ckpt);
  auto checkpoint = Checkpoint::open(ckpt);
  BuildOptions bo;
  bo.external_data_threshold = 0;
  bo.show_progress = false;
  bo.context_length = 64;
  build_model(*checkpoint, bo, model);
  write("onnx_summary", "tiny_external.onnx", read(model / "model.onnx"));
  write("model_rewrite", "tiny_fp32.onnx", read(model / "model.onnx"));
  {  // int4: MatMulNBits nodes, so the SwiGLU fold has something to fold into
    BuildOptions q4 = bo;
    q4.precision = Precision::Int4;
    q4.block_size = 16;
    const fs::path model4 = out_root / "tmp-model-int4";
    fs::remove_all(model4);
    build_model(*checkpoint, q4, model4);
    write("model_rewrite", "tiny_int4.onnx", read(model4 / "model.onnx"));
    fs::remove_all(model4);
  }
  {  // every fold at once: head_dim 64 puts the rotary inside the attention (the
     // gated-attention fold), fp16 states (their Casts go into GatedDeltaNet)
    ModelConfig cfg = synth_preset("tiny");
    cfg.head_dim = 64;
    const fs::path ckpt64 = out_root / "tmp-checkpoint-64", model64 = out_root / "tmp-model-64";
    fs::remove_all(ckpt64);
    fs::remove_all(model64);
    write_synthetic_checkpoint(cfg, so, ckpt64);
    auto checkpoint64 = Checkpoint::open(ckpt64);
    BuildOptions q4 = bo;
    q4.precision = Precision::Int4;
    q4.block_size = 16;
    q4.state_dtype = FloatType::Fp16;
    build_model(*checkpoint64, q4, model64);
    write("model_rewrite", "tiny_int4_rotary_inside_fp16_state.onnx", read(model64 / "model.onnx"));
    fs::remove_all(ckpt64);
    fs::remove_all(model64);
  }
  write("genai_config", "tiny.json", read(model / "genai_config.json"));
  write("genai_config", "minimal.json", R"({"model": {"decoder": {"filename": "model.onnx"}, "eos_token_id": [1, 2]}})");
  write("config", "tiny_checkpoint.json", read(ckpt / "config.json"));

  fs::remove_all(ckpt);
  fs::remove_all(model);
}

void npy_seeds() {
  const fs::path tmp = out_root / "tmp.npy";
  const float v[6] = {1, 2, 3, 4, 5, 6};
  write_npy_f32(tmp, v, {2, 3});
  write("npy", "f4_2x3.npy", read(tmp));
  write_npy_f32(tmp, v, {6});
  write("npy", "f4_6.npy", read(tmp));
  write_npy_f32(tmp, v, {});
  write("npy", "f4_scalar.npy", read(tmp));
  fs::remove(tmp);
  // Hand-made headers for the other dtypes and format version 2.
  auto npy = [](char version, const std::string& dict, const std::string& payload) {
    std::string header = dict;
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string out = std::string("\x93NUMPY", 6) + version + '\0';
    if (version == 1) {
      const uint16_t n = uint16_t(header.size());
      out.append(reinterpret_cast<const char*>(&n), 2);
    } else {
      const uint32_t n = uint32_t(header.size());
      out.append(reinterpret_cast<const char*>(&n), 4);
    }
    return out + header + payload;
  };
  const int64_t i8[3] = {7, -1, 42};
  write("npy", "i8_3.npy",
        npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", std::string(reinterpret_cast<const char*>(i8), 24)));
  const int32_t i4[2] = {5, 17};
  write("npy", "i4_v2.npy",
        npy(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }", std::string(reinterpret_cast<const char*>(i4), 8)));
  const double f8[2] = {0.5, -2};
  write("npy", "f8_2.npy",
        npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", std::string(reinterpret_cast<const char*>(f8), 16)));
}

// Snapshots of tiny-a-shaped states: empty, a few tokens with pending ones, full.
void snapshot_seeds() {
  HybridState state(fuzz::tiny_io(), 1, 8);
  std::mt19937 rng(1);
  for (int64_t length : {0, 3, 8}) {
    std::vector<int64_t> tokens;
    for (int64_t t = 0; t < length; ++t) tokens.push_back(int64_t(rng() % fuzz::kTinyVocab));
    state.reset_row(0);
    state.set_tokens(0, tokens);
    for (size_t c = 0; c < fuzz::tiny_io().caches.size(); ++c)
      for (std::byte& b : state.row_bytes(c, 0)) b = std::byte(rng());
    const std::vector<int64_t> pending = length == 3 ? std::vector<int64_t>{11, 12} : std::vector<int64_t>{};
    const auto bytes = serialize_snapshot(capture_row(state, 0, fuzz::kTinyVocab, pending));
    write("snapshot", "length" + std::to_string(length) + ".dgstate",
          std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
}

json tokenizer_json(json vocab, json merges, json added, json pre_tokenizer, json normalizer) {
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", normalizer},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", byte_level},
          {"decoder", byte_level},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"dropout", nullptr}, {"unk_token", nullptr}}}};
}

void tokenizer_seeds(const fs::path& qwen_dir) {
  const std::string qwen_regex =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[tok::bytes_to_byte_level(std::string(1, char(b)))] = b;
  json merges = json::array();
  int next = 256;
  for (auto [l, r] : std::vector<std::pair<std::string, std::string>>{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "w"}}) {
    merges.push_back({l, r});
    vocab[l + r] = next++;
  }
  json added = json::array({{{"id", 300}, {"content", "<|end|>"}, {"special", true}, {"lstrip", false}, {"rstrip", false},
                             {"normalized", false}, {"single_word", false}},
                            {{"id", 301}, {"content", "<x>"}, {"special", false}, {"lstrip", true}, {"rstrip", true},
                             {"normalized", true}, {"single_word", true}}});
  json split = {{"type", "Split"}, {"pattern", {{"Regex", qwen_regex}}}, {"behavior", "Isolated"}, {"invert", false}};
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  json pre = {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
  write("tokenizer_load", "tiny.json", tokenizer_json(vocab, merges, added, pre, {{"type", "NFC"}}).dump());
  write("tokenizer_load", "tiny_plain.json",
        tokenizer_json(vocab, merges, json::array(), byte_level, nullptr).dump());
  write("tokenizer_load", "config.json", R"({"eos_token": "<|end|>", "pad_token": {"content": "<x>"}, "bos_token": null})");

  // Qwen3's real settings (normalizer, pre-tokenizer, added tokens) with its
  // vocabulary cut to the ids below 600 and the merges among them.
  if (qwen_dir.empty() || !fs::exists(qwen_dir / "tokenizer.json")) return;
  json q = json::parse(read(qwen_dir / "tokenizer.json"));
  json small_vocab = json::object();
  for (auto& [k, v] : q["model"]["vocab"].items())
    if (v.get<int64_t>() < 600) small_vocab[k] = v;
  json small_merges = json::array();
  for (const auto& m : q["model"]["merges"]) {
    std::string l, r;
    if (m.is_string()) {
      auto s = m.get<std::string>();
      l = s.substr(0, s.find(' '));
      r = s.substr(s.find(' ') + 1);
    } else {
      l = m[0];
      r = m[1];
    }
    if (small_vocab.contains(l) && small_vocab.contains(r) && small_vocab.contains(l + r)) small_merges.push_back(m);
  }
  json added_small = json::array();
  for (const auto& a : q["added_tokens"])
    if (added_small.size() < 8) added_small.push_back(a);
  q["model"]["vocab"] = small_vocab;
  q["model"]["merges"] = small_merges;
  q["added_tokens"] = added_small;
  write("tokenizer_load", "qwen3_cut.json", q.dump());
}

// jinja_fuzz inputs are TEMPLATE or TEMPLATE \0 CONTEXT_JSON: small templates
// that use each feature, and the real chat templates with a few conversations.
void jinja_seeds(const fs::path& qwen_dir) {
  const char* snippets[] = {
      "{%- for m in messages %}{{ m.role }}: {{ m.content|trim }}\n{%- endfor %}",
      "{% set ns = namespace(n=0) %}{% for i in range(5) if i is odd %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
      "{% macro m(a, b=2) %}{{ a ~ b }}{% endmacro %}{{ m(1) }}{{ m(b=3, a='x') }}",
      "{{ tools|tojson(indent=2) }}{{ messages[::-1]|map(attribute='role')|join(',') }}",
      "{% if x is defined and x.y %}{{ x.y.split(',')[-1]|upper }}{% elif 1 < 2 %}b{% else %}c{% endif %}",
      "  {%- raw %}{{ kept }}{% endraw -%}\n  {# c #}{{ '%s-%d'|format('a', 1) }}{{ \"{0}\".format(3) }}",
      "{% set s %}{{ 'a' * 3 }}{% endset %}{{ s|replace('a', 'b') }}{{ s[1:] }}{{ (1, 2.5, none, true) }}",
      "{{ raise_exception('No messages provided.') if not messages }}",
  };
  int n = 0;
  for (const char* s : snippets) write("jinja", "snippet" + std::to_string(n++), s);
  write("jinja", "snippet_with_context",
        std::string("{{ x.a|tojson }}{{ x.b|length }}") + '\0' + R"({"x": {"a": [1.0, 1e-05], "b": "é"}})");

  std::vector<std::pair<std::string, std::string>> templates;  // name, source
  if (fs::exists("../shared/reference/chat-templates/qwen3.5.jinja"))
    templates.emplace_back("qwen3.5", read("../shared/reference/chat-templates/qwen3.5.jinja"));
  for (const auto& [name, dir] : {std::pair<std::string, fs::path>{"qwen3", qwen_dir},
                                  std::pair<std::string, fs::path>{"qwen2.5", qwen_dir.parent_path() / "qwen2_5"}}) {
    if (qwen_dir.empty() || !fs::exists(dir / "tokenizer_config.json")) continue;
    const json config = json::parse(read(dir / "tokenizer_config.json"));
    if (config.contains("chat_template") && config["chat_template"].is_string())
      templates.emplace_back(name, config["chat_template"].get<std::string>());
  }
  std::vector<std::string> contexts;
  if (fs::exists("tests/data/chat/conversations.json")) {
    const json doc = json::parse(read("tests/data/chat/conversations.json"));
    for (size_t i = 0; i < doc["cases"].size(); i += 8) contexts.push_back(doc["cases"][i]["context"].dump());
  }
  for (const auto& [name, source] : templates) {
    write("jinja", name + ".jinja", source);
    for (size_t i = 0; i < contexts.size(); ++i)
      write("jinja", name + "-" + std::to_string(i), source + '\0' + contexts[i]);
  }
}

// Request bodies of the OpenAI API, as clients send them.
void serve_request_seeds() {
  const char* bodies[] = {
      R"({"model": "m", "messages": [{"role": "user", "content": "Hello"}]})",
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 16,
          "temperature": 0.7, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "seed": 42, "stop": ["\n\n", "END"],
          "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1})",
      R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true, "stream_options": {"include_usage": true},
          "logprobs": true, "top_logprobs": 3, "chat_template_kwargs": {"enable_thinking": false}})",
      R"({"messages": [{"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}],
          "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
          "tool_choice": "auto"})",
      R"({"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
          {"role": "user", "content": "x", "name": "u"}, {"role": "assistant", "content": "y", "reasoning_content": "r"},
          {"role": "user", "content": "z"}], "max_completion_tokens": 5.0, "n": 1, "enable_thinking": true,
          "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "object"}}}})",
      R"({"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "echo": true, "logprobs": 2, "stream": false})",
      R"({"prompt": [9707, 11, 1879], "temperature": 0, "stop": "."})",
      R"({"prompt": [[1, 2, 3]], "response_format": {"type": "json_object"}})",
  };
  int i = 0;
  for (const char* b : bodies) write("serve_request", "body" + std::to_string(i++) + ".json", b);
}

// json_grammar_fuzz: mode byte (bits 0-1: any value, any object, schema,
// schema with closed objects; bits 2-4: depth limit - 1), then "schema \0 text"
// or the text.
void json_grammar_seeds() {
  const std::pair<int, const char*> texts[] = {
      {0, R"({"a": [1, -2.5e+3, true, null, "x\u00e9\ud83d\ude00"], "b": {}})"},
      {1, R"( {"k": "v"} )"},
  };
  for (const auto& [mode, text] : texts)
    write("json_grammar", "mode" + std::to_string(mode) + ".txt", std::string(1, char(mode | 3 << 2)) + text);
  const std::pair<const char*, const char*> schemas[] = {
      {R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},"age":{"type":"integer"},
          "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},"required":["name"],"additionalProperties":false})",
       R"({"name": "Ann", "tags": ["a"]})"},
      {R"({"anyOf":[{"properties":{"k":{"const":1}},"required":["k"]},
          {"type":"array","prefixItems":[{"type":"boolean"}],"items":false},{"enum":["red",12,null]}]})",
       R"({"k": 1})"},
      {R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"number"},"c":{"type":"array","items":{"$ref":"#/$defs/n"}}},
          "required":["v"]}},"$ref":"#/$defs/n"})",
       R"({"v": 1, "c": [{"v": 2}]})"},
      {R"({"type":["string","null"],"minLength":2})", R"("\u00e9x")"},
  };
  int i = 0;
  for (const auto& [schema, text] : schemas) {
    const std::string body = json::parse(schema).dump() + std::string(1, '\0') + text;
    write("json_grammar", "schema" + std::to_string(i) + ".txt", std::string(1, char(2 | 3 << 2)) + body);
    write("json_grammar", "closed" + std::to_string(i++) + ".txt", std::string(1, char(3 | 3 << 2)) + body);
  }
}

// Small images of every kind the decoder converts (vision/image_decode.h),
// made with vision/image_encode.h: 8x6 so that the blocks and filters have
// something to do, small enough to mutate quickly.
void image_seeds() {
  auto put = [](const std::string& name, const std::vector<uint8_t>& bytes) {
    write("image_decode", name, std::string(bytes.begin(), bytes.end()));
  };
  const int64_t w = 8, h = 6;
  Image rgb{w, h, std::vector<uint8_t>(size_t(w * h * 3))};
  for (size_t i = 0; i < rgb.rgb.size(); ++i) rgb.rgb[i] = uint8_t(i * 37 % 251);
  const std::vector<uint16_t> rgb16(rgb.rgb.begin(), rgb.rgb.end());
  std::vector<uint16_t> gray, gray16, rgba, index;
  for (int64_t i = 0; i < w * h; ++i) {
    gray.push_back(uint16_t(i * 5));
    gray16.push_back(uint16_t(i * 1300));
    rgba.insert(rgba.end(), {rgb16[size_t(3 * i)], rgb16[size_t(3 * i + 1)], rgb16[size_t(3 * i + 2)], uint16_t(i * 4)});
    index.push_back(uint16_t(i % 4));
  }
  put("rgb.png", encode_png({w, h, 3}, rgb16));
  put("gray16_interlaced.png", encode_png({w, h, 1, 16, true}, gray16));
  put("rgba.png", encode_png({w, h, 4}, rgba));
  PngSpec palette{w, h, 1, 2};
  palette.palette = {{{0, 0, 0}}, {{255, 0, 0}}, {{0, 255, 0}}, {{0, 0, 255}}};
  palette.palette_alpha = {0, 255};
  put("palette.png", encode_png(palette, index));
  const std::vector<uint8_t> gray8(gray.begin(), gray.end());
  std::vector<uint8_t> cmyk;
  for (int64_t i = 0; i < w * h; ++i) cmyk.insert(cmyk.end(), {uint8_t(i), 200, uint8_t(255 - i), 230});
  put("rgb.jpg", encode_jpeg(w, h, 3, rgb.rgb, 80));
  put("progressive.jpg", encode_jpeg(w, h, 3, rgb.rgb, 80, true));
  put("gray.jpg", encode_jpeg(w, h, 1, gray8, 80));
  put("cmyk.jpg", encode_jpeg(w, h, 4, cmyk, 80));
  put("rgb.ppm", encode_ppm(rgb));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_seeds OUT [QWEN_TOKENIZER_DIR]\n");
    return 2;
  }
  out_root = argv[1];
  try {
    fs::create_directories(out_root);
    safetensors_seeds();
    config_seeds();
    model_seeds();
    npy_seeds();
    snapshot_seeds();
    tokenizer_seeds(argc > 2 ? fs::path(argv[2]) : fs::path());
    serve_request_seeds();
    json_grammar_seeds();
    jinja_seeds(argc > 2 ? fs::path(argv[2]) : fs::path());
    image_seeds();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
