"""The rung plot: counts and cutoffs per rung from recorded scheduler events, for a promotion
sweep simulated on synthetic curves and written to the store like a live one."""
from __future__ import annotations

from mutune.search.schedulers.asha import Decision
from mutune.search.schedulers.promotion import PromotionASHA
from mutune.search.backends.simulated import power_law_curve, simulate
from mutune.services.report.rung_plot import plot_rungs, rung_summary


def test_rung_summary_matches_the_core_and_the_png_is_written(store, tmp_path):
    core = PromotionASHA(grace_period=1, reduction_factor=3, max_t=27)
    res = simulate(core, power_law_curve(1), num_samples=60, concurrency=3, max_t=27,
                   report_every=2)
    sweep = store.sweep_started({"name": "rungs"}, 0, {})
    ps = store.proxy_sweep_started(sweep, 32, {})
    ids = {k: store.trial_started(sweep, ps, "proxy", k, 32, {"lr": 0.01}, i)
           for i, k in enumerate(res.statuses)}
    for seq, j in enumerate(res.decisions, 1):
        store.scheduler_decided(ids[j.trial], j.milestone, j.value, j.cutoff,
                                j.decision.value, seq)
    (entries,) = rung_summary(store.sweep_rows(sweep)).values()
    rungs = {m: v for m, v in core.rung_values().items() if v}
    assert [e["milestone"] for e in entries] == sorted(rungs) and 27 in rungs
    for e in entries:
        m = e["milestone"]
        assert e["reached"] == len(rungs[m]) and e["paused"] == 0      # none left paused
        promoted = sum(1 for t, pm in core.promotions() if pm == m)
        passed = sum(1 for j in res.decisions if j.milestone == m
                     and j.decision is Decision.CONTINUE)
        assert e["went_on"] == promoted + passed
        assert e["stopped"] + e["went_on"] + e["diverged"] + e["completed"] == e["reached"]
        assert e["completed"] == (sum(1 for j in res.decisions if j.milestone == m and
                                      j.decision is Decision.COMPLETE))
        last_cut = [j.cutoff for j in res.decisions if j.milestone == m
                    and j.cutoff is not None][-1]
        assert e["cutoff"] == last_cut
    out = plot_rungs(store.sweep_rows(sweep), tmp_path / "rungs.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
