// Fused CPU kernel for DualSKA's two branches (bidirectional Gated SFA and SKA), forward and backward.
//
// Eager PyTorch spends the attention step on ~100 passes over (B, H, T, T) tensors (cosines, the
// Gegenbauer terms, triangular masks, decay factors, softmax) and is bound by memory traffic. Here
// every (t, s) pair is computed in registers and nothing T x T is stored: the backward recomputes
// the row it needs. Eight (batch, head) rows run side by side in SIMD lanes (layout [block][t][j][lane]),
// each quantity one vector of the 8 rows (GCC/Clang vector types). The Gated-SFA path product
// prod gamma_r is built as a running product outward from the diagonal (one multiply per pair and
// degree, no exponentials, exact up to rounding); only the SKA softmax needs exponentials.
//
// Semantics (docs/math.md section 3, equal to gated_sfa.sfa_parallel / ska.ska_zonal, tested against the
// recurrent and explicit-feature references): with c = q_t . k_s, K_l = a_l P_l(c),
//   y_t  = sum_s h_ts sum_l K_l w_l(t, s) p_s,  h = 1 on the diagonal, 1/2 elsewhere,
//          w_l(t, s) = prod_{r = s+1..t} gamma_r (s <= t), prod_{r = t..s-1} gamma_r (s >= t);
//   cv_t = sum_s softmax_s(sum_l K_l / sqrt(D*)) p_s over valid keys (0 for a row with none).
// Query rows past the last valid token of every row in their block are padding and come out zero
// (valid positions, and every gradient, equal the references').
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include "simd.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace {

constexpr int W = 8;     // lanes: (batch, head) rows per block
constexpr int MAXL = 9;  // degrees 0..8

struct Coeffs {
  int L1;                 // L + 1
  double a[MAXL];         // a_l = N(k, l) / |S^{k-1}|
  double alpha[MAXL];     // P_{n+1} = alpha_n c P_n - beta_n P_{n-1}
  double beta[MAXL];
  double inv_sqrt_dim;
};

// One SIMD vector per quantity: the W lanes (rows of the block).
template <typename T>
using V = Simd<T, W>;
template <typename T>
inline V<T> ld(const T* p) { return simd_load<W>(p); }
template <typename T>
inline void st(T* p, V<T> v) { simd_store<W>(p, v); }
template <typename T>
inline V<T> splat(T x) { return V<T>{} + x; }
template <typename T>
inline V<T> vmax(V<T> a, V<T> b) { return a > b ? a : b; }

// exp of every lane, inputs <= 0 (softmax). float: Cody-Waite range reduction and a degree-6
// polynomial (rel. error ~2e-7) in plain vector arithmetic; double (tests) lane by lane.
template <typename T>
inline V<T> vexp(V<T> x) {
  V<T> out;
  for (int i = 0; i < W; ++i) out[i] = std::exp(x[i]);
  return out;
}

