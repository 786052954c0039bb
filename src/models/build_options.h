// Every scenario switch of the builder lives in BuildOptions (one struct,
// like onnxruntime-genai's extra_options), so that a CLI flag, a test and a
// benchmark all say the same thing. The CLI flag of each field is named in
// its comment; docs/graph-optimizations.md measures what each one changes.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "deltagen/options.h"
#include "quant/quant_methods.h"

namespace deltagen {

// Weight storage: float, or block-quantized (com.microsoft.MatMulNBits).
enum class Precision { Fp32, Fp16, Bf16, Int4, Int8 };
// The float dtype of activations or of the linear-attention state.
enum class FloatType { Fp32, Fp16, Bf16 };
// How the Gated DeltaNet q/k L2 norm is written in the graph.
enum class L2Norm {
  LpNorm,      // one LpNormalization (x / |x|, upstream since #2127)
  LpNormEps,   // HF's x / sqrt(|x|^2 + 1e-6) exactly, as LpNormalization over x
               // padded with sqrt(1e-6) (Pad + LpNormalization + Slice)
  Decomposed,  // Mul, ReduceSum, Add(1e-6), Sqrt, Reciprocal, Mul (upstream before #2127)
};

// The CLI's spellings: "fp32", "int4", "lpnorm-eps", ... (parsing them is the
// CLI's job: tools/build_args.h).
const char* precision_name(Precision precision);
const char* float_type_name(FloatType type);
const char* l2norm_name(L2Norm form);
inline bool is_quantized(Precision p) { return p == Precision::Int4 || p == Precision::Int8; }

struct BuildOptions {
  // ---- precision ------------------------------------------------------------------
  // --precision: weight storage. fp32 | fp16 | bf16 store float weights;
  // int4 | int8 block-quantize every projection (com.microsoft.MatMulNBits).
  Precision precision = Precision::Fp32;
  // --activations: dtype of activations, KV cache and logits. None = the
  // precision's own (fp32 for int4/int8, like upstream's CPU builds); only
  // quantized builds may choose (int4 + fp16 = upstream's q4f16 graph).
  std::optional<FloatType> activations;
  // --state-dtype: linear-attention conv + recurrent state. HF keeps it fp32;
  // upstream uses the activation dtype.
  FloatType state_dtype = FloatType::Fp32;
  // --block-size, --asymmetric, --accuracy-level: MatMulNBits settings.
  int64_t block_size = 32;
  bool asymmetric = false;   // false: symmetric, no zero points (ORT's default quantizer)
  int64_t accuracy_level = 4;  // 4 = int8 activations in the CPU kernel (fastest on CPU)
  // --keep-lm-head: lm_head (and a tied embedding) in another precision than
  // the layers; none = like the layers.
  std::optional<Precision> lm_head_precision;
  // --linear-attn-bits: 8 keeps every Gated DeltaNet projection in int8 in an
  // int4 build (upstream's k_quant_linear selector without its MLP part); 0 = like the layers.
  int64_t linear_attn_bits = 0;
  // --embedding-gather float: in a quantized build, keep a float embedding
  // table (upstream's default) instead of reading a block-quantized one with
  // GatherBlockQuantized: the lm_head's own when tied (stored once), its own
  // quantized copy when untied. The embedding is quantized like the lm_head.
  bool quantized_embedding_gather = true;
  // --embedding fp32|fp16|int8|int4: the embedding table's own format, apart
  // from the lm_head's (a quantized build only). A token reads one row of the
  // table but the whole lm_head, so the table costs file bytes, not decode
  // bandwidth. On a tied checkpoint a format other than the lm_head's unties
  // them: the lm_head gets its own weight (fitted for the lm_head alone) and
  // the embedding its own table. none = today's rule (the table follows the lm_head).
  std::optional<Precision> embedding_precision;

  // ---- how quantized blocks are fitted (quant/quant_methods.h, docs/quantization.md) ----
  // --quant-method rtn|search|gptq: round to nearest, scale search, or GPTQ's
  // error feedback (needs --calibration); awq is refused.
  quant::QuantMethod quant_method = quant::QuantMethod::Rtn;
  // --calibration TEXT_FILE: text run through the float64 reference, so that
  // errors are weighted by what each projection's inputs look like (encoded
  // with the checkpoint's tokenizer.json). --calibration-tokens: how many of its tokens.
  std::filesystem::path calibration;
  int64_t calibration_tokens = 1024;
  // --memory-limit GB: the memory calibration may use; a calibration
  // predicted to need more is refused before it starts. 0 = what the machine
  // has available (MemAvailable).
  int64_t memory_limit = 0;
  // --bits-budget B: mixed precision: each group of projections that reads one
  // input gets int4 (the build's block size or coarser) or int8 by its
  // measured effect on KL, within B bits per weight on average (scales and
  // zero points counted; over the weights a decoded token reads, or those
  // stored: --budget-of). Needs --precision int4 and --calibration. 0 = off.
  double bits_budget = 0;
  // --budget-of read|file: what --bits-budget averages over. read (default):
  // the weights one decoded token reads (every projection, the lm_head, one
  // embedding row); file: the weights stored (a separate embedding table whole).
  enum class BudgetOf { Read, File };
  BudgetOf budget_of = BudgetOf::Read;

