"""Proxy models and data for μP hyperparameter transfer (torch + mup only; no ray, no sqlalchemy).

Yang et al. 2022, "Tensor Programs V" (arXiv 2203.03466); mup 1.0.0."""
from mutune.proxies.data import (ClassificationData, TextData, classification_batch,
                                 lm_batch, lm_eval_windows, load_digits_data, load_text_data,
                                 stdlib_corpus_files)
from mutune.proxies.gpt import GPTShape, MuGPT, build_gpt
from mutune.proxies.mlp import MLPShape, MuMLP, build_mlp
from mutune.proxies.parametrization import (OPTIMIZERS, PARAMETRIZATIONS, build_parametrized,
                                            count_parameters, make_optimizer)

__all__ = [
    "ClassificationData", "TextData", "classification_batch", "lm_batch", "lm_eval_windows",
    "load_digits_data", "load_text_data", "stdlib_corpus_files",
    "GPTShape", "MuGPT", "build_gpt", "MLPShape", "MuMLP", "build_mlp",
    "OPTIMIZERS", "PARAMETRIZATIONS", "build_parametrized", "count_parameters", "make_optimizer",
]
