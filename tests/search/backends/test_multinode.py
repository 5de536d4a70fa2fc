"""The same sweep on an existing two-node Ray cluster (``ray.address``), and with the second node
killed mid-sweep (slow): with ``ray.storage`` on a shared folder, the killed node's checkpoints
(Ray's node-local copies) are removed with it, and its trials resume on the other node from
the remote checkpoints. ``ray.cluster_utils.Cluster`` starts both nodes on this machine; the
sweep runs in a fresh interpreter because this test session already holds a local Ray."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]

_SCRIPT = textwrap.dedent("""
    import glob, itertools, json, os, shutil, signal, sys, tempfile
    from ray.cluster_utils import Cluster
    from ray.tune import Callback
    from tests.conftest import make_tiny_config
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.pipeline.recording import MemoryRecorder
    from mutune.search.searchers import make_searcher
    from mutune.search.searchers.space import trial_seeds
    from mutune.search.backends.ray_tune.cluster import ray_cluster
    from tests.search.runs import run_trials

    kill, drain = sys.argv[1] == "kill", sys.argv[1] == "drain"
    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    second = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    cfg = make_tiny_config()
    d = cfg.model_dump(mode="json")
    # kill: the harness learns each trial's worker from its reports, so none is held back
    # (mutune/search/trial/report_hold.py) and every worker on the node dies with it
    d["ray"].update(address=cluster.address, num_cpus=2, max_failures=0 if drain else 2,
                    storage=sys.argv[3] if kill else None,
                    report_hold_s=0.0 if kill else 1.0)
    d["train"].update(checkpoint_every=3)
    if drain:   # the trials are a second long: ask Ray about the drain every 50 ms
        d["ray"]["preemption"].update(drain_poll_s=0.05)
    d["search"].update(num_samples=6)
    d["search"]["scheduler"].update(grace_period=9)   # every trial reaches step 6 unjudged
    cfg = type(cfg).model_validate(d)

    class KillSecond(Callback):
        def __init__(self, cluster, node, active):
            self.cluster, self.node, self.active, self.killed = cluster, node, active, False
            self.on_node = {}
        def __getstate__(self):   # Tune snapshots callbacks; the cluster handle stays here
            return {"killed": self.killed}
        def on_trial_result(self, iteration, trials, trial, result, **info):
            if result.get("node_id") == self.node.node_id:
                self.on_node[trial.trial_id] = (trial.path, int(result["pid"]),
                                                str(trial.config["point"]["key"]))
            else:
                self.on_node.pop(trial.trial_id, None)
            if (drain and not self.killed and result["step"] >= 3
                    and result.get("node_id") == self.node.node_id):
                # Ray drains the node for a preemption, with a deadline a minute away
                import ray, time
                from ray.core.generated import autoscaler_pb2
                ok, why = ray._private.worker.global_worker.gcs_client.drain_node(
                    self.node.node_id,
                    autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
                    "spot preemption", int(time.time() * 1000) + 60_000)
                assert ok, why
                self.killed = True
            if (self.active and not self.killed and result["step"] >= 6
                    and result.get("node_id") == self.node.node_id):
                self.killed = True
                # the node's processes die at once (a worker outlives its raylet briefly
                # and could otherwise report again), then the node leaves the cluster
                for _, pid, _ in self.on_node.values():
                    os.kill(pid, signal.SIGKILL)
                self.cluster.remove_node(self.node, allow_graceful=False)
                # its disk goes with it: the checkpoints Ray and mutune's node-local cache
                # kept there are lost
                cache = os.path.join(tempfile.gettempdir(), "mutune-ckpt", "*")
                for tid, (path, _, key) in self.on_node.items():
                    for d in [*glob.glob(os.path.join(path, "checkpoint_*")),
                              *glob.glob(os.path.join(cache, key, tid))]:
                        shutil.rmtree(d, ignore_errors=True)

    killer = KillSecond(cluster, second, kill)
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    rec = MemoryRecorder()
    with ray_cluster(cfg.ray):
        # drain: no rung stops a trial, and each trains long enough to hear the drain
        out = run_trials(None, task=task, width=16, max_t=120 if drain else 27,
                         recorder=rec, sweep_id=1, proxy_sweep_id=1, kind="proxy",
                         scheduler=None if drain else cfg.search.scheduler,
                         metric="val_loss", mode="min", ray_cfg=cfg.ray,
                         storage=sys.argv[2], name="multi", seq=itertools.count(1),
                         searcher=make_searcher(cfg.search, cfg.seed, 0),
                         seeds=trial_seeds(cfg.seed, 0, 6), checkpoint_every=3,
                         callbacks=[killer])
    cluster.shutdown()
    print("RESULT " + json.dumps({
        "killed": killer.killed, "second": second.node_id,
        "trials": [{"status": t.status, "reason": t.reason, "steps": [r["step"] for r in t.reports],
                    "nodes": t.nodes,
                    "restarts": t.timing.get("restarts"),
                    "preemptions": t.timing.get("preemptions"),
                    "repeated": t.timing.get("repeated_steps"),
                    "remote_restored": any(r.get("remote_restore_s", 0) > 0
                                           for r in t.reports),
                    "index": t.point["index"]} for t in out.trials],
        "reports": len(rec.of("trial_reported")),
        "decisions": [d["decision"] for d in rec.of("scheduler_decided")]}))
""")


def _run(mode: str, tmp_path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_DEDUP_LOGS": "0"}
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, mode, str(tmp_path / "ray"),
                           str(tmp_path / "remote")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("mode", ["kill", "drain"])
def test_sweep_on_a_two_node_cluster(tmp_path, mode):
    res = _run(mode, tmp_path)
    trials = res["trials"]
    assert sorted(t["index"] for t in trials) == list(range(6))      # every sample, once
    assert {t["status"] for t in trials} <= {"completed", "stopped"}, trials  # none failed
    for t in trials:   # every evaluation step recorded once, none missing
        assert t["steps"] == list(range(3, t["steps"][-1] + 1, 3))
    assert res["reports"] == sum(len(t["steps"]) for t in trials)
    assert len({n for t in trials for n in t["nodes"]}) == 2         # both nodes ran trials
    if mode == "drain":     # Ray's own preemption signal: no failure consumed (0 allowed)
        assert res["killed"]
        hit = [t for t in trials if t["preemptions"]]
        assert hit and all(t["restarts"] == 0 and t["repeated"] == 0 for t in trials), res
        # retried from its checkpoint (Ray may hand the retry a cached actor of the draining
        # node: actor reuse; docs/architecture.md §4.6)
        assert all(t["nodes"][0] == res["second"] for t in hit), res
    else:
        assert res["killed"]
        hit = [t for t in trials if res["second"] in t["nodes"] and t["restarts"]]
        assert hit, "a trial on the killed node was retried"
        # retried on the surviving node from its remote checkpoint: the last one (every 3
        # steps) or, when that one's background upload was cut off, the one before
        assert all(t["remote_restored"] and len(t["nodes"]) == 2 for t in hit)
        assert all(t["repeated"] <= 6 for t in hit)
