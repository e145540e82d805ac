// The CPU extension as one translation unit: torch's headers dominate the build time, so the
// kernels are compiled together (each stays in its own file) and bound here.
#include "dual_ska.cpp"
#include "sphere_readout.cpp"
#include "dropout.cpp"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("dual_ska_forward", &dual_ska_forward, "DualSKA branches, fused forward (CPU)");
  m.def("dual_ska_backward", &dual_ska_backward, "DualSKA branches, fused backward (CPU)");
  m.def("sphere_readout_forward", &sphere_readout_forward, "Phi read-out from monomials built in cache (CPU)");
  m.def("sphere_readout_backward", &sphere_readout_backward, "gradients of the Phi read-out's inputs (CPU)");
  m.def("dropout_apply", &dropout_apply, "x * keep(seed) * scale, keep from a counter-based hash (CPU)");
}
