// Fused CPU kernel for DualSKA's two branches (bidirectional Gated SFA and SKA), forward and backward.
//
// Eager PyTorch spends the attention step on ~100 passes over (B, H, T, T) tensors (cosines, the
// Gegenbauer terms, triangular masks, decay factors, softmax) and is bound by memory traffic. Here
// every (t, s) pair is computed in registers and nothing T x T is stored: the backward recomputes
// the row it needs. Eight (batch, head) rows run side by side in SIMD lanes (layout [block][t][j][lane]),
// so every inner loop is a fixed 8-wide loop the compiler vectorises. The Gated-SFA path product
// prod gamma_r is built as a running product outward from the diagonal (one multiply per pair and
// degree, no exponentials, exact up to rounding); only the SKA softmax needs exponentials.
//
// Semantics (DESIGN.md section 2, equal to gated_sfa.sfa_parallel / ska.ska_zonal, tested against the
// recurrent and explicit-feature references): with c = q_t . k_s, K_l = a_l P_l(c),
//   y_t  = sum_s h_ts sum_l K_l w_l(t, s) p_s,  h = 1 on the diagonal, 1/2 elsewhere,
//          w_l(t, s) = prod_{r = s+1..t} gamma_r (s <= t), prod_{r = t..s-1} gamma_r (s >= t);
//   cv_t = sum_s softmax_s(sum_l K_l / sqrt(D*)) p_s over valid keys (0 for a row with none).
#include <torch/extension.h>
#include <ATen/Parallel.h>

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

template <typename T>
inline T fast_exp(T x) {
  return std::exp(x);
}

// exp for float lanes: Cody-Waite range reduction and a degree-6 polynomial (rel. error ~2e-7),
// plain arithmetic so the 8-lane loops vectorise (std::exp would not). Inputs are <= 0 here.
template <>
inline float fast_exp<float>(float x) {
  x = x < -87.0f ? -87.0f : x;
  // Round to nearest by the 1.5 * 2^23 trick (plain adds, so it vectorises; |x| < 88 here).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(float));
  return p * scale;
}

// Gegenbauer terms K_l = a_l P_l(c) and their derivatives dK_l/dc for one lane vector of cosines.
template <typename T, int LL>
inline void zonal(const Coeffs& cf, const T* c, T (*K)[W], T (*dK)[W]) {
  const int L1 = LL > 0 ? LL : cf.L1;
  T P0[W], P1[W], D0[W], D1[W];
  for (int i = 0; i < W; ++i) {
    P0[i] = T(1); P1[i] = c[i]; D0[i] = T(0); D1[i] = T(1);
  }
  for (int i = 0; i < W; ++i) { K[0][i] = T(cf.a[0]); dK[0][i] = T(0); }
  if (L1 > 1)
    for (int i = 0; i < W; ++i) { K[1][i] = T(cf.a[1]) * c[i]; dK[1][i] = T(cf.a[1]); }
  for (int n = 1; n + 1 < L1; ++n) {
    const T al = T(cf.alpha[n]), be = T(cf.beta[n]), an = T(cf.a[n + 1]);
    for (int i = 0; i < W; ++i) {
      const T P2 = al * c[i] * P1[i] - be * P0[i];
      const T D2 = al * (P1[i] + c[i] * D1[i]) - be * D0[i];
      P0[i] = P1[i]; P1[i] = P2; D0[i] = D1[i]; D1[i] = D2;
      K[n + 1][i] = an * P2;
      dK[n + 1][i] = an * D2;
    }
  }
}

template <typename T>
struct Block {  // views of one block of 8 rows; arrays are [t][j][lane] / [t][l][lane] / [t][lane]
  const T *q, *k, *p, *gamma, *mask;
  int64_t Tn, Kd;
};

