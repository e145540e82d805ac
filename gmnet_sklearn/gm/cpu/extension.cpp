// The CPU extension as one translation unit: torch's headers dominate the build time, so the
// kernels are compiled together (each stays in its own file) and bound here.
#include "dual_ska.cpp"
#include "sphere_monomials.cpp"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("dual_ska_forward", &dual_ska_forward, "DualSKA branches, fused forward (CPU)");
  m.def("dual_ska_backward", &dual_ska_backward, "DualSKA branches, fused backward (CPU)");
  m.def("monomials_forward", &monomials_forward, "monomials of degree <= L, feature-major (CPU)");
  m.def("monomials_backward", &monomials_backward, "gradient of the monomials wrt their variables (CPU)");
}