template <>
inline V<float> vexp<float>(V<float> x) {
  typedef int32_t VI __attribute__((vector_size(sizeof(int32_t) * W), aligned(sizeof(int32_t))));
  x = vmax<float>(x, splat<float>(-87.0f));
  // Round to nearest by the 1.5 * 2^23 trick (|x| < 88 here).
  const V<float> n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  V<float> r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  V<float> p = splat<float>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
  V<float> scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// Gegenbauer terms K_l = a_l P_l(c) and their derivatives dK_l/dc for one vector of cosines.
template <typename T, int LL>
inline void zonal(const Coeffs& cf, V<T> c, V<T>* K, V<T>* dK) {
  const int L1 = LL > 0 ? LL : cf.L1;
  V<T> P0 = splat<T>(1), P1 = c, D0 = V<T>{}, D1 = splat<T>(1);
  K[0] = splat<T>(T(cf.a[0]));
  dK[0] = V<T>{};
  if (L1 > 1) {
    K[1] = T(cf.a[1]) * c;
    dK[1] = splat<T>(T(cf.a[1]));
  }
  for (int n = 1; n + 1 < L1; ++n) {
    const T al = T(cf.alpha[n]), be = T(cf.beta[n]), an = T(cf.a[n + 1]);
    const V<T> P2 = al * c * P1 - be * P0;
    const V<T> D2 = al * (P1 + c * D1) - be * D0;
    P0 = P1; P1 = P2; D0 = D1; D1 = D2;
    K[n + 1] = an * P2;
    dK[n + 1] = an * D2;
  }
}

template <typename T>
struct Block {  // views of one block of W rows; arrays are [t][j][lane] / [t][l][lane] / [t][lane]
  const T *q, *k, *p, *gamma, *mask;
  int64_t Tn, Kd;
};

// Every key s of query row t, in the order t, t-1, ..., 0, then t+1, ..., T-1, so the Gated-SFA path
// products w_l(t, s) are a running product outward from the diagonal: fn(s, w).
template <typename T, int LL, typename Fn>
inline void decay_walk(const Coeffs& cf, const Block<T>& b, int64_t t, Fn&& fn) {
  const int L1 = LL > 0 ? LL : cf.L1;
  V<T> w[MAXL];
  for (int dir = 0; dir < 2; ++dir) {
    for (int l = 0; l < L1; ++l) w[l] = splat<T>(1);
    const int64_t start = dir == 0 ? t : t + 1, stop = dir == 0 ? -1 : b.Tn, step = dir == 0 ? -1 : 1;
    for (int64_t s = start; s != stop; s += step) {
      // Extend the path by one token: s < t multiplies gamma_{s+1}; s > t multiplies gamma_{s-1}.
      if (s != t) {
        const T* g = b.gamma + (dir == 0 ? s + 1 : s - 1) * L1 * W;
        for (int l = 0; l < L1; ++l) w[l] *= ld(g + l * W);
      }
      fn(s, static_cast<const V<T>*>(w));
    }
  }
}

// decay_walk with the cosines of the pairs: fn(s, c, w).
template <typename T, int KD, int LL, typename PairFn>
inline void row_pairs(const Coeffs& cf, const Block<T>& b, int64_t t, PairFn&& fn) {
  const int64_t Kd = KD > 0 ? KD : b.Kd;  // compile-time for the common sphere dimensions
  const T* qt = b.q + t * Kd * W;
  decay_walk<T, LL>(cf, b, t, [&](int64_t s, const V<T>* w) {
    const T* ks = b.k + s * Kd * W;
    V<T> c{};
    for (int64_t j = 0; j < Kd; ++j) c += ld(qt + j * W) * ld(ks + j * W);
    fn(s, c, w);
  });
}

template <typename T, int KD, int LL>
void forward_block(const Coeffs& cf, const Block<T>& b, T* y, T* cv, std::vector<T>& S) {
  const int64_t Tn = b.Tn;
  const int L1 = LL > 0 ? LL : cf.L1;
  const int64_t Kd = KD > 0 ? KD : b.Kd;
  constexpr int64_t KA = KD > 0 ? KD : 64;
  const T inv = T(cf.inv_sqrt_dim), ninf = -std::numeric_limits<T>::infinity();
  for (int64_t t = 0; t < Tn; ++t) {
    V<T> acc[KA];  // y_t, in registers when KD is known
    for (int64_t j = 0; j < Kd; ++j) acc[j] = V<T>{};
    row_pairs<T, KD, LL>(cf, b, t, [&](int64_t s, V<T> c, const V<T>* w) {
      V<T> K[MAXL], dK[MAXL];
      zonal<T, LL>(cf, c, K, dK);
      V<T> A{}, sc{};
      for (int l = 0; l < L1; ++l) {
        A += K[l] * w[l];
        sc += K[l];
      }
      A *= s == t ? T(1) : T(0.5);
      const T* ps = b.p + s * Kd * W;
      for (int64_t j = 0; j < Kd; ++j) acc[j] += A * ld(ps + j * W);
      st(S.data() + s * W, ld(b.mask + s * W) > T(0) ? sc * inv : splat<T>(ninf));
    });
    for (int64_t j = 0; j < Kd; ++j) st(y + (t * Kd + j) * W, acc[j]);
    // SKA: softmax over valid keys, then the weighted mean of p.
    V<T> mx = splat<T>(ninf), sum{};
    for (int64_t s = 0; s < Tn; ++s) mx = vmax<T>(mx, ld(S.data() + s * W));
    for (int64_t j = 0; j < Kd; ++j) acc[j] = V<T>{};
    for (int64_t s = 0; s < Tn; ++s) {
      const V<T> e = ld(b.mask + s * W) > T(0) ? vexp<T>(ld(S.data() + s * W) - mx) : V<T>{};
      sum += e;
      const T* ps = b.p + s * Kd * W;
      for (int64_t j = 0; j < Kd; ++j) acc[j] += e * ld(ps + j * W);
    }
    const V<T> rs = sum > T(0) ? T(1) / sum : V<T>{};
    for (int64_t j = 0; j < Kd; ++j) st(cv + (t * Kd + j) * W, acc[j] * rs);
  }
}

// Per-row scratch for the backward: the zonal terms of each pair (computed once per row).
template <typename T>
struct Scratch {
  std::vector<T> S, E, K, dK;
  Scratch(int64_t Tn, int L1) : S(Tn * W), E(Tn * L1 * W), K(Tn * L1 * W), dK(Tn * L1 * W) {}
};

template <typename T, int KD, int LL>
void backward_block(const Coeffs& cf, const Block<T>& b, const T* cv, const T* gy, const T* gcv, T* gq, T* gk,
                    T* gp, T* glg, Scratch<T>& sc) {
  const int64_t Tn = b.Tn;
  const int64_t Kd = KD > 0 ? KD : b.Kd;
  constexpr int64_t KA = KD > 0 ? KD : 64;
  const int L1 = LL > 0 ? LL : cf.L1;
  const T inv = T(cf.inv_sqrt_dim), ninf = -std::numeric_limits<T>::infinity();
  T *S = sc.S.data(), *E = sc.E.data(), *Kr = sc.K.data(), *dKr = sc.dK.data();
  for (int64_t t = 0; t < Tn; ++t) {
    // Pass 1: cosines -> zonal terms (kept for pass 2) and the softmax scores of row t.
    const T* qt = b.q + t * Kd * W;
    for (int64_t s = 0; s < Tn; ++s) {
      const T* ks = b.k + s * Kd * W;
      V<T> c{};
      for (int64_t j = 0; j < Kd; ++j) c += ld(qt + j * W) * ld(ks + j * W);
      V<T> K[MAXL], dK[MAXL];
      zonal<T, LL>(cf, c, K, dK);
      V<T> sum{};
      for (int l = 0; l < L1; ++l) {
        sum += K[l];
        st(Kr + (s * L1 + l) * W, K[l]);
        st(dKr + (s * L1 + l) * W, dK[l]);
      }
      st(S + s * W, ld(b.mask + s * W) > T(0) ? sum * inv : splat<T>(ninf));
    }
    V<T> mx = splat<T>(ninf), rsum{}, gdot{};
    for (int64_t s = 0; s < Tn; ++s) mx = vmax<T>(mx, ld(S + s * W));
    for (int64_t s = 0; s < Tn; ++s) {
      const V<T> e = ld(b.mask + s * W) > T(0) ? vexp<T>(ld(S + s * W) - mx) : V<T>{};
      st(S + s * W, e);  // S now holds unnormalised probabilities
      rsum += e;
    }
    rsum = rsum > T(0) ? T(1) / rsum : V<T>{};
    const T *gyt = gy + t * Kd * W, *gct = gcv + t * Kd * W, *cvt = cv + t * Kd * W;
    V<T> gyv[KA], gcv_[KA], gqt[KA];
    for (int64_t j = 0; j < Kd; ++j) {
      gyv[j] = ld(gyt + j * W);
      gcv_[j] = ld(gct + j * W);
      gdot += gcv_[j] * ld(cvt + j * W);
      gqt[j] = V<T>{};
    }
    // Pass 2, outward from the diagonal so the decay is a running product.
    decay_walk<T, LL>(cf, b, t, [&](int64_t s, const V<T>* w) {
      const T h = s == t ? T(1) : T(0.5);
      const T* ps = b.p + s * Kd * W;
      const T* K = Kr + s * L1 * W;
      const T* dK = dKr + s * L1 * W;
      V<T> gA{}, ga{}, A{}, gc{};
      for (int64_t j = 0; j < Kd; ++j) {
        const V<T> pj = ld(ps + j * W);
        gA += gyv[j] * pj;
        ga += gcv_[j] * pj;
      }
      for (int l = 0; l < L1; ++l) A += ld(K + l * W) * w[l];
      const V<T> alpha = ld(S + s * W) * rsum;
      const V<T> gS = alpha * (ga - gdot) * inv;
      A *= h;
      gA *= h;
      for (int l = 0; l < L1; ++l) {
        const V<T> Kl = ld(K + l * W);
        gc += (gA * w[l] + gS) * ld(dK + l * W);
        st(E + (s * L1 + l) * W, gA * Kl * w[l]);  // d loss / d log-path, degree l
      }
      T* gps = gp + s * Kd * W;
      T* gks = gk + s * Kd * W;
      const T* ks = b.k + s * Kd * W;
      for (int64_t j = 0; j < Kd; ++j) {
        st(gps + j * W, ld(gps + j * W) + A * gyv[j] + alpha * gcv_[j]);
        st(gks + j * W, ld(gks + j * W) + gc * ld(qt + j * W));
        gqt[j] += gc * ld(ks + j * W);
      }
    });
    for (int64_t j = 0; j < Kd; ++j) st(gq + (t * Kd + j) * W, ld(gq + (t * Kd + j) * W) + gqt[j]);
    // Path (s, t] for s < t: every r in it collects E(t, s); prefix sums over s give
    // sum_{s < r} E(t, s) for r = 1..t. Path [t, s) for s > t: suffix sums for r = t..T-2.
    for (int l = 0; l < L1; ++l) {
      V<T> acc{};
      for (int64_t r = 1; r <= t; ++r) {
        acc += ld(E + ((r - 1) * L1 + l) * W);
        st(glg + (r * L1 + l) * W, ld(glg + (r * L1 + l) * W) + acc);
      }
      acc = V<T>{};
      for (int64_t r = Tn - 2; r >= t; --r) {
        acc += ld(E + ((r + 1) * L1 + l) * W);
        st(glg + (r * L1 + l) * W, ld(glg + (r * L1 + l) * W) + acc);
      }
    }
  }
}

// Compile-time sphere dimension and degree count, float32, for the paper's default (k = 8, L = 2..4)
// and k = 6, 10 at L = 3 (loops unroll, accumulators stay in registers); every other shape (and
// float64) takes the generic build.
template <typename T, typename Fn>
void dispatch_kL(int64_t Kd, int L1, Fn&& fn) {
  using std::integral_constant;
  if constexpr (std::is_same_v<T, float>) {
    if (Kd == 8 && L1 == 4) return fn(integral_constant<int, 8>{}, integral_constant<int, 4>{});
    if (Kd == 8 && L1 == 3) return fn(integral_constant<int, 8>{}, integral_constant<int, 3>{});
    if (Kd == 8 && L1 == 5) return fn(integral_constant<int, 8>{}, integral_constant<int, 5>{});
    if (Kd == 6 && L1 == 4) return fn(integral_constant<int, 6>{}, integral_constant<int, 4>{});
    if (Kd == 10 && L1 == 4) return fn(integral_constant<int, 10>{}, integral_constant<int, 4>{});
  }
  fn(integral_constant<int, 0>{}, integral_constant<int, 0>{});
}

// Flush denormals to zero while a kernel runs: long decayed paths underflow through the denormal
// range, where x86 arithmetic is ~100x slower; the values lost are below 1e-38 (float).
struct FlushDenormals {
#if defined(__x86_64__) || defined(_M_X64)
  unsigned int saved;
  FlushDenormals() : saved(_mm_getcsr()) { _mm_setcsr(saved | 0x8040); }  // FTZ | DAZ
  ~FlushDenormals() { _mm_setcsr(saved); }
#endif
};

Coeffs make_coeffs(const std::vector<double>& a, const std::vector<double>& alpha, const std::vector<double>& beta,
                   double inv_sqrt_dim) {
  TORCH_CHECK(a.size() >= 1 && a.size() <= MAXL, "dual_ska_cpu: degree L must be in 0..", MAXL - 1);
  Coeffs cf{};
  cf.L1 = static_cast<int>(a.size());
  for (size_t i = 0; i < a.size(); ++i) cf.a[i] = a[i];
  for (size_t i = 0; i < alpha.size() && i < MAXL; ++i) { cf.alpha[i] = alpha[i]; cf.beta[i] = beta[i]; }
  cf.inv_sqrt_dim = inv_sqrt_dim;
  return cf;
}

// Layouts (no copies on the Python side): qkp (B, T, 3, H, k) is the raw output of the fused
// q/k/p projection (q, k unnormalised, p not yet masked); log-gates (B, H, T, L+1); mask (B, T);
// branch outputs (H, k, B*T), the feature-major layout the read-out consumes. Row r = b * H + h;
// block bi holds rows 8 bi .. 8 bi + 7 in its lanes. Each block gathers its rows into local
// [t][j][lane] buffers (normalising q and k, masking p) and scatters its results back.
struct Dims {
  int64_t B, T, H, K, L1;
  int64_t rows() const { return B * H; }
};

template <typename T>
struct Local {  // one block's gathered inputs
  std::vector<T> q, k, p, gamma, mask, rq, rk;
  Local(const Dims& d) : q(d.T * d.K * W), k(d.T * d.K * W), p(d.T * d.K * W), gamma(d.T * d.L1 * W),
                         mask(d.T * W), rq(d.T * W), rk(d.T * W) {}
};

template <typename T>
void gather_block(const Dims& d, int64_t bi, const T* qkp, const T* lg, const bool* mask, double eps, Local<T>& loc) {
  const int64_t T_ = d.T, K = d.K, H = d.H, L1 = d.L1;
  std::fill(loc.q.begin(), loc.q.end(), T(0));
  std::fill(loc.k.begin(), loc.k.end(), T(0));
  std::fill(loc.p.begin(), loc.p.end(), T(0));
  std::fill(loc.gamma.begin(), loc.gamma.end(), T(1));
  std::fill(loc.mask.begin(), loc.mask.end(), T(0));
  std::fill(loc.rq.begin(), loc.rq.end(), T(1));
  std::fill(loc.rk.begin(), loc.rk.end(), T(1));
  for (int i = 0; i < W; ++i) {
    const int64_t r = bi * W + i;
    if (r >= d.rows()) break;  // padding lanes stay zero (no valid keys: outputs zero)
    const int64_t b = r / H, h = r % H;
    for (int64_t t = 0; t < T_; ++t) {
      const bool valid = mask[b * T_ + t];
      const T* base = qkp + ((b * T_ + t) * 3 * H + h) * K;
      T nq = 0, nk = 0;
      for (int64_t j = 0; j < K; ++j) {
        nq += base[j] * base[j];
        nk += base[H * K + j] * base[H * K + j];
      }
      const T rq = std::max(std::sqrt(nq), T(eps)), rk = std::max(std::sqrt(nk), T(eps));
      loc.rq[t * W + i] = rq;
      loc.rk[t * W + i] = rk;
      for (int64_t j = 0; j < K; ++j) {
        loc.q[(t * K + j) * W + i] = base[j] / rq;
        loc.k[(t * K + j) * W + i] = base[H * K + j] / rk;
        loc.p[(t * K + j) * W + i] = valid ? base[2 * H * K + j] : T(0);
      }
      loc.mask[t * W + i] = valid ? T(1) : T(0);
      const T* g = lg + ((b * H + h) * T_ + t) * L1;
      for (int64_t l = 0; l < L1; ++l) loc.gamma[(t * L1 + l) * W + i] = std::exp(g[l]);
    }
  }
}

// One past the block's last valid token. Later positions are padding for every row of the block:
// their keys carry p = 0 (and are masked in SKA), and gradients never reach them, so the kernels
// skip them; their query rows come out zero. In a plain (unbucketed) batch this bounds the pair
// work by the block's own molecules (a block holds the heads of one or two) instead of the
// batch's longest SMILES.
template <typename T>
int64_t block_length(const Dims& d, const Local<T>& loc) {
  for (int64_t t = d.T - 1; t >= 0; --t)
    for (int i = 0; i < W; ++i)
      if (loc.mask[t * W + i] > T(0)) return t + 1;
  return 0;
}

// (H, k, B*T) <-> local [t][j][lane]
template <typename T>
void gather_fm(const Dims& d, int64_t bi, const T* src, std::vector<T>& dst) {
  std::fill(dst.begin(), dst.end(), T(0));
  const int64_t N = d.B * d.T;
  for (int i = 0; i < W; ++i) {
    const int64_t r = bi * W + i;
    if (r >= d.rows()) break;
    const int64_t b = r / d.H, h = r % d.H;
    for (int64_t j = 0; j < d.K; ++j)
      for (int64_t t = 0; t < d.T; ++t) dst[(t * d.K + j) * W + i] = src[(h * d.K + j) * N + b * d.T + t];
  }
}

template <typename T>
void scatter_fm(const Dims& d, int64_t bi, const std::vector<T>& src, T* dst) {
  const int64_t N = d.B * d.T;
  for (int i = 0; i < W; ++i) {
    const int64_t r = bi * W + i;
    if (r >= d.rows()) break;
    const int64_t b = r / d.H, h = r % d.H;
    for (int64_t j = 0; j < d.K; ++j)
      for (int64_t t = 0; t < d.T; ++t) dst[(h * d.K + j) * N + b * d.T + t] = src[(t * d.K + j) * W + i];
  }
}

Dims check_inputs(const torch::Tensor& qkp, const torch::Tensor& lg, const torch::Tensor& mask, const Coeffs& cf) {
  TORCH_CHECK(qkp.dim() == 5 && qkp.size(2) == 3 && qkp.is_contiguous(), "dual_ska_cpu: qkp must be contiguous (B, T, 3, H, k)");
  Dims d{qkp.size(0), qkp.size(1), qkp.size(3), qkp.size(4), cf.L1};
  TORCH_CHECK(d.K <= 64, "dual_ska_cpu: sphere dimension k must be <= 64");
  TORCH_CHECK(lg.is_contiguous() && lg.dim() == 4 && lg.size(0) == d.B && lg.size(1) == d.H && lg.size(2) == d.T &&
              lg.size(3) == d.L1, "dual_ska_cpu: log-gates must be contiguous (B, H, T, L+1)");
  TORCH_CHECK(mask.is_contiguous() && mask.scalar_type() == torch::kBool && mask.size(0) == d.B && mask.size(1) == d.T,
              "dual_ska_cpu: mask must be a contiguous bool (B, T) tensor");
  TORCH_CHECK(lg.scalar_type() == qkp.scalar_type(), "dual_ska_cpu: dtypes differ");
  return d;
}

}  // namespace

