// The Phi read-out on CPU: out = sum_b s_b W @ monomials(x_b), per group (head), with its backward.
//
// Materialising the (G, n_mono, N) monomials of every branch and reading them back is what made
// the eager read-out memory-bound. Here each chunk of RL tokens (16 or 8) builds its monomials in L1, fuses
// the branches (s_1 m_1 + s_2 m_2) and multiplies by W while they are hot; only the fused
// monomials are written out, once, for the weight gradient (a BLAS matmul in torch). The backward
// rebuilds the branch monomials per chunk and gets d(loss)/d(monomials) = W^T g in L1, then the
// gradient wrt each branch's unit vectors, d x_v = sum_i e_{i+e_v, v} m_i (W^T g)_{i+e_v}, and
// wrt its scale. Layout: x (G, k, N), W (G, c, n_mono), out (G, c, N); tokens in RL SIMD lanes.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include "simd.h"

#include <algorithm>
#include <vector>

namespace {

// Token lanes: one register of 16 floats with AVX-512. With AVX2 (16 vector registers, not 32)
// 16 lanes take two registers each, and small_matmul's CB accumulators spill: on an AVX2 host the
// read-out ran 1.7x slower than the eager one (benchmarks.profile_step), so there it is 8 lanes.
#if defined(__AVX512F__)
constexpr int RL = 16;
#else
constexpr int RL = 8;
#endif
constexpr int CB = 8;  // rows per register block of the small matmuls

using Starts = std::vector<std::vector<int64_t>>;

// One vector of RL token lanes.
template <typename T>
using VT = Simd<T, RL>;
template <typename T>
inline VT<T> vld(const T* p) { return simd_load<RL>(p); }
template <typename T>
inline void vst(T* p, VT<T> v) { simd_store<RL>(p, v); }

// Monomials of one chunk: m (n_mono, RL), HarmonicBasis order (`functional._suffix_starts`:
// degree-l monomials are concat_v x_v * (suffix of degree l-1 from starts[l-1][v])).
template <typename T>
void build(const T* x, int64_t N, int64_t n0, int nl, int64_t k, const Starts& starts, T* m) {
  vst(m, VT<T>{} + T(1));
  if (starts.empty()) return;
  for (int64_t v = 0; v < k; ++v)
    for (int i = 0; i < RL; ++i) m[(1 + v) * RL + i] = i < nl ? x[v * N + n0 + i] : T(0);
  int64_t prev = 1, size = k, cur = 1 + k;
  for (size_t d = 1; d < starts.size(); ++d) {
    int64_t pos = cur;
    for (int64_t v = 0; v < k; ++v) {
      const VT<T> xv = vld(m + (1 + v) * RL);
      for (int64_t s = prev + starts[d][v]; s < prev + size; ++s, ++pos) vst(m + pos * RL, xv * vld(m + s * RL));
    }
    prev = cur;
    size = pos - cur;
    cur = pos;
  }
}

// out (R, RL) = A (R, K) @ B (K, RL); A row-major with leading dimension lda. Each row of the
// register block is one accumulator of RL lanes.
template <typename T>
void small_matmul(const T* A, int64_t lda, int64_t R, int64_t K, const T* B, T* out) {
  int64_t r0 = 0;
  for (; r0 + CB <= R; r0 += CB) {
    VT<T> acc[CB];
    for (int rr = 0; rr < CB; ++rr) acc[rr] = VT<T>{};
    for (int64_t j = 0; j < K; ++j) {
      const VT<T> b = vld(B + j * RL);
      for (int rr = 0; rr < CB; ++rr) acc[rr] += A[(r0 + rr) * lda + j] * b;
    }
    for (int rr = 0; rr < CB; ++rr) vst(out + (r0 + rr) * RL, acc[rr]);
  }
  for (; r0 < R; ++r0) {
    VT<T> acc{};
    for (int64_t j = 0; j < K; ++j) acc += A[r0 * lda + j] * vld(B + j * RL);
    vst(out + r0 * RL, acc);
  }
}

int64_t count_monomials(int64_t k, const Starts& starts) {
  int64_t total = 1, size = starts.empty() ? 0 : k;
  total += size;
  for (size_t d = 1; d < starts.size(); ++d) {
    TORCH_CHECK(static_cast<int64_t>(starts[d].size()) == k, "sphere_readout: bad starts");
    int64_t n = 0;
    for (int64_t v = 0; v < k; ++v) n += size - starts[d][v];
    size = n;
    total += n;
  }
  return total;
}

void check(const torch::Tensor& W, const std::vector<torch::Tensor>& xs, const torch::Tensor& scales, const Starts& starts) {
  TORCH_CHECK(W.dim() == 3 && W.is_contiguous(), "sphere_readout: W must be contiguous (G, c, n_mono)");
  TORCH_CHECK(!xs.empty(), "sphere_readout: no inputs");
  for (const auto& x : xs)
    TORCH_CHECK(x.dim() == 3 && x.is_contiguous() && x.size(0) == W.size(0) && x.sizes() == xs[0].sizes() &&
                x.scalar_type() == W.scalar_type(), "sphere_readout: inputs must be contiguous (G, k, N) like W");
  TORCH_CHECK(count_monomials(xs[0].size(1), starts) == W.size(2), "sphere_readout: W has the wrong number of monomials");
  TORCH_CHECK(scales.numel() == 0 || (scales.is_contiguous() && scales.dim() == 2 &&
              scales.size(0) == static_cast<int64_t>(xs.size()) && scales.size(1) == W.size(0)),
              "sphere_readout: scales must be (n_inputs, G) or empty");
}

}  // namespace

