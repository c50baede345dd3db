"""What a GAN release needs of this machine, from public facts only (issue 45.5).

Like the model kind's estimate (:mod:`privfair.release.kinds.model.resources`), before
anything is reserved: the contract's one-hot width W (the sum of its domain sizes) and the
GAN's public configuration (:func:`~privfair.release.kinds.gan.stages.gan_config`) bound the
live arrays of a fit and of its sampling, and a GAN that cannot fit is refused in one line.
The estimate is an upper bound of the live arrays, not a measurement:

* parameters: the generator (noise and condition → hidden → hidden → W, or CFGAN's one
  network per attribute), D1 (W → d → d → 1), D2 (W → d → |S|) and the FairGAN+ classifier
  (W → |Y|), each held :data:`PARAMETER_COPIES` times (weights, gradients, Adam's two
  moments, the generator's EMA, the private gradients waiting for a public step);
* a step's activations: real and generated batches of up to :data:`BATCH_HEADROOM` × the
  expected Poisson batch, over every layer's units, :data:`ACTIVATION_COPIES` times (value,
  gradient, the ghost norms);
* sampling: :data:`SAMPLE_CHUNK` rows at a time as W-wide probabilities,
  :data:`SAMPLE_COPIES` times (the sampled table's own size, ``--n-rows``, is the shared
  plan's check).
"""

from __future__ import annotations

from collections.abc import Mapping

from privfair.release.resources import check_memory

#: The shapes of the GAN every release method fits: ``GANConfig``'s defaults (the release
#: sets none of them; kept here so that planning imports no torch; a test compares them).
GAN_SHAPE: Mapping[str, int] = {"hidden": 128, "noise_dim": 64, "discriminator_hidden": 64,
                                "node_hidden": 64, "node_noise_dim": 8, "batch_size": 500}
#: Live float32 copies of each parameter.
PARAMETER_COPIES = 8
#: Live float32 values per unit and batch row.
ACTIVATION_COPIES = 4
#: A Poisson batch's size, as a multiple of its expectation, the estimate allows for.
BATCH_HEADROOM = 2
#: Rows the generator samples at a time (``privfair.generative.gan``).
SAMPLE_CHUNK = 8192
#: Live copies of a sampled chunk's W-wide probabilities.
SAMPLE_COPIES = 3


def gan_bytes(*, sizes: Mapping[str, int], method: str, hidden: int, noise_dim: int,
              discriminator_hidden: int, node_hidden: int, node_noise_dim: int,
              batch_size: int, heads: int | None = None) -> int:
    """The estimated peak bytes of fitting and sampling a GAN over domains of ``sizes``;
    ``heads``: the widest output of D2 and the classifier (the largest protected or outcome
    domain; every domain's largest when not given)."""
    width = sum(sizes.values())
    largest = heads if heads is not None else max(sizes.values(), default=1)
    h, d = hidden, discriminator_hidden
    if method == "cfgan":  # one small network per attribute, fed its parents' one-hots
        generator = sum((node_noise_dim + width) * node_hidden + node_hidden * node_hidden
                        + node_hidden * size for size in sizes.values())
        units = len(sizes) * 2 * node_hidden + width
    else:
        generator = (noise_dim + width) * h + h * h + h * width
        units = noise_dim + 2 * h + width
    discriminators = (width * d + d * d + d) + (width * d + d * largest) + width * largest
    parameters = generator + discriminators
    batch = BATCH_HEADROOM * batch_size
    activations = 2 * batch * (units + width + 2 * d)
    sampling = SAMPLE_COPIES * SAMPLE_CHUNK * width
    return 4 * (PARAMETER_COPIES * parameters + ACTIVATION_COPIES * activations + sampling)


def check_gan_resources(*, sizes: Mapping[str, int], method: str,
                        heads: int | None = None) -> None:
    """Refuse, in one line, a GAN whose estimate exceeds the share of this machine's memory
    a release may plan to use."""
    need = gan_bytes(sizes=sizes, method=method, heads=heads, **GAN_SHAPE)
    widest = max(sizes, key=lambda a: sizes[a]) if sizes else ""
    check_memory(need, flag="--contract",
                 what=(f"GAN {method} over {sum(sizes.values()):,} one-hot columns (the "
                       f"widest, {widest!r}, has {sizes.get(widest, 0):,} categories)"),
                 fix="merge categories in the contract")
