"""The transfer plot never zooms onto rounding noise: identical optima get two octaves."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from mutune.services.report.plots import at_least_two_octaves, plot_transfer  # noqa: E402


def test_identical_optima_are_shown_on_two_octaves_not_on_float_noise(tmp_path):
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.plot([64, 128, 256], [0.01, 0.01 * (1 + 1e-15), 0.01], "o")
    at_least_two_octaves(ax)
    lo, hi = ax.get_ylim()
    assert hi / lo >= 4.0 - 1e-9 and lo < 0.01 < hi
    ax.set_ylim(1e-4, 1.0)                    # a wide axis is left alone
    at_least_two_octaves(ax)
    assert ax.get_ylim() == (1e-4, 1.0)
    plt.close(fig)
    report = {"rules": [{"hyperparameter": "lr", "widths": [64, 128, 256],
                         "optima": [0.01, 0.01, 0.01], "intercept": -4.605, "slope": 0.0,
                         "transferred_value": 0.01, "verdict": "fallback",
                         "transfer_form": "flat"}],
              "target": {"width": 1024, "val_loss": 0.1}, "loss_law": {}}
    assert plot_transfer(report, tmp_path / "t.png").stat().st_size > 5_000