// Returns out (G, c, N) and, with store_fused, the fused monomials (G, n_mono, N') for the weight
// gradient, N' = N rounded up to whole chunks (columns past N are padding); without, an empty
// tensor (e.g. for inference).
std::vector<torch::Tensor> sphere_readout_forward(torch::Tensor W, std::vector<torch::Tensor> xs, torch::Tensor scales,
                                                  Starts starts, bool store_fused) {
  check(W, xs, scales, starts);
  const int64_t G = W.size(0), C = W.size(1), M = W.size(2), k = xs[0].size(1), N = xs[0].size(2);
  const int64_t nb = static_cast<int64_t>(xs.size()), nchunks = (N + RL - 1) / RL;
  auto out = torch::empty({G, C, N}, W.options());
  // Padded to whole chunks, so each chunk's fused monomials go out as full-vector stores.
  const int64_t Np = nchunks * RL;
  auto fused = store_fused ? torch::empty({G, M, Np}, W.options()) : torch::empty({0}, W.options());
  AT_DISPATCH_FLOATING_TYPES(W.scalar_type(), "sphere_readout_forward", [&] {
    using T = scalar_t;
    at::parallel_for(0, G * nchunks, 1, [&](int64_t w0, int64_t w1) {
      std::vector<T> m(M * RL), mc(M * RL), o(C * RL);
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t g = w / nchunks, n0 = (w % nchunks) * RL;
        const int nl = static_cast<int>(std::min<int64_t>(RL, N - n0));
        for (int64_t b = 0; b < nb; ++b) {
          const T s = scales.numel() ? scales.data_ptr<T>()[b * G + g] : T(1);
          build<T>(xs[b].data_ptr<T>() + g * k * N, N, n0, nl, k, starts, m.data());
          for (int64_t j = 0; j < M; ++j)
            vst(mc.data() + j * RL, b == 0 ? s * vld(m.data() + j * RL) : vld(mc.data() + j * RL) + s * vld(m.data() + j * RL));
        }
        small_matmul<T>(W.data_ptr<T>() + g * C * M, M, C, M, mc.data(), o.data());
        T* og = out.data_ptr<T>() + g * C * N + n0;
        for (int64_t c = 0; c < C; ++c)
          for (int i = 0; i < nl; ++i) og[c * N + i] = o[c * RL + i];
        if (store_fused) {
          T* fg = fused.data_ptr<T>() + g * M * Np + n0;
          for (int64_t j = 0; j < M; ++j) vst(fg + j * Np, vld(mc.data() + j * RL));
        }
      }
    });
  });
  return {out, fused};
}

