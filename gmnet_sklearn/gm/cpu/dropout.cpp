// Dropout with a counter-based mask: element i is kept when a hash of (seed, i) clears the drop
// threshold. torch's CPU dropout draws its Bernoulli mask from a sequential generator (about
// 8 ns per element here, more than the rest of a training step's elementwise work together) and
// stores it for the backward; the hash costs a few multiplies per pair of elements, and the
// backward recomputes the mask from the seed instead of storing it (as CUDA's Philox dropout
// does). The hash is SplitMix64 (Steele et al., 2014) over the counter i/2: its low and high 32
// bits decide elements 2j and 2j+1. `gm.dropout.keep_mask_reference` is the same in NumPy.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>

#include "simd.h"

namespace {

template <typename U>
inline U splitmix64(U z) {  // U: uint64_t or a vector of them
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;
constexpr int kPairs = 8;  // counters hashed per vector: 16 elements

template <typename T> struct SameWidthInt;
template <> struct SameWidthInt<float> { using type = int32_t; };
template <> struct SameWidthInt<double> { using type = int64_t; };

// y = x * keep * scale over n elements; keep_i = (32-bit draw of element i) >= threshold.
// The keep test is a vector compare and a bitwise select: a branch per element would be
// mispredicted a fraction p of the time (3x slower when tried).
template <typename T>
void masked_scale(const T* x, T* y, int64_t n, uint64_t seed, uint32_t threshold, T scale) {
  using U64 = Simd<uint64_t, kPairs>;
  using I = typename SameWidthInt<T>::type;
  constexpr int W = 64 / sizeof(T);  // elements per 512-bit vector
  const int64_t blocks = (n + 2 * kPairs - 1) / (2 * kPairs);
  at::parallel_for(0, blocks, 256, [&](int64_t b, int64_t e) {
    U64 lane;
    for (int j = 0; j < kPairs; ++j) lane[j] = uint64_t(j + 1);
    uint32_t draw[2 * kPairs];
    for (int64_t blk = b; blk < e; ++blk) {
      // Counters blk*8+1 .. blk*8+8; the low and high halves of draw j are elements 2j, 2j+1
      // (little-endian), which the byte copy lays out in element order.
      const U64 z = splitmix64<U64>(seed + (lane + uint64_t(blk) * kPairs) * kGamma);
      std::memcpy(draw, &z, sizeof(draw));
      const int64_t i0 = blk * 2 * kPairs;
      if (i0 + 2 * kPairs <= n) {
        for (int c = 0; c < 2 * kPairs; c += W) {
          const auto keep = __builtin_convertvector(simd_load<W>(draw + c) >= threshold, Simd<I, W>);
          const Simd<T, W> v = simd_load<W>(x + i0 + c) * scale;
          simd_store<W>(y + i0 + c, reinterpret_cast<Simd<T, W>>(reinterpret_cast<Simd<I, W>>(v) & keep));
        }
      } else {
        for (int64_t i = 0; i0 + i < n; ++i) y[i0 + i] = draw[i] >= threshold ? x[i0 + i] * scale : T(0);
      }
    }
  });
}

}  // namespace

// x * keep(seed) / (1 - p), the drop probability being threshold / 2^32. The forward and the
// backward (applied to the gradient with the same seed) are this one call.
torch::Tensor dropout_apply(torch::Tensor x, int64_t seed, int64_t threshold, double scale) {
  TORCH_CHECK(x.device().is_cpu(), "dropout_apply: a CPU tensor is needed");
  TORCH_CHECK(threshold >= 0 && threshold < (int64_t(1) << 32), "dropout_apply: threshold must be in [0, 2^32)");
  x = x.contiguous();
  auto y = torch::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "dropout_apply", [&] {
    masked_scale<scalar_t>(x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), x.numel(), uint64_t(seed),
                           uint32_t(threshold), scalar_t(scale));
  });
  return y;
}
