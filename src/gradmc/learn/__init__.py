"""Learning model parameters with a sampler inside the loop (persistent contrastive divergence)."""
