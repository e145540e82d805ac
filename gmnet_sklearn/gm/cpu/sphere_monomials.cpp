// Monomials of degree <= L of unit vectors, and their backward, for the Phi read-out on CPU.
//
// The eager form builds each degree block with k strided multiplies (and walks them back with
// 2k more), each a pass over memory; here the tokens (the contiguous last axis) go in chunks whose
// rows stay in cache while the monomials are built, and the gradient
// d(loss)/dx_v = sum_i e_{i+e_v, v} m_i d(loss)/d(m_{i+e_v}) is one pass over the incoming gradient.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

namespace {

constexpr int64_t CHUNK = 256;  // tokens per work item: a chunk of every row stays in L2
constexpr int NL = 16;          // token lanes of the backward's accumulators

// x (G, k, N) -> m (G, n_mono, N). starts[l-1][v]: where, among the degree-(l-1) monomials, those in
// variables >= v begin; degree-l monomials are concat_v x_v * (that suffix) (HarmonicBasis order,
// `functional._suffix_starts`; starts[0], degree 1, is the variables themselves). Rows are built
// from rows of the same chunk, which are still in cache.
template <typename T>
void fill_chunk(const T* x, T* m, int64_t k, int64_t N, int64_t n0, int64_t nc,
                const std::vector<std::vector<int64_t>>& starts) {
  for (int64_t i = 0; i < nc; ++i) m[n0 + i] = T(1);
  if (starts.empty()) return;
  for (int64_t v = 0; v < k; ++v)
    for (int64_t i = 0; i < nc; ++i) m[(1 + v) * N + n0 + i] = x[v * N + n0 + i];
  int64_t prev = 1, size = k, cur = 1 + k;
  for (size_t d = 1; d < starts.size(); ++d) {
    int64_t pos = cur;
    for (int64_t v = 0; v < k; ++v) {
      const T* xv = x + v * N + n0;
      for (int64_t s = prev + starts[d][v]; s < prev + size; ++s, ++pos) {
        const T* src = m + s * N + n0;
        T* dst = m + pos * N + n0;
        for (int64_t i = 0; i < nc; ++i) dst[i] = xv[i] * src[i];
      }
    }
    prev = cur;
    size = pos - cur;
    cur = pos;
  }
}

}  // namespace

torch::Tensor monomials_forward(torch::Tensor x, std::vector<std::vector<int64_t>> starts, int64_t n_mono) {
  TORCH_CHECK(x.dim() == 3 && x.is_contiguous(), "sphere_monomials: x must be contiguous (G, k, N)");
  const int64_t G = x.size(0), k = x.size(1), N = x.size(2);
  int64_t expect = 1, size = starts.empty() ? 0 : k;
  expect += size;
  for (size_t d = 1; d < starts.size(); ++d) {
    TORCH_CHECK(static_cast<int64_t>(starts[d].size()) == k, "sphere_monomials: bad starts");
    int64_t n = 0;
    for (int64_t v = 0; v < k; ++v) n += size - starts[d][v];
    size = n;
    expect += n;
  }
  TORCH_CHECK(expect == n_mono, "sphere_monomials: starts give ", expect, " monomials, expected ", n_mono);
  auto m = torch::empty({G, n_mono, N}, x.options());
  const int64_t nchunks = (N + CHUNK - 1) / CHUNK;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "monomials_forward", [&] {
    using T = scalar_t;
    at::parallel_for(0, G * nchunks, 1, [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t g = w / nchunks, n0 = (w % nchunks) * CHUNK;
        fill_chunk<T>(x.data_ptr<T>() + g * k * N, m.data_ptr<T>() + g * n_mono * N, k, N, n0,
                      std::min<int64_t>(CHUNK, N - n0), starts);
      }
    });
  });
  return m;
}

// gx[v] = sum_i mult[v, i] * m[i] * gm[index[v, i]] over the monomials i of degree < L.
torch::Tensor monomials_backward(torch::Tensor m, torch::Tensor gm, torch::Tensor index, torch::Tensor mult, int64_t k) {
  TORCH_CHECK(m.is_contiguous() && gm.is_contiguous() && m.sizes() == gm.sizes(), "sphere_monomials: bad m / grad");
  const int64_t G = m.size(0), n_mono = m.size(1), N = m.size(2);
  const int64_t n_lower = index.numel() / k;
  auto gx = torch::zeros({G, k, N}, m.options());
  auto idx = index.contiguous().to(torch::kLong);
  auto mul = mult.contiguous().to(torch::kDouble);
  const int64_t* ip = idx.data_ptr<int64_t>();
  const double* mp = mul.data_ptr<double>();
  const int64_t nblocks = (N + NL - 1) / NL;
  AT_DISPATCH_FLOATING_TYPES(m.scalar_type(), "monomials_backward", [&] {
    using T = scalar_t;
    at::parallel_for(0, G * nblocks, 1, [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t g = w / nblocks, n0 = (w % nblocks) * NL;
        const int nl = static_cast<int>(std::min<int64_t>(NL, N - n0));
        const T* mg = m.data_ptr<T>() + g * n_mono * N + n0;
        const T* gg = gm.data_ptr<T>() + g * n_mono * N + n0;
        T* out = gx.data_ptr<T>() + g * k * N + n0;
        if (nl == NL) {
          for (int64_t v = 0; v < k; ++v) {
            T acc[NL] = {};
            for (int64_t i = 0; i < n_lower; ++i) {
              const T c = T(mp[v * n_lower + i]);
              const T* a = mg + i * N;
              const T* b = gg + ip[v * n_lower + i] * N;
              for (int l = 0; l < NL; ++l) acc[l] += c * a[l] * b[l];
            }
            for (int l = 0; l < NL; ++l) out[v * N + l] = acc[l];
          }
        } else {
          for (int64_t v = 0; v < k; ++v)
            for (int l = 0; l < nl; ++l) {
              T acc = 0;
              for (int64_t i = 0; i < n_lower; ++i)
                acc += T(mp[v * n_lower + i]) * mg[i * N + l] * gg[ip[v * n_lower + i] * N + l];
              out[v * N + l] = acc;
            }
        }
      }
    });
  });
  return gx;
}