// Returns y_sfa and cv, each (H, k, B*T).
std::vector<torch::Tensor> dual_ska_forward(torch::Tensor qkp, torch::Tensor lg, torch::Tensor mask,
                                            std::vector<double> a, std::vector<double> alpha,
                                            std::vector<double> beta, double inv_sqrt_dim, double eps) {
  const Coeffs cf = make_coeffs(a, alpha, beta, inv_sqrt_dim);
  const Dims d = check_inputs(qkp, lg, mask, cf);
  auto y = torch::empty({d.H, d.K, d.B * d.T}, qkp.options()), cv = torch::empty_like(y);
  const int64_t nb = (d.rows() + W - 1) / W;
  AT_DISPATCH_FLOATING_TYPES(qkp.scalar_type(), "dual_ska_forward", [&] {
    using T = scalar_t;
    dispatch_kL<T>(d.K, cf.L1, [&](auto kd, auto ll) {
      at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
        FlushDenormals ftz;
        Local<T> loc(d);
        std::vector<T> S(d.T * W), yb(d.T * d.K * W), cb(d.T * d.K * W);
        for (int64_t bi = b0; bi < b1; ++bi) {
          gather_block<T>(d, bi, qkp.data_ptr<T>(), lg.data_ptr<T>(), mask.data_ptr<bool>(), eps, loc);
          const int64_t Tb = block_length<T>(d, loc);
          std::fill(yb.begin() + Tb * d.K * W, yb.end(), T(0));
          std::fill(cb.begin() + Tb * d.K * W, cb.end(), T(0));
          Block<T> blk{loc.q.data(), loc.k.data(), loc.p.data(), loc.gamma.data(), loc.mask.data(), Tb, d.K};
          forward_block<T, decltype(kd)::value, decltype(ll)::value>(cf, blk, yb.data(), cb.data(), S);
          scatter_fm<T>(d, bi, yb, y.data_ptr<T>());
          scatter_fm<T>(d, bi, cb, cv.data_ptr<T>());
        }
      });
    });
  });
  return {y, cv};
}

