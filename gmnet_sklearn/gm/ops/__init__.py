"""The ops of Chem-GMNet, each with its plain reference beside its fast forms and one dispatch.

Layers, imports running one way: `gm.functional` (stateless math) <- the kernel backends
(`gm.cpu`: the C++ extension's sources and loader; `gm.triton`: whether Triton can run) <- these
ops <- the modules (`gm.attention`, `embedding`, `harmonic_map`, `harmonic_linear`,
`transformer`) <- the estimators.

- `dual_ska`: both DualSKA branches (and the ablation variants' single branches);
- `sphere_readout`: the Phi read-out sum_b s_b W @ monomials(normalise(z_b));
- `dropout`: dropout with the counter-based CPU mask.

Every op takes the one ``impl`` vocabulary (`impl.IMPLS`); `impl.impl_for` says which name an
op runs under a model's ``impl``.
"""

# The op subpackages are not imported here: each name stays its subpackage (`ops.dual_ska` is the
# folder, `ops.dual_ska.dual_ska` its function), and importing the vocabulary loads no op.
from .impl import IMPLS, OPS, check_impl, impl_for, prefer, resolve_auto

__all__ = ["IMPLS", "OPS", "check_impl", "impl_for", "prefer", "resolve_auto"]
