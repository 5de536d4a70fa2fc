"""nanoGPT-style uint16 token files through numpy.memmap."""
import pickle

import numpy as np
import pytest

from mutune.errors import ProxyError
from mutune.proxies.data import lm_batch
from mutune.proxies.tokens import load_token_data


def _write(path, tokens):
    np.asarray(tokens, dtype=np.uint16).tofile(path)


def test_folder_layout_and_fingerprint(tmp_path):
    _write(tmp_path / "train.bin", np.arange(1000) % 500)
    _write(tmp_path / "val.bin", np.arange(200) % 500)
    d = load_token_data(tmp_path, vocab=500)
    assert isinstance(d.train, np.memmap) and d.train.dtype == np.uint16
    assert len(d.train) == 1000 and len(d.val) == 200 and d.n_files == 2
    assert d.size_bytes == 2400 and len(d.fingerprint) == 64
    x, y = lm_batch(d.train, 4, 8, seed=1, step=3)
    assert x.shape == (4, 8) and np.array_equal(x[:, 1:], y[:, :-1])
    again = pickle.loads(pickle.dumps(d))       # ships paths, reopens the memmap
    assert again._arrays is None and np.array_equal(again.val, d.val)


def test_single_file_split_and_errors(tmp_path):
    f = tmp_path / "all.bin"
    _write(f, np.arange(100))
    d = load_token_data(f, vocab=100)
    assert len(d.train) == 90 and len(d.val) == 10 and d.val[0] == 90
    with pytest.raises(ProxyError, match="train tokens .* reach id 89 >= vocab 50"):
        load_token_data(f, vocab=50)
    with pytest.raises(ProxyError, match="does not exist"):
        load_token_data(tmp_path / "nope.bin", vocab=10)
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"abc")
    with pytest.raises(ProxyError, match="not a whole number of uint16"):
        load_token_data(odd, vocab=10)
    (tmp_path / "dir").mkdir()
    with pytest.raises(ProxyError, match="lacks"):
        load_token_data(tmp_path / "dir", vocab=10)
