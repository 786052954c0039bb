// Round trips on synthetic checkpoints of shapes the golden set does not
// cover: the float64 reference and the built fp32 ONNX graph (through the
// runtime's loop) must agree on prefill logits, decode logits and greedy tokens.
#include <gtest/gtest.h>

#include "models/build.h"
#include "reference/qwen35_reference.h"
#include "runtime/generator.h"
#include "runtime/session.h"
#include "synth/synth.h"
#include "test_util.h"

namespace deltagen {
namespace {

struct Variant {
  std::string name;
  ModelConfig cfg;
  SynthOptions opts;
};

ModelConfig odd_shapes() {
  // Everything differs from tiny-a: 3 value heads per key head, d_k != d_v,
  // one KV head, a wider rotary part, an untied head, a vocab that is no power of 2.
  ModelConfig c = synth_preset("tiny");
  c.model_type = "qwen3_5_text";
  c.vocab_size = 300;
  c.hidden_size = 96;
  c.intermediate_size = 160;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 1;
  c.head_dim = 32;
  c.linear_num_key_heads = 2;
  c.linear_num_value_heads = 6;
  c.linear_key_head_dim = 16;
  c.linear_value_head_dim = 24;
  c.tie_word_embeddings = false;
  c.eos_token_ids = {299};
  set_num_layers(c, 8);
  return c;
}

std::vector<Variant> variants() {
  std::vector<Variant> v;
  {
    Variant x{"untied_lm_head_f32", synth_preset("tiny"), {}};
    x.cfg.tie_word_embeddings = false;
    x.opts.seed = 3;
    x.opts.dtype = DType::F32;
    v.push_back(x);
  }
  {
    Variant x{"eight_layers_bf16", synth_preset("tiny"), {}};
    set_num_layers(x.cfg, 8);
    x.opts.seed = 4;
    x.opts.dtype = DType::BF16;
    v.push_back(x);
  }
  {
    Variant x{"odd_shapes_text_layout_f16", odd_shapes(), {}};
    x.opts.seed = 5;
    x.opts.dtype = DType::F16;
    x.opts.vl_layout = false;
    v.push_back(x);
  }
  return v;
}

class RoundTrip : public ::testing::TestWithParam<Variant> {};

TEST_P(RoundTrip, ReferenceAndOnnxAgree) {
  const Variant& v = GetParam();
  test::TempDir tmp;
  write_synthetic_checkpoint(v.cfg, v.opts, tmp / "ck");
  auto ck = Checkpoint::open(tmp / "ck");
  BuildOptions bo;
  bo.context_length = 256;
  build_model(*ck, bo, tmp / "model");

  const std::vector<int64_t> prompt = {3, 17, 250, 42, 7, 99, 123, 201, 1, 64, 33};
  const int64_t new_tokens = 8;

  ReferenceModel ref(*ck);
  GreedyResult want = reference_greedy(ref, prompt, new_tokens);

  auto model = Model::load(tmp / "model");
  Generator gen(*model);
  GenerateOptions go;
  go.max_new_tokens = new_tokens;
  go.collect_logits = true;
  GenerateResult got = generate_greedy(gen, prompt, go);

  EXPECT_EQ(got.generated_ids, want.generated);
  ASSERT_EQ(got.logits_rows, want.logits.rows);
  ASSERT_EQ(got.vocab, want.logits.cols);
  double max_diff = test::max_abs_diff(got.logits, want.logits.data);
  EXPECT_LT(max_diff, 1e-4) << v.name;
  // The comparison means something only if the logits are not flat.
  double spread = 0;
  for (double x : want.logits.data) spread = std::max(spread, std::abs(x));
  EXPECT_GT(spread, 0.5);

  // The same with the prompt fed in chunks of 4 tokens.
  Generator chunked(*model);
  go.prefill_chunk = 4;
  GenerateResult got_chunked = generate_greedy(chunked, prompt, go);
  EXPECT_EQ(got_chunked.generated_ids, want.generated);
  EXPECT_LT(test::max_abs_diff(got_chunked.logits, want.logits.data), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Synthetic, RoundTrip, ::testing::ValuesIn(variants()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace deltagen
