"""DP GAN synthesizers: dpgan, FairGAN, FairGAN+ and CFGAN (Xu 2021, ch. 6–7, made private).

Only the discriminator that sees real rows is trained with DP-SGD; the fairness adversaries see
generated rows only. Torch is needed by :mod:`privfair.generative.gan` and its helpers
(``nets``, ``dpsgd``), which this package does not import, so ``import privfair.generative``
works without torch; :mod:`~privfair.generative.dag` and
:mod:`~privfair.generative.calibration` are torch-free.
"""

GAN_METHODS: tuple[str, ...] = ("dpgan", "fairgan", "fairgan-plus", "cfgan")
