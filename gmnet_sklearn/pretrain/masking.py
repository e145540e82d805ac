"""RoBERTa/ChemBERTa-style masking for the masked-language-model objective.

Of the real, non-special tokens each is selected with probability ``mask_prob`` (15%); a
selected token is replaced by [MASK] with probability 0.8, by a random vocabulary token with
probability 0.1 and kept with probability 0.1 (Hugging Face's ``DataCollatorForLanguageModeling``,
which ChemBERTa-2 trained with). The loss is taken on the selected tokens only (labels -100
elsewhere). [CLS], [SEP], [PAD], [UNK], [MASK] and [unusedN] are never selected, and random
replacements are drawn from the real (chemistry) tokens only, never a special one.

Chem-GMNet's conjugation flag of a position whose token was replaced ([MASK] or random) is set
to 0: the flag of the original atom (aromatic or conjugated) would give the hidden token away.

Draws come from an explicit ``torch.Generator`` (CPU), so a batch's masks are a function of the
seed the caller gives it: the trainer seeds one per step, and a resumed run masks exactly as the
uninterrupted one.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from ..tokenizer import SPECIAL_TOKENS

_UNUSED = re.compile(r"\[unused\d+\]")


class Masker:
    """Masks batches of token ids for one vocabulary (a fitted ``SmilesTokenizer``)."""

    def __init__(self, tokenizer, mask_prob: float = 0.15, mask_token_prob: float = 0.8, random_token_prob: float = 0.1):
        if not 0 < mask_prob < 1:
            raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob!r}")
        if mask_token_prob < 0 or random_token_prob < 0 or mask_token_prob + random_token_prob > 1:
            raise ValueError("mask_token_prob and random_token_prob must be >= 0 and sum to at most 1")
        self.mask_prob = float(mask_prob)
        self.mask_token_prob = float(mask_token_prob)
        self.random_token_prob = float(random_token_prob)
        self.mask_id = tokenizer.mask_id
        special = np.zeros(tokenizer.vocab_size, dtype=bool)
        for tok, i in tokenizer.vocabulary_.items():
            if tok in SPECIAL_TOKENS or _UNUSED.fullmatch(tok):
                special[i] = True
        self.special = torch.as_tensor(special)
        self.candidates = torch.as_tensor(np.flatnonzero(~special), dtype=torch.int64)
        if len(self.candidates) == 0:
            raise ValueError("the vocabulary has no non-special tokens to mask")

    def __call__(self, ids: torch.Tensor, generator: torch.Generator, flags: torch.Tensor | None = None):
        """``(inputs, labels, flags)`` for a (B, T) batch of ids (padding is a special token).
        Everything is drawn on the CPU from ``generator`` and returned on ``ids``' device."""
        device = ids.device
        ids_cpu = ids.cpu()
        shape = ids_cpu.shape
        maskable = ~self.special[ids_cpu]
        selected = (torch.rand(shape, generator=generator) < self.mask_prob) & maskable
        u = torch.rand(shape, generator=generator)
        to_mask = selected & (u < self.mask_token_prob)
        to_random = selected & (u >= self.mask_token_prob) & (u < self.mask_token_prob + self.random_token_prob)
        random_ids = self.candidates[torch.randint(len(self.candidates), shape, generator=generator)]
        inputs = torch.where(to_mask, torch.full_like(ids_cpu, self.mask_id), ids_cpu)
        inputs = torch.where(to_random, random_ids, inputs)
        labels = torch.where(selected, ids_cpu, torch.full_like(ids_cpu, -100))
        if flags is not None:
            flags = flags.masked_fill((to_mask | to_random).to(flags.device), 0)
        return inputs.to(device), labels.to(device), flags


def step_generator(seed: int, step: int, stream: int = 0) -> torch.Generator:
    """A CPU generator seeded from (seed, stream, step): one independent stream per step."""
    state = np.random.SeedSequence([int(seed), int(stream), int(step)]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


__all__ = ["Masker", "step_generator"]