// Returns the gradients wrt qkp (B, T, 3, H, k) (through the normalisation of q and k and the
// masking of p) and wrt the log-gates (B, H, T, L+1).
std::vector<torch::Tensor> dual_ska_backward(torch::Tensor qkp, torch::Tensor lg, torch::Tensor mask, torch::Tensor cv,
                                             torch::Tensor gy, torch::Tensor gcv, std::vector<double> a,
                                             std::vector<double> alpha, std::vector<double> beta, double inv_sqrt_dim,
                                             double eps) {
  const Coeffs cf = make_coeffs(a, alpha, beta, inv_sqrt_dim);
  const Dims d = check_inputs(qkp, lg, mask, cf);
  for (auto* x : {&cv, &gy, &gcv})
    TORCH_CHECK(x->is_contiguous() && x->dim() == 3 && x->size(0) == d.H && x->size(1) == d.K && x->size(2) == d.B * d.T,
                "dual_ska_cpu: branch tensors must be contiguous (H, k, B*T)");
  auto g_qkp = torch::zeros_like(qkp), g_lg = torch::zeros_like(lg);
  const int64_t nb = (d.rows() + W - 1) / W;
  AT_DISPATCH_FLOATING_TYPES(qkp.scalar_type(), "dual_ska_backward", [&] {
    using T = scalar_t;
    dispatch_kL<T>(d.K, cf.L1, [&](auto kd, auto ll) {
      at::parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
        FlushDenormals ftz;
        Local<T> loc(d);
        Scratch<T> scratch(d.T, cf.L1);
        const int64_t n = d.T * d.K * W;
        std::vector<T> cvb(n), gyb(n), gcb(n), gq(n), gk(n), gp(n), glg(d.T * cf.L1 * W);
        for (int64_t bi = b0; bi < b1; ++bi) {
          gather_block<T>(d, bi, qkp.data_ptr<T>(), lg.data_ptr<T>(), mask.data_ptr<bool>(), eps, loc);
          gather_fm<T>(d, bi, cv.data_ptr<T>(), cvb);
          gather_fm<T>(d, bi, gy.data_ptr<T>(), gyb);
          gather_fm<T>(d, bi, gcv.data_ptr<T>(), gcb);
          std::fill(gq.begin(), gq.end(), T(0));
          std::fill(gk.begin(), gk.end(), T(0));
          std::fill(gp.begin(), gp.end(), T(0));
          std::fill(glg.begin(), glg.end(), T(0));
          Block<T> blk{loc.q.data(), loc.k.data(), loc.p.data(), loc.gamma.data(), loc.mask.data(),
                       block_length<T>(d, loc), d.K};
          backward_block<T, decltype(kd)::value, decltype(ll)::value>(cf, blk, cvb.data(), gyb.data(), gcb.data(),
                                                                      gq.data(), gk.data(), gp.data(), glg.data(), scratch);
          // Scatter, through x = z / max(|z|, eps): tangential part / |z| (plain 1/eps where clamped).
          T* G = g_qkp.data_ptr<T>();
          T* GL = g_lg.data_ptr<T>();
          for (int i = 0; i < W; ++i) {
            const int64_t r = bi * W + i;
            if (r >= d.rows()) break;
            const int64_t b = r / d.H, h = r % d.H;
            for (int64_t t = 0; t < d.T; ++t) {
              const bool valid = loc.mask[t * W + i] > T(0);
              T* base = G + ((b * d.T + t) * 3 * d.H + h) * d.K;
              T dq = 0, dk = 0;
              for (int64_t j = 0; j < d.K; ++j) {
                dq += gq[(t * d.K + j) * W + i] * loc.q[(t * d.K + j) * W + i];
                dk += gk[(t * d.K + j) * W + i] * loc.k[(t * d.K + j) * W + i];
              }
              const T rq = loc.rq[t * W + i], rk = loc.rk[t * W + i];
              const bool cq = rq > T(eps), ck = rk > T(eps);
              for (int64_t j = 0; j < d.K; ++j) {
                const int64_t o = (t * d.K + j) * W + i;
                base[j] = cq ? (gq[o] - loc.q[o] * dq) / rq : gq[o] / T(eps);
                base[d.H * d.K + j] = ck ? (gk[o] - loc.k[o] * dk) / rk : gk[o] / T(eps);
                base[2 * d.H * d.K + j] = valid ? gp[o] : T(0);
              }
              T* gl = GL + ((b * d.H + h) * d.T + t) * cf.L1;
              for (int64_t l = 0; l < cf.L1; ++l) gl[l] = glg[(t * cf.L1 + l) * W + i];
            }
          }
        }
      });
    });
  });
  return {g_qkp, g_lg};
}
