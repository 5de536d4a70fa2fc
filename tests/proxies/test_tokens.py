"""nanoGPT-style uint16 and uint32 token files through numpy.memmap; a uint32 vocabulary
above 65,535 trained end to end (slow)."""
import pickle

import numpy as np
import pytest

from mutune.errors import ProxyError
from mutune.proxies.data import lm_batch
from mutune.proxies.tokens import load_token_data
from tests.conftest import config_error


def _write(path, tokens, dtype=np.uint16):
    np.asarray(tokens, dtype=dtype).tofile(path)


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


def test_uint32_token_files_hold_ids_above_65535(tmp_path):
    big = 70_000 + np.arange(1000) % 500                  # every id above 16 bits
    _write(tmp_path / "train.bin", big, np.uint32)
    _write(tmp_path / "val.bin", big[:200], np.uint32)
    d = load_token_data(tmp_path, vocab=70_500, dtype="uint32")
    assert d.dtype == "uint32" and d.train.dtype == np.dtype("<u4")
    assert len(d.train) == 1000 and int(d.train.max()) == 70_499 and d.size_bytes == 4800
    x, y = lm_batch(d.train, 4, 8, seed=1, step=3)
    assert x.dtype == np.int64 and x.min() >= 70_000 and np.array_equal(x[:, 1:], y[:, :-1])
    again = pickle.loads(pickle.dumps(d))
    assert again.dtype == "uint32" and np.array_equal(again.val, d.val)
    # the same bytes read as uint16 are other data: another fingerprint
    _write(tmp_path / "small.bin", np.arange(100), np.uint32)
    as32 = load_token_data(tmp_path / "small.bin", vocab=100, dtype="uint32")
    as16 = load_token_data(tmp_path / "small.bin", vocab=100)
    assert len(as16.train) == 2 * len(as32.train) and as16.fingerprint != as32.fingerprint
    with pytest.raises(ProxyError, match="vocab 70500 > 65,536 with uint16.*data.dtype: uint32"):
        load_token_data(tmp_path, vocab=70_500)
    (tmp_path / "six.bin").write_bytes(bytes(6))
    with pytest.raises(ProxyError, match="not a whole number of uint32 tokens"):
        load_token_data(tmp_path / "six.bin", vocab=10, dtype="uint32")
    with pytest.raises(ProxyError, match="token dtype 'int8'"):
        load_token_data(tmp_path, vocab=10, dtype="int8")


def test_config_refuses_a_vocab_uint16_files_cannot_hold(tmp_path):
    from mutune.config import load_config, parse_config

    d = load_config("configs/gpt-text.yaml").model_dump(mode="json")
    d["data"] = {"kind": "tokens", "path": str(tmp_path)}
    d["model"]["vocab"] = 70_000
    with config_error("data.dtype", "'uint16'", "model.vocab (70000) > 65,536"):
        parse_config(d)
    d["data"]["dtype"] = "uint32"
    assert parse_config(d).data.dtype == "uint32"


@pytest.mark.slow
def test_a_uint32_vocabulary_above_65535_trains_end_to_end(ray_local, tmp_path):
    """A GPT on a generated uint32 token folder with vocabulary 70,000 (ids up to 69,999):
    proxy sweeps, transfer, the target run and the report, recorded in SQLite."""
    import mutune
    from mutune.config import load_config, parse_config

    rng = np.random.default_rng(0)
    for name, n in (("train", 20_000), ("val", 4_000), ("test", 4_000)):
        # a Markov-ish stream over a few hundred ids spread over the whole vocabulary
        ids = rng.choice(np.arange(0, 70_000, 250), size=n) + (np.arange(n) % 3)
        _write(tmp_path / f"{name}.bin", ids, np.uint32)
    d = load_config("configs/gpt-text.yaml").model_dump(mode="json")
    d["data"] = {"kind": "tokens", "path": str(tmp_path), "dtype": "uint32"}
    d["model"].update(vocab=70_000, base_width=16, seq_len=16)
    d["widths"] = [16, 32]
    d["target"]["width"] = 64
    d["search"]["num_samples"] = 3
    d["search"]["scheduler"].update(grace_period=3, reduction_factor=3, max_t=9)
    d["train"].update(batch_size=4, eval_every=3, eval_windows=8)
    d["search"]["space"].pop("output_mult")
    d["transfer"].update(confirm_replicates=0, gate_rounds=0)     # no design: seconds, not minutes
    d["target"]["num_workers"] = 1
    cfg = parse_config(d)
    url = f"sqlite:///{tmp_path / 'u32.db'}"
    result = mutune.run(cfg, db=url, out_dir=tmp_path / "out", progress=False)
    rep = result.report
    assert rep["status"] == "completed", rep.get("reason")
    assert all(np.isfinite(p["best_val_loss"]) for p in rep["proxies"])
    assert np.isfinite(rep["target"]["val_loss"]) and np.isfinite(rep["target"]["test_loss"])
    # a loss that knows 70,000 classes: at most ln(70000) ≈ 11.2 nats plus init noise
    assert rep["target"]["val_loss"] < np.log(70_000) + 1.0
