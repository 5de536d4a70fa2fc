"""Real datasets for the proxies (nothing downloaded) and seeded, stateless batching."""
from __future__ import annotations

import hashlib
import os
import pathlib
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mutune.errors import ProxyError

__all__ = ["ClassificationData", "TextData", "load_digits_data", "stdlib_corpus_files",
           "load_text_data", "classification_batch", "lm_batch", "lm_eval_windows"]

# exact directory names: ``idlelib/idle_test`` stays (the reference corpus of
# docs/transfer.md — 799 files on Python 3.11.7, sha256 d28166cfc82e0f86… — keeps it)
_EXCLUDED_DIRS = frozenset({"site-packages", "test", "tests"})
_VAL_EVERY = 10  # file i is validation iff i % 10 == 9, test iff i % 10 == 8; a single file:
# the last 10 % of bytes is validation and the 10 % before it test


@dataclass(frozen=True)
class ClassificationData:
    """A train / validation / test split of a classification dataset."""

    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray
    n_classes: int
    fingerprint: str
    size_bytes: int
    test_x: np.ndarray | None = None
    test_y: np.ndarray | None = None

    @property
    def d_in(self) -> int:
        """Feature dimension d."""
        return int(self.train_x.shape[1])


@dataclass(frozen=True)
class TextData:
    """A byte-level corpus split into train, validation and test token streams."""

    train: np.ndarray
    val: np.ndarray
    vocab: int
    fingerprint: str
    size_bytes: int
    n_files: int
    source: str
    test: np.ndarray | None = None