  // ---- graph I/O ------------------------------------------------------------------
  bool exclude_embeds = false;   // --exclude-embeds: input inputs_embeds [B,S,H] instead of input_ids
  bool exclude_lm_head = false;  // --exclude-lm-head: output hidden_states [B,S,H] instead of logits
  bool prune_lm_head = false;    // --prune-lm-head: logits of the last position only, [B,1,V]
  // --layer-outputs: also output the residual stream between layers,
  // hidden_states.0 .. hidden_states.N [B,S,H] (0 = the embeddings, k = after
  // layer k - 1, N before the final norm), for `deltagen compare --layers`.
  // The logits do not change; the generation loop does not fetch them.
  bool layer_outputs = false;
  // --no-mtp: leave a checkpoint's multi-token-prediction head out. With it
  // (the default when a dense checkpoint has one: mtp.*), the build also
  // writes mtp.onnx, which genai_config.json names, and the decoder also
  // outputs hidden_states [B,S,H] after its final norm, every position of a
  // run: what the head reads (docs/speculative.md).
  bool mtp = true;
  // --mtp-draft-vocab N: the head's lm_head keeps the first N token ids only
  // (0: all). A guess then reads N rows instead of the whole vocabulary
  // (0.8B int4: 127 MB -> 16 MB at N = 32768) and can only be one of them;
  // the decoder's verification keeps the output exactly the model's.
  int64_t mtp_draft_vocab = 0;
  // --vision: a VL checkpoint also gets vision.onnx and embedding.onnx, and
  // the decoder takes inputs_embeds and 3-D (T, H, W) position_ids [3, B, S]
  // for the interleaved M-RoPE (onnxruntime-genai's VL layout,
  // models/qwen35_vision.h). Off: the text model alone, as before.
  bool vision = false;
  // --vision-precision fp32|int8|int4: the tower's Linear weights (patch
  // embedding, blocks, merger) as fp32 MatMuls or block-quantized
  // MatMulNBits (symmetric, --block-size, accuracy level 4; int4 runs on
  // deltagen's kernels). Everything else in vision.onnx stays fp32.
  Precision vision_precision = Precision::Fp32;

  // ---- the two upstream optimizations (defaults) and their old forms --------------
  // --norm-upcast: Cast every RMSNorm input to fp32 and its outputs back, with
  // fp32 norm weights (upstream before #2101). No effect when activations are fp32.
  bool norm_upcast = false;
  // --l2norm lpnorm|lpnorm-eps|decomposed: Gated DeltaNet q/k L2 norm.
  L2Norm l2norm = L2Norm::LpNorm;

  // ---- further cuts (defaults) and their old forms ---------------------------------
  bool q_scale_mul = false;         // --q-scale-mul: separate Mul by 1/sqrt(dk) instead of LinearAttention's scale
  bool conv_channels_last = false;  // --conv-channels-last: CausalConvWithState on [B,S,C], no Transposes; the
                                    // conv_state I/O becomes [B, K-1, C] (so it is opt-in)
  bool rotary_in_attention = true;  // --no-rotary-in-attention: GroupQueryAttention applies the partial
                                    // rotary itself when rotary_dim is a multiple of 16 (its kernel's rule)
  bool fuse_projections = true;     // --no-fuse-projections: one MatMul(NBits) + Split per layer for
                                    // in_proj_{qkv,z,b,a}, q/k/v_proj and gate/up_proj
  bool linear_attention_gate = true;  // --no-linear-attention-gate: Add/Softplus/Mul/Sigmoid instead of
                                      // com.microsoft.LinearAttentionGate
  bool gated_rmsnorm = true;        // --no-gated-rmsnorm: Reshape/SimplifiedLayerNormalization/Reshape +
                                    // SiLU + Mul instead of com.microsoft.GatedRMSNorm

  // ---- target -----------------------------------------------------------------------
  // --target: the execution provider the model is for, written into
  // genai_config.json's provider_options (onnxruntime-genai's -e), which is
  // where deltagen and onnxruntime-genai run it unless told otherwise. The
  // CLI also picks that provider's usual build when --precision is not given
  // (int4 weights + fp16 activations, "q4f16", for webgpu and cuda).
  ExecutionProvider target = ExecutionProvider::Cpu;

  // ---- files and resources ------------------------------------------------------
  // Rows of the rotary cos/sin cache (the longest context the model serves);
  // 0 = config.max_position_embeddings. Also written as context_length and
  // search.max_length in genai_config.json. Positions must stay below it.
  int64_t context_length = 0;
  // Weights go to model.onnx.data when the total exceeds this many bytes
  // (always above 2 GB: protobuf's limit). External data keeps the writer's
  // memory at one tensor instead of the whole model.
  int64_t external_data_threshold = int64_t(64) << 20;
  bool show_progress = true;  // progress on stderr, only when stderr is a terminal
  int threads = 0;            // --threads: quantization/conversion threads; 0 = all cores
};

// Throws Error("--precision: ...") etc. for options no build can satisfy, so
// callers can reject them before touching any file.
void validate_build_options(const BuildOptions& opts);

// The options as build_model uses them (validated).
BuildOptions normalized_build_options(BuildOptions opts);

}  // namespace deltagen
