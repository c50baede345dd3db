"""GAN table releases: the private training and post-noise sampling stages."""