// Given W^T (G, n_mono, c) and grad (G, c, N): the gradients wrt each input's unit vectors
// (G, k, N) and wrt the scales (n_inputs, G) (unscaled inputs: zeros).
std::vector<torch::Tensor> sphere_readout_backward(torch::Tensor Wt, std::vector<torch::Tensor> xs, torch::Tensor scales,
                                                   Starts starts, torch::Tensor grad, torch::Tensor index,
                                                   torch::Tensor mult) {
  TORCH_CHECK(Wt.dim() == 3 && Wt.is_contiguous(), "sphere_readout: W^T must be contiguous (G, n_mono, c)");
  const int64_t G = Wt.size(0), M = Wt.size(1), C = Wt.size(2), k = xs[0].size(1), N = xs[0].size(2);
  check(Wt.transpose(1, 2).contiguous(), xs, scales, starts);
  TORCH_CHECK(grad.is_contiguous() && grad.size(0) == G && grad.size(1) == C && grad.size(2) == N,
              "sphere_readout: grad must be contiguous (G, c, N)");
  const int64_t nb = static_cast<int64_t>(xs.size()), nchunks = (N + RL - 1) / RL;
  const int64_t n_lower = index.numel() / k;
  auto idx = index.contiguous().to(torch::kLong);
  auto mul = mult.contiguous().to(torch::kDouble);
  const int64_t* ip = idx.data_ptr<int64_t>();
  const double* mp = mul.data_ptr<double>();
  std::vector<torch::Tensor> gxs;
  for (int64_t b = 0; b < nb; ++b) gxs.push_back(torch::empty_like(xs[b]));
  auto gs_parts = torch::zeros({G * nchunks, nb}, Wt.options().dtype(torch::kDouble));
  AT_DISPATCH_FLOATING_TYPES(Wt.scalar_type(), "sphere_readout_backward", [&] {
    using T = scalar_t;
    std::vector<T> cmult(k * n_lower);
    for (int64_t i = 0; i < k * n_lower; ++i) cmult[i] = T(mp[i]);
    at::parallel_for(0, G * nchunks, 1, [&](int64_t w0, int64_t w1) {
      std::vector<T> m(M * RL), gc(C * RL), gm(M * RL);
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t g = w / nchunks, n0 = (w % nchunks) * RL;
        const int nl = static_cast<int>(std::min<int64_t>(RL, N - n0));
        const T* gg = grad.data_ptr<T>() + g * C * N + n0;
        for (int64_t c = 0; c < C; ++c)
          for (int i = 0; i < RL; ++i) gc[c * RL + i] = i < nl ? gg[c * N + i] : T(0);
        small_matmul<T>(Wt.data_ptr<T>() + g * M * C, C, M, C, gc.data(), gm.data());  // W^T g
        for (int64_t b = 0; b < nb; ++b) {
          const T s = scales.numel() ? scales.data_ptr<T>()[b * G + g] : T(1);
          build<T>(xs[b].data_ptr<T>() + g * k * N, N, n0, nl, k, starts, m.data());
          T* gx = gxs[b].data_ptr<T>() + g * k * N + n0;
          for (int64_t v = 0; v < k; ++v) {
            VT<T> acc{};
            for (int64_t i = 0; i < n_lower; ++i)
              acc += cmult[v * n_lower + i] * (vld(m.data() + i * RL) * vld(gm.data() + ip[v * n_lower + i] * RL));
            acc *= s;
            for (int l = 0; l < nl; ++l) gx[v * N + l] = acc[l];
          }
          if (scales.numel()) {
            VT<T> acc{};
            for (int64_t j = 0; j < M; ++j) acc += vld(gm.data() + j * RL) * vld(m.data() + j * RL);
            double total = 0;
            for (int l = 0; l < RL; ++l) total += acc[l];
            gs_parts.data_ptr<double>()[w * nb + b] = total;
          }
        }
      }
    });
  });
  auto gs = gs_parts.view({G, nchunks, nb}).sum(1).t().contiguous().to(Wt.scalar_type());  // (nb, G)
  gxs.push_back(gs);
  return gxs;
}
