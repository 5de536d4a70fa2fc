"""nanoGPT-style token files: flat little-endian ``uint16`` or ``uint32`` arrays, memory-mapped."""
from __future__ import annotations

import hashlib
import os
import pathlib
from typing import Any

import numpy as np

from mutune.errors import ProxyError

__all__ = ["TokenData", "load_token_data"]

_VAL_FRACTION_DEN = 10
_CHUNK = 1 << 24
#: token file element types: name → (numpy dtype, little-endian)
TOKEN_DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}


def _sha256(paths: list[pathlib.Path], dtype: str = "uint16") -> str:
    digest = hashlib.sha256()
    if dtype != "uint16":           # uint16 fingerprints stay what they were
        digest.update(dtype.encode())
    for p in paths:
        with open(p, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


class TokenData:
    """Train and validation token streams backed by ``uint16`` or ``uint32`` memmaps."""

    def __init__(self, train_path: pathlib.Path, val_path: pathlib.Path | None, vocab: int,
                 fingerprint: str, size_bytes: int, source: str,
                 test_path: pathlib.Path | None = None, dtype: str = "uint16") -> None:
        if dtype not in TOKEN_DTYPES:
            raise ProxyError(f"token dtype {dtype!r}: use one of {sorted(TOKEN_DTYPES)}")
        self.dtype = dtype
        self.train_path, self.val_path, self.test_path = train_path, val_path, test_path
        self.vocab, self.fingerprint, self.size_bytes = vocab, fingerprint, size_bytes
        self.n_files = 1 + (val_path is not None) + (test_path is not None)
        self.source = source
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_arrays"] = None  # reopened lazily where it lands
        return state

    def _open(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            train = np.memmap(self.train_path, dtype=TOKEN_DTYPES[self.dtype], mode="r")
            if self.val_path is None:
                n_val = len(train) // _VAL_FRACTION_DEN
                self._arrays = (train[: len(train) - n_val], train[len(train) - n_val:])
            else:
                self._arrays = (train, np.memmap(self.val_path, dtype=TOKEN_DTYPES[self.dtype],
                                                 mode="r"))
        return self._arrays

    @property
    def train(self) -> np.ndarray:
        return self._open()[0]

    @property
    def val(self) -> np.ndarray:
        return self._open()[1]

    @property
    def test(self) -> np.ndarray | None:
        if self.test_path is None:
            return None
        return np.memmap(self.test_path, dtype=TOKEN_DTYPES[self.dtype], mode="r")


def load_token_data(path: str | os.PathLike[str], vocab: int,
                    dtype: str = "uint16") -> TokenData:
    """Open a token file or folder (``train.bin`` + ``val.bin``, optionally ``test.bin``).

    Raises:
        ProxyError: unknown dtype; a vocab a uint16 file cannot reach (> 65,536) with
            ``uint16``; missing files, a byte count that is not a whole number of tokens,
            fewer than 10 tokens of validation, or a token id ≥ vocab (names the file and the
            largest id)."""
    if dtype not in TOKEN_DTYPES:
        raise ProxyError(f"token dtype {dtype!r}: use one of {sorted(TOKEN_DTYPES)}")
    if dtype == "uint16" and vocab > 1 << 16:
        raise ProxyError(f"vocab {vocab} > 65,536 with uint16 token files: ids above 65,535 do "
                         "not fit in 16 bits; write the tokens as uint32 and set "
                         "data.dtype: uint32")
    width = TOKEN_DTYPES[dtype].itemsize
    p = pathlib.Path(path)
    if p.is_dir():
        train, val = p / "train.bin", p / "val.bin"
        missing = [str(f) for f in (train, val) if not f.is_file()]
        if missing:
            raise ProxyError(f"token folder {str(p)!r} lacks {missing} (nanoGPT layout: "
                             "train.bin and val.bin)")
        files: list[pathlib.Path] = [train, val]
        test = p / "test.bin" if (p / "test.bin").is_file() else None
        if test is not None:
            files.append(test)
    elif p.is_file():
        train, val, files, test = p, None, [p], None
    else:
        raise ProxyError(f"token data path {str(p)!r} does not exist")
    for f in files:
        size = f.stat().st_size
        if size % width:
            raise ProxyError(f"{str(f)!r} has {size} bytes, not a whole number of {dtype} "
                             f"tokens ({width} bytes each); is data.dtype right?")
    data = TokenData(train, val, int(vocab), _sha256(files, dtype),
                     sum(f.stat().st_size for f in files), str(p), test_path=test, dtype=dtype)
    if len(data.val) < _VAL_FRACTION_DEN or len(data.train) < _VAL_FRACTION_DEN:
        raise ProxyError(f"token data {str(p)!r} is too short: {len(data.train)} train and "
                         f"{len(data.val)} validation tokens")
    for name, arr in (("train", data.train), ("val", data.val)):
        top = int(arr.max())
        if top >= vocab:
            raise ProxyError(f"{name} tokens of {str(p)!r} reach id {top} >= vocab {vocab}; "
                             "set model.vocab to the tokenizer's size")
    return data
