"""The ``model`` and ``data`` sections: which proxy family is trained, and on what.

The ``model`` section is validated with the spec of the model plugin its ``family`` names
(entry-point group ``mutune.models``, :mod:`mutune.proxies.plugins`); :func:`model_spec_class`
finds that spec. The plugins are imported only when a config is validated, never at import.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator

from mutune.config.base import StrictModel

__all__ = ["ModelSpec", "MLPModel", "GPTModel", "DigitsDataConfig", "TextDataConfig",
           "TokenDataConfig", "model_spec_class"]


class ModelSpec(StrictModel):
    """The ``model`` section every model family shares; a plugin's subclass adds its options."""
    family: str = Field(
        min_length=1, description="a model plugin's name (entry-point group `mutune.models`); "
        "an unknown name is refused with the installed ones")
    parametrization: Literal["mup", "sp"] = Field(
        default="mup", description="`mup` (μP) or `sp` (standard parametrization)")
    depth: int = Field(default=2, ge=1, le=64, description="layers (blocks) of the proxies")
    base_width: int = Field(
        default=64, ge=1, description="the width at which μP equals SP (width multiplier 1)")

    def build_options(self) -> dict[str, Any]:
        """The fields handed to the family's ``build`` (``depth`` and the plugin's own)."""
        return self.model_dump(exclude={"family", "parametrization", "base_width"})


class DepthOptions(StrictModel):
    """Depth-wise μP of a built-in family (:mod:`mutune.proxies.depth`, docs/transfer.md §9)."""
    depth_parametrization: Literal["none", "depth_mup", "completep"] = Field(
        default="none", description="residual branches × (L/L₀)^-½ (`depth_mup`, Yang et al. "
        "2023) or × (L/L₀)^-1 with the matching per-group lr and Adam ε (`completep`, Dey et "
        "al. 2025); needs an Adam optimizer (and `residual: true` for the MLP)")
    base_depth: int | None = Field(
        default=None, ge=1, le=64, description="L₀, the depth at which the model equals its "
        "unscaled self (None: `depth`); at most the smallest proxy depth")

    @field_validator("base_depth")
    @classmethod
    def _base_depth(cls, value: int | None, info: ValidationInfo) -> int | None:
        depth = info.data.get("depth")
        if value is not None and depth is not None and value > depth:
            raise ValueError(f"base_depth = {value} is above depth = {depth}: the base "
                             "depth must be at or below the smallest proxy depth")
        return value

    def depth_scaling(self) -> Any:
        """The model's :class:`~mutune.proxies.depth.DepthScaling`."""
        from mutune.proxies.depth import DepthScaling

        depth = int(self.depth)  # type: ignore[attr-defined]
        return DepthScaling(self.depth_parametrization, depth, self.base_depth or depth)

    def depth_options(self) -> dict[str, Any]:
        """``branch_mult`` for the family's ``build`` (only when depth-scaled, so the
        unscaled model is built exactly as before)."""
        if self.depth_parametrization == "none":
            return {}
        return {"branch_mult": self.depth_scaling().branch_multiplier}


class MLPModel(DepthOptions, ModelSpec):
    """μP MLP (``mutune.proxies.mlp``, plugin ``mlp``): ``depth`` hidden layers of size width."""
    family: Literal["mlp"] = Field(description="`mlp`")
    residual: bool = Field(
        default=False, validate_default=True, description="an input layer and `depth` "
        "residual blocks (each branch one width × width layer); a depth parametrization needs it")

    @field_validator("residual")
    @classmethod
    def _residual(cls, value: bool, info: ValidationInfo) -> bool:
        kind = info.data.get("depth_parametrization", "none")
        if kind != "none" and not value:
            raise ValueError(f"depth_parametrization = {kind!r} needs residual branches to "
                             "scale: set model.residual: true")
        return value

    def build_options(self) -> dict[str, Any]:
        """``depth``, ``residual`` and, when depth-scaled, ``branch_mult``."""
        opts = super().build_options()
        for key in ("depth_parametrization", "base_depth"):
            opts.pop(key, None)
        if not self.residual:
            opts.pop("residual", None)
        return {**opts, **self.depth_options()}