// One query row t: fills the SKA scores S[s] (masked keys: -inf), the SFA output y_t and
// (optionally) per-pair values for the backward. Order of s: t, t-1, ..., 0, then t+1, ..., T-1,
// so the decay is a running product outward from the diagonal.
template <typename T, int KD, int LL, typename PairFn>
inline void row_pairs(const Coeffs& cf, const Block<T>& b, int64_t t, PairFn&& fn) {
  const int64_t Tn = b.Tn;
  const int L1 = LL > 0 ? LL : cf.L1;
  const int64_t Kd = KD > 0 ? KD : b.Kd;  // compile-time for the common sphere dimensions
  T w[MAXL][W];
  for (int dir = 0; dir < 2; ++dir) {
    for (int l = 0; l < L1; ++l)
      for (int i = 0; i < W; ++i) w[l][i] = T(1);
    const int64_t start = dir == 0 ? t : t + 1, stop = dir == 0 ? -1 : Tn, step = dir == 0 ? -1 : 1;
    for (int64_t s = start; s != stop; s += step) {
      // Extend the path by one token: s < t multiplies gamma_{s+1}; s > t multiplies gamma_{s-1}.
      if (s != t) {
        const T* g = b.gamma + (dir == 0 ? s + 1 : s - 1) * L1 * W;
        for (int l = 0; l < L1; ++l)
          for (int i = 0; i < W; ++i) w[l][i] *= g[l * W + i];
      }
      T c[W];
      for (int i = 0; i < W; ++i) c[i] = T(0);
      const T *qt = b.q + t * Kd * W, *ks = b.k + s * Kd * W;
      for (int64_t j = 0; j < Kd; ++j)
        for (int i = 0; i < W; ++i) c[i] += qt[j * W + i] * ks[j * W + i];
      fn(s, c, w);
    }
  }
}

