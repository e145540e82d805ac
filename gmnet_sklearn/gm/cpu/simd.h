// Fixed-width SIMD vectors for the CPU kernels: GCC/Clang vector types, unaligned
// (aligned(sizeof(T))) so loads and stores from any buffer are valid. Written out this way because,
// left to the auto-vectoriser, the kernels' loops were vectorised across the wrong axis and ran
// several times slower (seen while writing them; no benchmark keeps the slow form).
#pragma once

template <typename T, int N>
struct SimdVec {
  typedef T type __attribute__((vector_size(sizeof(T) * N), aligned(sizeof(T))));
};
template <typename T, int N>
using Simd = typename SimdVec<T, N>::type;

template <int N, typename T>
inline Simd<T, N> simd_load(const T* p) { return *reinterpret_cast<const Simd<T, N>*>(p); }
template <int N, typename T>
inline void simd_store(T* p, Simd<T, N> v) { *reinterpret_cast<Simd<T, N>*>(p) = v; }