def _check_seed(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ProxyError(f"{name} must be an int >= 0, got {value!r}")


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ProxyError(f"{name} must be an int >= 1, got {value!r}")


def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """The digits' (1797, 64) pixels and labels from scikit-learn's CSV, not importing sklearn."""
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("sklearn")          # finds the package, runs nothing
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        path = pathlib.Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            with gzip.open(path, mode="rt", encoding="utf-8") as f:
                table = np.loadtxt(f, delimiter=",")
            return table[:, :-1], table[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    digits = load_digits()
    return np.asarray(digits.data), np.asarray(digits.target, dtype=np.int64)


def load_digits_data(val_fraction: float = 0.2, seed: int = 0, *,
                     test_fraction: float = 0.0) -> ClassificationData:
    """scikit-learn's digits (1797 8×8 images, 10 classes; Alpaydin & Kaynak 1998), features / 16.

    Raises:
        ProxyError: val_fraction outside (0, 1), test_fraction outside [0, 1), no example
            left for training; a negative seed."""
    if not isinstance(val_fraction, (int, float)) or not 0.0 < val_fraction < 1.0:
        raise ProxyError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    if not isinstance(test_fraction, (int, float)) or not 0.0 <= test_fraction < 1.0:
        raise ProxyError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    _check_seed("seed", seed)
    pixels, labels = _digits_arrays()
    x = (np.asarray(pixels, dtype=np.float64) / 16.0).astype(np.float32)
    y = np.asarray(labels, dtype=np.int64)
    n = len(y)
    n_val = min(max(int(round(n * val_fraction)), 1), n - 1)
    n_test = int(round(n * test_fraction)) if test_fraction > 0 else 0
    if test_fraction > 0:
        n_test = max(n_test, 1)
    if n_val + n_test >= n:
        raise ProxyError(f"val_fraction {val_fraction} + test_fraction {test_fraction} leave "
                         f"no training example of {n}")
    perm = np.random.default_rng(seed).permutation(n)
    val_idx, test_idx, train_idx = perm[:n_val], perm[n_val:n_val + n_test], perm[n_val + n_test:]
    arrays = (x[train_idx], y[train_idx], x[val_idx], y[val_idx])
    tests = (x[test_idx], y[test_idx]) if n_test else ()
    digest = hashlib.sha256()
    for a in (*arrays, *tests):
        digest.update(f"{a.dtype.str}{a.shape}".encode())
        digest.update(np.ascontiguousarray(a).tobytes())
    return ClassificationData(*arrays, n_classes=int(y.max()) + 1, fingerprint=digest.hexdigest(),
                              size_bytes=int(sum(a.nbytes for a in (*arrays, *tests))),
                              test_x=tests[0] if tests else None,
                              test_y=tests[1] if tests else None)


def _files_under(root: pathlib.Path, *, suffix: str | None,
                 exclude: frozenset[str]) -> list[pathlib.Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in exclude]
        for name in filenames:
            path = pathlib.Path(dirpath, name)
            if (suffix is None or name.endswith(suffix)) and path.is_file():
                found.append(path)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def stdlib_corpus_files() -> list[pathlib.Path]:
    """Absolute paths of the running Python's standard-library ``*.py`` files, in corpus order."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    if not root.is_dir():
        raise ProxyError(f"standard-library folder {str(root)!r} does not exist")
    return _files_under(root, suffix=".py", exclude=_EXCLUDED_DIRS)


def _split_files(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    def join(keep: Callable[[int], bool]) -> np.ndarray:
        return np.frombuffer(b"".join(b for i, b in enumerate(blobs) if keep(i % _VAL_EVERY)),
                             dtype=np.uint8)
    return (join(lambda r: r < _VAL_EVERY - 2), join(lambda r: r == _VAL_EVERY - 1),
            join(lambda r: r == _VAL_EVERY - 2))


def _split_bytes(data: bytes, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_val = len(data) // _VAL_EVERY
    if n_val < 1:
        raise ProxyError(f"{where} has {len(data)} bytes; need >= {_VAL_EVERY} to hold out "
                         "the last 10 % for validation and the 10 % before it for test")
    arr = np.frombuffer(data, dtype=np.uint8)
    cut = len(data) - n_val
    return arr[: cut - n_val], arr[cut:], arr[cut - n_val: cut]


def load_text_data(path: str | os.PathLike | None = None) -> TextData:
    """A byte-level corpus (vocab 256) with a deterministic train/validation/test split.

    Returns:
        TextData; ``fingerprint`` = sha256 of all files' bytes in corpus order.
    Raises:
        ProxyError: a missing path, an empty corpus, or a file too short to split (names it)."""
    if path is None:
        files = stdlib_corpus_files()
        source = f"stdlib:{sysconfig.get_paths()['stdlib']}"
    else:
        p = pathlib.Path(path)
        if p.is_file():
            files = [p]
        elif p.is_dir():
            files = _files_under(p, suffix=None, exclude=frozenset())
        else:
            raise ProxyError(f"text data path {str(p)!r} does not exist")
        source = str(p)
    blobs = [f.read_bytes() for f in files]
    size = sum(len(b) for b in blobs)
    if size == 0:
        raise ProxyError(f"text corpus {source!r} is empty ({len(files)} files, 0 bytes)")
    digest = hashlib.sha256()
    for b in blobs:
        digest.update(b)
    if len(files) >= _VAL_EVERY:
        train, val, test = _split_files(blobs)
    else:
        train, val, test = _split_bytes(b"".join(blobs), repr(source))
    return TextData(train=train, val=val, vocab=256, fingerprint=digest.hexdigest(),
                    size_bytes=size, n_files=len(files), source=source, test=test)


def classification_batch(data: ClassificationData, batch_size: int, seed: int,
                         step: int) -> tuple[np.ndarray, np.ndarray]:
    """Training batch ``step`` of a seeded, stateless stream: ``batch_size`` distinct examples.

    Raises:
        ProxyError: batch_size < 1 or > n_train; seed or step not an int >= 0."""
    _check_count("batch_size", batch_size)
    _check_seed("seed", seed)
    _check_seed("step", step)
    n = len(data.train_y)
    if batch_size > n:
        raise ProxyError(f"batch_size={batch_size} exceeds the {n} training examples")
    idx = np.random.default_rng([int(seed), int(step)]).choice(n, size=batch_size, replace=False)
    return data.train_x[idx], data.train_y[idx]


def _windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    offsets = starts[:, None] + np.arange(seq_len + 1)[None, :]
    chunk = tokens[offsets].astype(np.int64)
    return chunk[:, :-1], chunk[:, 1:]


def _check_tokens(tokens: np.ndarray, seq_len: int) -> None:
    _check_count("seq_len", seq_len)
    if not isinstance(tokens, np.ndarray) or tokens.ndim != 1:
        raise ProxyError(f"tokens must be a 1-D numpy array, got {type(tokens).__name__} "
                         f"with shape {getattr(tokens, 'shape', None)}")
    if len(tokens) < seq_len + 1:
        raise ProxyError(f"token array of length {len(tokens)} is too short for seq_len={seq_len}"
                         f"; need >= {seq_len + 1} tokens")


def lm_batch(tokens: np.ndarray, batch_size: int, seq_len: int, seed: int,
             step: int) -> tuple[np.ndarray, np.ndarray]:
    """Training batch ``step`` of random windows: inputs and next-token targets.

    Raises:
        ProxyError: len(tokens) < seq_len + 1; batch_size/seq_len < 1; seed/step < 0."""
    _check_tokens(tokens, seq_len)
    _check_count("batch_size", batch_size)
    _check_seed("seed", seed)
    _check_seed("step", step)
    rng = np.random.default_rng([int(seed), int(step)])
    starts = rng.integers(0, len(tokens) - seq_len, size=batch_size)
    return _windows(tokens, starts, seq_len)


def lm_eval_windows(tokens: np.ndarray, seq_len: int,
                    n_windows: int) -> tuple[np.ndarray, np.ndarray]:
    """``n_windows`` deterministic, evenly spaced windows for validation loss.

    Raises:
        ProxyError: len(tokens) < seq_len + 1, or more windows than distinct starts
            (len(tokens) - seq_len)."""
    _check_tokens(tokens, seq_len)
    _check_count("n_windows", n_windows)
    n_starts = len(tokens) - seq_len
    if n_windows > n_starts:
        raise ProxyError(f"n_windows={n_windows} exceeds the {n_starts} distinct windows of "
                         f"length {seq_len} in {len(tokens)} tokens")
    starts = np.round(np.linspace(0, n_starts - 1, n_windows)).astype(np.int64)
    return _windows(tokens, starts, seq_len)