class GPTModel(DepthOptions, ModelSpec):
    """μP byte-level GPT-style pre-LN decoder (``mutune.proxies.gpt``, plugin ``gpt``)."""
    family: Literal["gpt"] = Field(description="`gpt`")
    base_width: int = Field(
        default=32, ge=1, description="the width at which μP equals SP (width multiplier 1)")
    d_head: int = Field(
        default=16, ge=1, description="features per attention head; widths must be multiples")
    ffn_ratio: int = Field(default=4, ge=1, description="feed-forward width ÷ width")
    seq_len: int = Field(default=64, ge=2, description="tokens per sample")
    vocab: int = Field(
        default=256, ge=2, le=1 << 32, description="token ids (256 for byte-level text); above "
        "65,536 token files must be `uint32` (`data.dtype`)")
    positions: Literal["learned", "rotary"] = Field(
        default="learned", description="learned position embeddings or rotary ones")
    tied: bool = Field(default=False, description="the readout shares the embedding's weights")
    readout_zero_init: bool = Field(
        default=False, description="an untied readout starts at zero instead of mup's μP init "
        "(docs/transfer.md §7)")

    def build_options(self) -> dict[str, Any]:
        """The section's options plus ``sp_style`` (SP conventions for an SP model: logits
        scaled 1/√d_head, no zero init of the query; :class:`mutune.proxies.gpt.MuGPT`)."""
        opts = super().build_options()
        for key in ("depth_parametrization", "base_depth"):
            opts.pop(key, None)
        return {**opts, "sp_style": self.parametrization == "sp", **self.depth_options()}


class DigitsDataConfig(StrictModel):
    """scikit-learn's bundled handwritten digits (1,797 images of 8×8 pixels, 10 classes)."""
    kind: Literal["digits"] = Field(description="`digits`")
    val_fraction: float = Field(
        default=0.2, gt=0, lt=1, description="share held out for validation (what the "
        "scheduler and the fits see)")
    test_fraction: float = Field(
        default=0.2, ge=0, lt=1, description="share held out for test (only reported)")
    split_seed: int = Field(
        default=0, ge=0, description="seeds the one split permutation (not the sweep's seed, "
        "so sweeps with different seeds are judged on the same examples)")


class TextDataConfig(StrictModel):
    """Byte-level text."""
    kind: Literal["text"] = Field(description="`text`")
    path: str | None = Field(
        default=None, description="a text file or folder (None: the running Python's standard "
        "library source)")


class TokenDataConfig(StrictModel):
    """A nanoGPT-style token file; the model's ``vocab`` must cover every token id."""
    kind: Literal["tokens"] = Field(description="`tokens`")
    path: str = Field(
        min_length=1, description="a token file, or a folder with `train.bin` and `val.bin`")
    dtype: Literal["uint16", "uint32"] = Field(
        default="uint16", description="little-endian element type: `uint16` (nanoGPT's, ids "
        "below 65,536) or `uint32`")


def model_spec_class(value: Any) -> type[ModelSpec]:
    """The spec class of the model plugin ``value["family"]`` names.

    Args:
        value: the raw ``model`` section (a mapping).
    Raises:
        ValueError: ``value`` is not a mapping with a string ``family``, or the plugin's spec
            is not a :class:`ModelSpec` subclass.
        ConfigError: no plugin of that name is installed, or it fails to load
            (:func:`mutune.proxies.plugins.load_family`).
    """
    from mutune.proxies.plugins import load_family

    if not isinstance(value, dict) or not isinstance(value.get("family"), str):
        raise ValueError("model must be a mapping with a 'family' naming a model plugin")
    spec = load_family(value["family"]).spec
    if not (isinstance(spec, type) and issubclass(spec, ModelSpec)):
        raise ValueError(f"model plugin {value['family']!r}: its spec is not a "
                         "mutune.config.ModelSpec subclass")
    return spec
