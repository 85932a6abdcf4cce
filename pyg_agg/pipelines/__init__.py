"""Training pipelines: dataset registry, model factory, trainer, DDP and the OGB builder."""
