"""Hydra configuration: schemas (``schema``), composition with one-line errors
(``compose``), Hugging Face config.json loading (``hf_loader``) and the step from
a composed config to a ``RunSpec`` and an implementation (``build``)."""