template <typename T, int KD, int LL>
void forward_block(const Coeffs& cf, const Block<T>& b, T* y, T* cv, std::vector<T>& S) {
  const int64_t Tn = b.Tn;
  const int L1 = LL > 0 ? LL : cf.L1;
  const int64_t Kd = KD > 0 ? KD : b.Kd;
  constexpr int64_t KA = KD > 0 ? KD : 64;
  for (int64_t t = 0; t < Tn; ++t) {
    T acc[KA * W];  // y_t, kept in registers when KD is known
    for (int64_t j = 0; j < Kd * W; ++j) acc[j] = T(0);
    row_pairs<T, KD, LL>(cf, b, t, [&](int64_t s, const T* c, T (*w)[W]) {
      T K[MAXL][W], dK[MAXL][W];
      zonal<T, LL>(cf, c, K, dK);
      T A[W], sc[W];
      const T h = s == t ? T(1) : T(0.5);
      for (int i = 0; i < W; ++i) { A[i] = T(0); sc[i] = T(0); }
      for (int l = 0; l < L1; ++l)
        for (int i = 0; i < W; ++i) { A[i] += K[l][i] * w[l][i]; sc[i] += K[l][i]; }
      const T* ps = b.p + s * Kd * W;
      const T* ms = b.mask + s * W;
      for (int64_t j = 0; j < Kd; ++j)
        for (int i = 0; i < W; ++i) acc[j * W + i] += h * A[i] * ps[j * W + i];
      for (int i = 0; i < W; ++i)
        S[s * W + i] = ms[i] > T(0) ? sc[i] * T(cf.inv_sqrt_dim) : -std::numeric_limits<T>::infinity();
    });
    T* yt = y + t * Kd * W;
    for (int64_t j = 0; j < Kd * W; ++j) yt[j] = acc[j];
    // SKA: softmax over valid keys, then the weighted mean of p.
    T mx[W], sum[W];
    for (int i = 0; i < W; ++i) { mx[i] = -std::numeric_limits<T>::infinity(); sum[i] = T(0); }
    for (int64_t s = 0; s < Tn; ++s)
      for (int i = 0; i < W; ++i) mx[i] = S[s * W + i] > mx[i] ? S[s * W + i] : mx[i];
    for (int64_t j = 0; j < Kd * W; ++j) acc[j] = T(0);
    for (int64_t s = 0; s < Tn; ++s) {
      T e[W];
      const T* ms = b.mask + s * W;
      for (int i = 0; i < W; ++i) {
        e[i] = ms[i] > T(0) ? fast_exp<T>(S[s * W + i] - mx[i]) : T(0);
        sum[i] += e[i];
      }
      const T* ps = b.p + s * Kd * W;
      for (int64_t j = 0; j < Kd; ++j)
        for (int i = 0; i < W; ++i) acc[j * W + i] += e[i] * ps[j * W + i];
    }
    for (int i = 0; i < W; ++i) sum[i] = sum[i] > T(0) ? T(1) / sum[i] : T(0);
    T* cvt = cv + t * Kd * W;
    for (int64_t j = 0; j < Kd; ++j)
      for (int i = 0; i < W; ++i) cvt[j * W + i] = acc[j * W + i] * sum[i];
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
  const T inv = T(cf.inv_sqrt_dim);
  T *S = sc.S.data(), *E = sc.E.data(), *Kr = sc.K.data(), *dKr = sc.dK.data();
  for (int64_t t = 0; t < Tn; ++t) {
    // Pass 1: cosines -> zonal terms (kept for pass 2) and the softmax scores of row t.
    const T* qt = b.q + t * Kd * W;
    for (int64_t s = 0; s < Tn; ++s) {
      const T* ks = b.k + s * Kd * W;
      T c[W];
      for (int i = 0; i < W; ++i) c[i] = T(0);
      for (int64_t j = 0; j < Kd; ++j)
        for (int i = 0; i < W; ++i) c[i] += qt[j * W + i] * ks[j * W + i];
      T K[MAXL][W], dK[MAXL][W];
      zonal<T, LL>(cf, c, K, dK);
      const T* ms = b.mask + s * W;
      T sum[W];
      for (int i = 0; i < W; ++i) sum[i] = T(0);
      for (int l = 0; l < L1; ++l)
        for (int i = 0; i < W; ++i) {
          sum[i] += K[l][i];
          Kr[(s * L1 + l) * W + i] = K[l][i];
          dKr[(s * L1 + l) * W + i] = dK[l][i];
        }
      for (int i = 0; i < W; ++i) S[s * W + i] = ms[i] > T(0) ? sum[i] * inv : -std::numeric_limits<T>::infinity();
    }
    T mx[W], rsum[W], gdot[W];
    for (int i = 0; i < W; ++i) { mx[i] = -std::numeric_limits<T>::infinity(); rsum[i] = T(0); gdot[i] = T(0); }
    for (int64_t s = 0; s < Tn; ++s)
      for (int i = 0; i < W; ++i) mx[i] = S[s * W + i] > mx[i] ? S[s * W + i] : mx[i];
    for (int64_t s = 0; s < Tn; ++s) {
      const T* ms = b.mask + s * W;
      for (int i = 0; i < W; ++i) {
        const T e = ms[i] > T(0) ? fast_exp<T>(S[s * W + i] - mx[i]) : T(0);
        S[s * W + i] = e;  // S now holds unnormalised probabilities
        rsum[i] += e;
      }
    }
    for (int i = 0; i < W; ++i) rsum[i] = rsum[i] > T(0) ? T(1) / rsum[i] : T(0);
    const T *gyt = gy + t * Kd * W, *gct = gcv + t * Kd * W, *cvt = cv + t * Kd * W;
    for (int64_t j = 0; j < Kd; ++j)
      for (int i = 0; i < W; ++i) gdot[i] += gct[j * W + i] * cvt[j * W + i];
    T gqt[KA * W];
    for (int64_t j = 0; j < Kd * W; ++j) gqt[j] = T(0);
    // Pass 2, outward from the diagonal so the decay is a running product.
    T w[MAXL][W];
    for (int dir = 0; dir < 2; ++dir) {
      for (int l = 0; l < L1; ++l)
        for (int i = 0; i < W; ++i) w[l][i] = T(1);
      const int64_t start = dir == 0 ? t : t + 1, stop = dir == 0 ? -1 : Tn, step = dir == 0 ? -1 : 1;
      for (int64_t s = start; s != stop; s += step) {
        if (s != t) {
          const T* g = b.gamma + (dir == 0 ? s + 1 : s - 1) * L1 * W;
          for (int l = 0; l < L1; ++l)
            for (int i = 0; i < W; ++i) w[l][i] *= g[l * W + i];
        }
        const T h = s == t ? T(1) : T(0.5);
        const T* ps = b.p + s * Kd * W;
        const T* K = Kr + s * L1 * W;
        const T* dK = dKr + s * L1 * W;
        T gA[W], ga[W], A[W], alpha[W], gS[W], gc[W];
        for (int i = 0; i < W; ++i) { gA[i] = T(0); ga[i] = T(0); A[i] = T(0); gc[i] = T(0); }
        for (int64_t j = 0; j < Kd; ++j)
          for (int i = 0; i < W; ++i) {
            gA[i] += gyt[j * W + i] * ps[j * W + i];
            ga[i] += gct[j * W + i] * ps[j * W + i];
          }
        for (int l = 0; l < L1; ++l)
          for (int i = 0; i < W; ++i) A[i] += K[l * W + i] * w[l][i];
        for (int i = 0; i < W; ++i) {
          alpha[i] = S[s * W + i] * rsum[i];
          gS[i] = alpha[i] * (ga[i] - gdot[i]) * inv;
          A[i] *= h;
          gA[i] *= h;
        }
        for (int l = 0; l < L1; ++l)
          for (int i = 0; i < W; ++i) {
            gc[i] += (gA[i] * w[l][i] + gS[i]) * dK[l * W + i];
            E[(s * L1 + l) * W + i] = gA[i] * K[l * W + i] * w[l][i];  // d loss / d log-path, degree l
          }
        T* gps = gp + s * Kd * W;
        T* gks = gk + s * Kd * W;
        const T* ks = b.k + s * Kd * W;
        for (int64_t j = 0; j < Kd; ++j)
          for (int i = 0; i < W; ++i) {
            gps[j * W + i] += A[i] * gyt[j * W + i] + alpha[i] * gct[j * W + i];
            gks[j * W + i] += gc[i] * qt[j * W + i];
            gqt[j * W + i] += gc[i] * ks[j * W + i];
          }
      }
    }
    T* gqv = gq + t * Kd * W;
    for (int64_t j = 0; j < Kd * W; ++j) gqv[j] += gqt[j];
    // Path (s, t] for s < t: every r in it collects E(t, s); prefix sums over s give
    // sum_{s < r} E(t, s) for r = 1..t. Path [t, s) for s > t: suffix sums for r = t..T-2.
    for (int l = 0; l < L1; ++l) {
      T acc[W];
      for (int i = 0; i < W; ++i) acc[i] = T(0);
      for (int64_t r = 1; r <= t; ++r)
        for (int i = 0; i < W; ++i) {
          acc[i] += E[((r - 1) * L1 + l) * W + i];
          glg[(r * L1 + l) * W + i] += acc[i];
        }
      for (int i = 0; i < W; ++i) acc[i] = T(0);
      for (int64_t r = Tn - 2; r >= t; --r)
        for (int i = 0; i < W; ++i) {
          acc[i] += E[((r + 1) * L1 + l) * W + i];
          glg[(r * L1 + l) * W + i] += acc[i];
        }
    }
  }
}

// Compile-time sphere dimension and degree count for the paper's (k, L) grid in float32 (loops
// unroll, accumulators stay in registers); everything else (and float64) takes the generic build.
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
          Block<T> blk{loc.q.data(), loc.k.data(), loc.p.data(), loc.gamma.data(), loc.mask.data(), d.T, d.K};
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
          Block<T> blk{loc.q.data(), loc.k.data(), loc.p.data(), loc.gamma.data(), loc.mask.data(), d.T, d.K};
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
