// The pieces of the Qwen3.5 text model in float64, one function per piece:
// the oracle that the reference forward pass (qwen35_reference.cpp) is built
// from and that every kernel test checks its kernel against. Keeping one copy
// of each formula means a kernel and the model can only agree with the
// definition, not with a second transcription of it.
//
// Plain loops on raw pointers, in place where the model updates in place; no
// shapes beyond the sizes passed. The math follows transformers'
// modeling_qwen3_5.py; shared/golden/README.md lists every detail.
#pragma once
#include <cstdint>
#include <vector>

namespace deltagen::ref {

// ---- scalar functions ----------------------------------------------------------

double sigmoid(double x);
double silu(double x);  // x * sigmoid(x)
// torch.nn.functional.softplus with its default threshold 20 (linear above it).
double softplus(double x);

// The vision tower's activations: GELU with the tanh approximation
// (gelu_pytorch_tanh, its blocks' MLP) and the exact one with erf (nn.GELU(),
// its patch merger). Both the text and the vision oracle live here so that a
// kernel test of either finds its formula in one place.
double gelu_tanh(double x);  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
double gelu_erf(double x);   // 0.5 x (1 + erf(x / sqrt(2)))

// x[i] = exp(x[i] - max) / sum_j exp(x[j] - max), in place.
void softmax(double* x, int64_t n);

// sum a[i] b[i], i < n.
double dot(const double* a, const double* b, int64_t n);

// ---- norms (in place on n values) ------------------------------------------------

// RMSNorm with a plain weight: x * rsqrt(mean(x^2) + eps) * w. What an ONNX
// SimplifiedLayerNormalization computes once the builder has folded 1 + w.
void rms_norm(double* x, const double* w, int64_t n, double eps);

// Offset RMSNorm (Qwen3_5RMSNorm): x * rsqrt(mean(x^2) + eps) * (1 + w). The
// checkpoint stores offsets from 1 (initialised to 0), hence the 1 + w.
void offset_rms_norm(double* x, const double* w, int64_t n, double eps);

// LayerNorm with weight and bias (the vision tower's norms):
// (x - mean) / sqrt(var + eps) * w + b, var the biased variance over n.
void layer_norm(double* x, const double* w, const double* b, int64_t n, double eps);

// Gated RMSNorm (Qwen3_5RMSNormGated) of one value head:
// x * rsqrt(mean(x^2) + eps) * w * silu(z); here w is a plain weight (init 1).
void gated_rms_norm(double* x, const double* z, const double* w, int64_t n, double eps);

// x / sqrt(sum(x^2) + eps). HF's delta rule uses eps 1e-6 on the *sum* of
// squares (not the mean); ONNX LpNormalization, which the kernels implement,
// has no eps (pass 0).
void l2_normalize(double* x, int64_t n, double eps);

// ---- rotary position embedding -----------------------------------------------------

// inv_freq[i] = theta^(-2i / rotary_dim), i < rotary_dim / 2: one frequency
// per rotated pair. Qwen3.5 rotates only rotary_dim = head_dim *
// partial_rotary_factor dims of each head (a quarter).
std::vector<double> rope_inv_freq(double theta, int64_t rotary_dim);

// Rotate-half on the first 2 * half dims of one head, in place: dim i pairs
// with dim i + half (not with its neighbour), both turned by the angle whose
// cosine and sine are cos[i], sin[i]. The dims from 2 * half on pass through.
void rotate_half(double* x, const double* cos, const double* sin, int64_t half);

// Partial RoPE at `position`: rotate_half with angles position * inv_freq[i].
// Qwen3.5's interleaved M-RoPE reduces to this for text, where the T/H/W
// position streams all equal the token position.
void rope(double* x, const std::vector<double>& inv_freq, int64_t position);

// Interleaved M-RoPE (Qwen3.5 with images): rotate_half with angles
// p_j * inv_freq[j], where p_j is the token's H position when j % 3 == 1 and
// j < 3 * section[1], its W position when j % 3 == 2 and j < 3 * section[2],
// and its T position otherwise (section = mrope_section [sT, sH, sW]). With
// pt == ph == pw this is rope(x, inv_freq, pt), bit for bit.
void mrope(double* x, const std::vector<double>& inv_freq, const int64_t section[3], int64_t pt, int64_t ph,
           int64_t pw);

// ---- Gated DeltaNet -------------------------------------------------------------------

// One token of one channel of the depthwise causal conv with carried state.
// window[K] holds the channel's last K inputs, oldest first (zeros before the
// first token; Hugging Face's conv-state layout): shift it left by one, put
// `input` last and return sum_j w[j] * window[j] (tap K-1 weighs the current
// token). No bias, no activation: the caller adds them.
double causal_conv_step(double* window, const double* w, int64_t K, double input);

// The per-token decay factor exp(g) of the recurrent state, with
// g = neg_exp_a * softplus(a + dt_bias) <= 0 and neg_exp_a = -exp(A_log).
double delta_decay(double neg_exp_a, double a, double dt_bias);

// One token of the gated delta rule on one value head's state S [dk][dv]
// (o = S^T q convention): S = decay * S; then move S^T k towards v by beta,
// S += k (beta (v - S^T k))^T; then out[dv] = S^T q, read from the updated
// state. q and k come already L2-normalised, q already scaled by 1/sqrt(dk);
// beta = sigmoid(b).
void delta_rule_step(double* S, const double* q, const double* k, const double* v, double beta, double decay,
                     int64_t dk, int64_t dv, double* out);

// ---- attention -----------------------------------------------------------------------------

// One query head's causal softmax attention over the first `visible` rows of
// its kv head's keys and values ([visible][hd] each, row-major):
// out[hd] = sum_j softmax_j(q . k_j * scale) v_j. Qwen3.5's scale is
// 1/sqrt(head_dim), the full head size, not rotary_dim.
void attend(const double* q, const double* keys, const double* values, int64_t visible, int64_t hd, double scale,
            double* out);

// Gated attention's output gate, in place: x[i] *= sigmoid(gate[i]).
void sigmoid_gate(double* x, const double* gate, int64_t n);

}  // namespace deltagen::ref
