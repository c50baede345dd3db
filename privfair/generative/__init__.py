"""GAN synthesizers trained with DP (FairGAN, FairGAN+, CFGAN go here)."""
