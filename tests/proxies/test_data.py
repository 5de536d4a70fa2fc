"""Datasets and seeded, stateless batching of the proxies."""
from __future__ import annotations

import hashlib
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutune.errors import ProxyError
from mutune.proxies import (classification_batch, lm_batch, lm_eval_windows, load_digits_data,
                            load_text_data, stdlib_corpus_files)

# one test process for this module: its module-scoped fixture is built once (pyproject's
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("proxies.test_data")


@pytest.fixture(scope="module")
def digits():
    return load_digits_data(val_fraction=0.2, seed=0)


def test_digits_shapes_and_split(digits):
    assert digits.train_x.shape == (1438, 64) and digits.val_x.shape == (359, 64)
    assert digits.train_y.shape == (1438,) and digits.val_y.shape == (359,)
    assert digits.train_x.dtype == np.float32 and digits.train_y.dtype == np.int64
    assert digits.d_in == 64 and digits.n_classes == 10
    assert 0.0 <= digits.train_x.min() and digits.train_x.max() <= 1.0
    assert set(np.unique(digits.val_y)) == set(range(10))
    assert digits.size_bytes == sum(a.nbytes for a in (digits.train_x, digits.train_y,
                                                       digits.val_x, digits.val_y))


def test_digits_deterministic(digits):
    again = load_digits_data(val_fraction=0.2, seed=0)
    assert np.array_equal(again.train_x, digits.train_x)
    assert np.array_equal(again.val_y, digits.val_y)
    assert again.fingerprint == digits.fingerprint and len(digits.fingerprint) == 64
    other = load_digits_data(val_fraction=0.2, seed=1)
    assert other.fingerprint != digits.fingerprint
    assert not np.array_equal(other.val_y, digits.val_y)


def test_digits_are_sklearns_read_without_importing_sklearn():
    """The pixels and labels equal ``sklearn.datasets.load_digits``'s exactly (so every
    fingerprint and cache key stays), read from the CSV scikit-learn ships in a process that
    never imports scikit-learn or scipy."""
    import subprocess

    from sklearn.datasets import load_digits

    from mutune.proxies.data import _digits_arrays

    pixels, labels = _digits_arrays()
    ref = load_digits()
    assert np.array_equal(pixels, ref.data) and np.array_equal(labels, ref.target)
    assert labels.dtype == np.int64 and pixels.shape == (1797, 64)
    code = ("import sys; from mutune.proxies import load_digits_data; "
            "d = load_digits_data(); "
            "print(sorted(m for m in ('sklearn', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_digits_bad_val_fraction(bad):
    with pytest.raises(ProxyError, match="val_fraction"):
        load_digits_data(val_fraction=bad)


def test_digits_three_splits_are_disjoint_and_fixed():
    """A test split comes out of the same seeded permutation: train / val / test partition
    the 1,797 examples, and the same split seed gives the same split."""
    d = load_digits_data(val_fraction=0.2, test_fraction=0.2, seed=0)
    assert (len(d.train_y), len(d.val_y), len(d.test_y)) == (1079, 359, 359)
    whole = load_digits_data(val_fraction=0.2, seed=0)   # the same permutation, no test split
    assert np.array_equal(whole.val_y, d.val_y)          # validation is unchanged by a test split
    together = np.concatenate([d.test_x, d.train_x])
    assert np.array_equal(np.sort(together, axis=0), np.sort(whole.train_x, axis=0))
    again = load_digits_data(val_fraction=0.2, test_fraction=0.2, seed=0)
    assert np.array_equal(again.test_y, d.test_y) and again.fingerprint == d.fingerprint
    assert d.fingerprint != load_digits_data(val_fraction=0.2, seed=0).fingerprint
    with pytest.raises(ProxyError, match="test_fraction"):
        load_digits_data(test_fraction=1.0)
    with pytest.raises(ProxyError, match="no training example"):
        load_digits_data(val_fraction=0.6, test_fraction=0.4)


def test_stdlib_corpus_files_rules():
    root = Path(sysconfig.get_paths()["stdlib"])
    files = stdlib_corpus_files()
    assert len(files) > 100
    rel = [f.relative_to(root).as_posix() for f in files]
    assert rel == sorted(rel)
    for r in rel:
        parts = r.split("/")
        assert parts[-1].endswith(".py")
        assert not {"site-packages", "test", "tests"} & set(parts[:-1]), r


@pytest.mark.skipif(sys.version_info[:3] != (3, 11, 7),
                    reason="the reference corpus is CPython 3.11.7's standard library")
def test_stdlib_corpus_is_the_reference_corpus():
    # docs/transfer.md: the hand-written reference's corpus — 799 files, these digests
    files = stdlib_corpus_files()
    blobs = [f.read_bytes() for f in files]
    digest = lambda bs: hashlib.sha256(b"".join(bs)).hexdigest()[:16]   # noqa: E731
    assert len(files) == 799
    assert digest(blobs) == "d28166cfc82e0f86"
    assert digest(b for i, b in enumerate(blobs) if i % 10 == 9) == "2a57d8748140812b"


def test_stdlib_text_data_split():
    files = stdlib_corpus_files()
    blobs = [f.read_bytes() for f in files]
    data = load_text_data()
    val = b"".join(b for i, b in enumerate(blobs) if i % 10 == 9)
    test = b"".join(b for i, b in enumerate(blobs) if i % 10 == 8)
    train = b"".join(b for i, b in enumerate(blobs) if i % 10 < 8)
    assert data.val.tobytes() == val and data.train.tobytes() == train
    assert data.test.tobytes() == test
    assert data.train.dtype == np.uint8 and data.vocab == 256
    assert data.n_files == len(files)
    assert data.size_bytes == len(val) + len(train) + len(test)
    assert data.fingerprint == hashlib.sha256(b"".join(blobs)).hexdigest()
    assert data.source.startswith("stdlib:")


def test_text_from_file(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_bytes(bytes(range(100)))
    data = load_text_data(f)
    assert data.train.tobytes() == bytes(range(80)) and data.val.tobytes() == bytes(range(90, 100))
    assert data.test.tobytes() == bytes(range(80, 90))
    assert data.n_files == 1 and data.size_bytes == 100
    assert data.fingerprint == hashlib.sha256(bytes(range(100))).hexdigest()


def test_text_from_folder(tmp_path):
    names = [f"f{i:02d}.txt" for i in range(11)] + ["sub/z.md"]  # sorted: f00..f10, sub/z.md
    for i, name in enumerate(names):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(bytes([65 + i]) * (i + 1))
    data = load_text_data(str(tmp_path))
    assert data.n_files == 12
    assert data.val.tobytes() == bytes([65 + 9]) * 10  # index 9 only
    assert data.test.tobytes() == bytes([65 + 8]) * 9  # index 8 only
    assert data.size_bytes == sum(range(1, 13)) == (len(data.train) + len(data.val)
                                                    + len(data.test))


def test_text_from_small_folder_splits_bytes(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 30)
    (tmp_path / "b").write_bytes(b"y" * 20)
    data = load_text_data(tmp_path)
    assert data.train.tobytes() == b"x" * 30 + b"y" * 10 and data.val.tobytes() == b"y" * 5
    assert data.test.tobytes() == b"y" * 5


def test_text_errors(tmp_path):
    with pytest.raises(ProxyError, match="does not exist"):
        load_text_data(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProxyError, match="empty"):
        load_text_data(tmp_path / "empty")
    (tmp_path / "tiny.txt").write_bytes(b"abc")
    with pytest.raises(ProxyError, match="3 bytes"):
        load_text_data(tmp_path / "tiny.txt")


def test_classification_batches_are_pure_functions_of_seed_and_step(digits):
    x1, y1 = classification_batch(digits, 32, seed=3, step=5)
    x2, y2 = classification_batch(digits, 32, seed=3, step=5)
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    x3, _ = classification_batch(digits, 32, seed=3, step=6)
    x4, _ = classification_batch(digits, 32, seed=4, step=5)
    assert not np.array_equal(x1, x3) and not np.array_equal(x1, x4)
    assert x1.shape == (32, 64) and x1.dtype == np.float32 and y1.dtype == np.int64
    with pytest.raises(ProxyError, match="batch_size"):
        classification_batch(digits, 10_000, seed=0, step=0)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), step=st.integers(0, 10**6), batch=st.integers(1, 8),
       seq_len=st.integers(1, 40))
