// gated_delta_net_impl.h compiled with the AVX-512 flags (CMakeLists.txt);
// called only when cpu_features() says this CPU has them. For value heads of
// up to 128 (a multiple of 16; Qwen3.5 has 128) the recurrence keeps a row's
// worth of delta and o in registers: the compiler's version of the same loops
// went through memory for both on every row of S and ran ~3x slower.
// GCC 12's AVX-512 intrinsic headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders (GCC bug 105593), here in the fp16 state
// conversions; nothing is uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/gated_delta_net_impl.h"

namespace deltagen::kernels {
namespace {

// A row of 16 state values, as fp32 in registers, from fp32 or IEEE-half storage.
template <typename T>
inline __m512 load16(const T* p) {
  if constexpr (sizeof(T) == 2)
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  else
    return _mm512_loadu_ps(p);
}
template <typename T>
inline void store16(T* p, __m512 v) {
  if constexpr (sizeof(T) == 2)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  else
    _mm512_storeu_ps(p, v);
}

// V = dv / 16 zmm registers per row of S. T = float, or uint16_t for an fp16
// state run directly (one token: the same arithmetic as widening it first,
// then rounding the result back, without the scratch's two extra passes).
// Prefetching works in bytes: `next` holds `next_rows` rows of 16 V floats'
// worth of bytes (delta_rule_loops).
template <int V, typename T>
void delta_rule_registers(T* state, const float* q, const float* k, const float* v, float decay, float beta,
                          float* o, int64_t dk, bool cold, const void* next, int64_t next_rows) {
  constexpr int64_t kRowBytes = V * 16 * int64_t(sizeof(T)), kPrefetchBytes = kPrefetchFloats * 4;
  const char* bytes = reinterpret_cast<const char*>(state);
  const char* next_bytes = static_cast<const char*>(next);
  const int64_t next_lines_per_row = (V * 64 + 63) / 64;  // next_rows rows of V*64 bytes
  __m512 acc[V];
  for (int r = 0; r < V; ++r) acc[r] = _mm512_setzero_ps();
  if (cold)
    for (int64_t f = 0; f < std::min<int64_t>(dk * kRowBytes, kPrefetchBytes); f += 64) _mm_prefetch(bytes + f, _MM_HINT_T0);
  for (int64_t i = 0; i < dk; ++i) {  // acc = S^T k
    const T* srow = state + i * V * 16;
    if (cold)
      for (int64_t f = 0; f < kRowBytes; f += 64) _mm_prefetch(bytes + i * kRowBytes + kPrefetchBytes + f, _MM_HINT_T0);
    const __m512 ki = _mm512_set1_ps(k[i]);
    for (int r = 0; r < V; ++r) acc[r] = _mm512_fmadd_ps(load16(srow + 16 * r), ki, acc[r]);
  }
  const __m512 vdecay = _mm512_set1_ps(decay), vbeta = _mm512_set1_ps(beta);
  __m512 delta[V];
  for (int r = 0; r < V; ++r)  // beta (v - decay S^T k)
    delta[r] = _mm512_mul_ps(vbeta, _mm512_fnmadd_ps(vdecay, acc[r], _mm512_loadu_ps(v + 16 * r)));
  for (int r = 0; r < V; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < dk; ++i) {  // S = decay S + k delta^T;  acc = S^T q
    T* srow = state + i * V * 16;
    if (next_bytes && i < next_rows)
      for (int64_t l = 0; l < next_lines_per_row; ++l) _mm_prefetch(next_bytes + (i * next_lines_per_row + l) * 64, _MM_HINT_T0);
    const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
    for (int r = 0; r < V; ++r) {
      const __m512 updated = _mm512_fmadd_ps(vdecay, load16(srow + 16 * r), _mm512_mul_ps(ki, delta[r]));
      store16(srow + 16 * r, updated);
      acc[r] = _mm512_fmadd_ps(updated, qi, acc[r]);
    }
  }
  for (int r = 0; r < V; ++r) _mm512_storeu_ps(o + 16 * r, acc[r]);
}

// Several tokens in a row on a state in cache (fp32; a prompt, a verify
// run): token j's update pass also computes S_j^T k_{j+1}, the first pass of
// token j + 1, so n tokens take n + 1 passes over S instead of 2n. Every
// value is computed by the same instructions in the same order as
// delta_rule_registers token by token (the next token's sum reads the
// updated row from a register instead of from memory: the same float), so
// the results are bit-identical to it.
template <int V>
void delta_rule_tokens_registers(float* state, const DeltaTokens& t, int64_t dk, bool cold, const float* next,
                                 int64_t next_rows) {
  constexpr int64_t kRowBytes = V * 64, kPrefetchBytes = kPrefetchFloats * 4;
  const char* bytes = reinterpret_cast<const char*>(state);
  const char* next_bytes = reinterpret_cast<const char*>(next);
  __m512 kv[V];  // S^T k of the token about to run
  for (int r = 0; r < V; ++r) kv[r] = _mm512_setzero_ps();
  if (cold)
    for (int64_t f = 0; f < std::min<int64_t>(dk * kRowBytes, kPrefetchBytes); f += 64) _mm_prefetch(bytes + f, _MM_HINT_T0);
  for (int64_t i = 0; i < dk; ++i) {
    const float* srow = state + i * V * 16;
    if (cold)
      for (int64_t f = 0; f < kRowBytes; f += 64) _mm_prefetch(bytes + i * kRowBytes + kPrefetchBytes + f, _MM_HINT_T0);
    const __m512 ki = _mm512_set1_ps(t.k[i]);
    for (int r = 0; r < V; ++r) kv[r] = _mm512_fmadd_ps(_mm512_loadu_ps(srow + 16 * r), ki, kv[r]);
  }
  for (int64_t j = 0; j < t.n; ++j) {
    const float *k = t.k + j * dk, *q = t.q + j * dk, *v = t.v + j * t.v_stride;
    const float* k_next = j + 1 < t.n ? t.k + (j + 1) * dk : nullptr;
    const __m512 vdecay = _mm512_set1_ps(t.decay[j]), vbeta = _mm512_set1_ps(t.beta[j]);
    __m512 delta[V], acc[V];
    for (int r = 0; r < V; ++r) {  // beta (v - decay S^T k)
      delta[r] = _mm512_mul_ps(vbeta, _mm512_fnmadd_ps(vdecay, kv[r], _mm512_loadu_ps(v + 16 * r)));
      acc[r] = kv[r] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < dk; ++i) {  // S = decay S + k delta^T;  acc = S^T q;  kv = S^T k_next
      float* srow = state + i * V * 16;
      if (j == 0 && next_bytes && i < next_rows)
        for (int64_t l = 0; l < V; ++l) _mm_prefetch(next_bytes + (i * V + l) * 64, _MM_HINT_T0);
      const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
      if (k_next) {
        const __m512 kn = _mm512_set1_ps(k_next[i]);
        for (int r = 0; r < V; ++r) {
          const __m512 updated = _mm512_fmadd_ps(vdecay, _mm512_loadu_ps(srow + 16 * r), _mm512_mul_ps(ki, delta[r]));
          _mm512_storeu_ps(srow + 16 * r, updated);
          acc[r] = _mm512_fmadd_ps(updated, qi, acc[r]);
          kv[r] = _mm512_fmadd_ps(updated, kn, kv[r]);
        }
      } else {
        for (int r = 0; r < V; ++r) {
          const __m512 updated = _mm512_fmadd_ps(vdecay, _mm512_loadu_ps(srow + 16 * r), _mm512_mul_ps(ki, delta[r]));
          _mm512_storeu_ps(srow + 16 * r, updated);
          acc[r] = _mm512_fmadd_ps(updated, qi, acc[r]);
        }
      }
    }
    for (int r = 0; r < V; ++r) _mm512_storeu_ps(t.o + j * V * 16 + 16 * r, acc[r]);
  }
}

bool delta_rule_tokens_avx512(float* state, const DeltaTokens& t, int64_t dk, int64_t dv, bool cold, const float* next,
                              int64_t next_rows) {
  switch (dv) {
    case 16: delta_rule_tokens_registers<1>(state, t, dk, cold, next, next_rows); return true;
    case 32: delta_rule_tokens_registers<2>(state, t, dk, cold, next, next_rows); return true;
    case 64: delta_rule_tokens_registers<4>(state, t, dk, cold, next, next_rows); return true;
    case 128: delta_rule_tokens_registers<8>(state, t, dk, cold, next, next_rows); return true;
    default: return false;
  }
}

void delta_rule_avx512(float* state, const float* q, const float* k, const float* v, float decay, float beta,
                       float* o, int64_t dk, int64_t dv, bool cold, const float* next, int64_t next_rows) {
  switch (dv) {
    case 16: return delta_rule_registers<1>(state, q, k, v, decay, beta, o, dk, cold, next, next_rows);
    case 32: return delta_rule_registers<2>(state, q, k, v, decay, beta, o, dk, cold, next, next_rows);
    case 64: return delta_rule_registers<4>(state, q, k, v, decay, beta, o, dk, cold, next, next_rows);
    case 128: return delta_rule_registers<8>(state, q, k, v, decay, beta, o, dk, cold, next, next_rows);
    default: return delta_rule_loops(state, q, k, v, decay, beta, o, dk, dv, cold, next, next_rows);
  }
}

// One token on an fp16 state in place, for the register-blocked head dims.
bool delta_rule_f16_avx512(uint16_t* state, const float* q, const float* k, const float* v, float decay, float beta,
                           float* o, int64_t dk, int64_t dv, const uint16_t* next) {
  const int64_t next_rows = (dk + 1) / 2;  // half-size rows, in fp32 rows' bytes
  switch (dv) {
    case 16: delta_rule_registers<1>(state, q, k, v, decay, beta, o, dk, true, next, next_rows); return true;
    case 32: delta_rule_registers<2>(state, q, k, v, decay, beta, o, dk, true, next, next_rows); return true;
    case 64: delta_rule_registers<4>(state, q, k, v, decay, beta, o, dk, true, next, next_rows); return true;
    case 128: delta_rule_registers<8>(state, q, k, v, decay, beta, o, dk, true, next, next_rows); return true;
    default: return false;
  }
}

// Lane tables for a 3-way (de)interleave of 16 channels' conv state
// [c][3] = 48 floats in three registers: tap j of channel m is at 3m + j.
struct Interleave3 {
  __m512i gather_ab[3], gather_c[3];   // per tap: indices into a|b, then into c
  __mmask16 from_c[3];
  __m512i scatter_01[3], scatter_2[3];  // per output register: indices into P0|P1, then into P2
  __mmask16 from_2[3];
  Interleave3() {
    alignas(64) int32_t ab[16], c[16];
    for (int j = 0; j < 3; ++j) {
      uint32_t mask = 0;
      for (int m = 0; m < 16; ++m) {
        const int e = 3 * m + j;
        ab[m] = e < 32 ? e : 0;
        c[m] = e < 32 ? 0 : e - 32;
        if (e >= 32) mask |= 1u << m;
      }
      gather_ab[j] = _mm512_load_si512(ab);
      gather_c[j] = _mm512_load_si512(c);
      from_c[j] = __mmask16(mask);
    }
    for (int r = 0; r < 3; ++r) {  // output register r holds flat elements 16r .. 16r+15
      uint32_t mask = 0;
      for (int l = 0; l < 16; ++l) {
        const int e = 16 * r + l, m = e / 3, j = e % 3;
        ab[l] = j == 0 ? m : j == 1 ? 16 + m : 0;
        c[l] = j == 2 ? m : 0;
        if (j == 2) mask |= 1u << l;
      }
      scatter_01[r] = _mm512_load_si512(ab);
      scatter_2[r] = _mm512_load_si512(c);
      from_2[r] = __mmask16(mask);
    }
  }
};

// Decode (one token) with Qwen3.5's kernel of 4: 16 channels per step, the
// state's [c][3] layout (de)interleaved in registers instead of one scalar
// load and store per tap.
void conv_silu_avx512(const GatedDeltaShape& s, const GatedDeltaTensors& t, int64_t c0, int64_t c1, float* xc) {
  if (s.seq != 1 || !t.conv_past || s.conv_kernel != 4 || c0 % 16 != 0)
    return conv_silu_range(s, t, c0, c1, xc);
  static const Interleave3 lanes;
  const int64_t c = s.conv_dim(), vector_end = c0 + (c1 - c0) / 16 * 16;
  const float* w = t.conv_w_t;
  for (int64_t row = 0; row < s.batch; ++row) {
    const float* x = t.x + row * t.x_stride(s);
    const float* past = t.conv_past + row * c * 3;
    float* present = t.conv_present + row * c * 3;
    float* y = xc + row * c;
    for (int64_t ch = c0; ch < vector_end; ch += 16) {
      const __m512 a = _mm512_loadu_ps(past + 3 * ch), b = _mm512_loadu_ps(past + 3 * ch + 16),
                   cc = _mm512_loadu_ps(past + 3 * ch + 32);
      __m512 tap[3];
      for (int j = 0; j < 3; ++j)
        tap[j] = _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(a, lanes.gather_ab[j], b), lanes.from_c[j],
                                            lanes.gather_c[j], cc);
      const __m512 xv = _mm512_loadu_ps(x + ch);
      // conv_silu_range's order and operations (a multiply, then an add; no
      // FMA): a decode step gives the bits of that token in a prompt.
      __m512 acc = _mm512_setzero_ps();
      for (int j = 0; j < 3; ++j) acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(w + j * c + ch), tap[j]));
      acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(w + 3 * c + ch), xv));
      _mm512_storeu_ps(y + ch, acc);
      // present = (tap 1, tap 2, x) per channel
      for (int r = 0; r < 3; ++r)
        _mm512_storeu_ps(present + 3 * ch + 16 * r,
                         _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(tap[1], lanes.scatter_01[r], tap[2]),
                                                    lanes.from_2[r], lanes.scatter_2[r], xv));
    }
  }
  if (vector_end < c1) {
    GatedDeltaShape tail = s;
    conv_silu_range(tail, t, vector_end, c1, xc);  // also applies SiLU to its own channels
  }
  for (int64_t row = 0; row < s.batch; ++row) silu_loop(xc + row * c + c0, vector_end - c0);
}

void heads_avx512(const GatedDeltaHeadArgs& args, int64_t row, int64_t h0, int64_t h1) {
  gated_delta_heads(args, row, h0, h1, delta_rule_avx512, delta_rule_tokens_avx512, delta_rule_f16_avx512);
}

}  // namespace

const GatedDeltaKernels kGatedDeltaAvx512{KernelLevel::Avx512, conv_silu_avx512, silu_loop, heads_avx512, widen_f16,
                                          narrow_f16};

}  // namespace deltagen::kernels