def test_lm_batch_shift_and_determinism(seed, step, batch, seq_len):
    tokens = np.arange(200, dtype=np.int64)
    x, y = lm_batch(tokens, batch, seq_len, seed, step)
    assert x.shape == y.shape == (batch, seq_len) and x.dtype == y.dtype == np.int64
    assert np.array_equal(y, x + 1)  # y is x shifted by one token
    assert np.array_equal(x[:, 1:] - x[:, :-1], np.ones((batch, seq_len - 1), dtype=np.int64))
    assert y.max() < 200
    x2, _ = lm_batch(tokens, batch, seq_len, seed, step)
    assert np.array_equal(x, x2)


def test_lm_batch_differs_between_steps_and_checks_length():
    tokens = np.frombuffer(bytes(range(256)) * 40, dtype=np.uint8)
    a, _ = lm_batch(tokens, 8, 32, seed=0, step=0)
    b, _ = lm_batch(tokens, 8, 32, seed=0, step=1)
    assert not np.array_equal(a, b)
    with pytest.raises(ProxyError, match="too short"):
        lm_batch(tokens[:32], 2, 32, seed=0, step=0)


def test_lm_eval_windows():
    tokens = np.arange(1000, dtype=np.int64)
    x, y = lm_eval_windows(tokens, 50, 10)
    assert x.shape == y.shape == (10, 50)
    assert x[0, 0] == 0 and y[-1, -1] == 999  # spans the whole array
    assert np.array_equal(y, x + 1) and len(np.unique(x[:, 0])) == 10
    x2, _ = lm_eval_windows(tokens, 50, 10)
    assert np.array_equal(x, x2)
    with pytest.raises(ProxyError, match="too short"):
        lm_eval_windows(tokens[:50], 50, 1)
    with pytest.raises(ProxyError, match="n_windows"):
        lm_eval_windows(tokens[:60], 50, 20)
