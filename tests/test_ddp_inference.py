"""``oml validate`` and ``oml predict`` on 2 CPU processes (DDP, gloo) give exactly what one process gives.

The 2-process runs are real DDP runs in a subprocess (Lightning re-runs the script or the ``oml`` command as the
second process; inside pytest it would re-run the test session). Batches of 7 do not divide the mock dataset's
splits, and their halves are uneven, so DDP pads the processes' shares with repeated items, which must count
once. The single-process runs go in this process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from oml_core.config.compose import compose_config
from oml_core.lightning.pipelines import extractor_prediction_pipeline
from tests.scripts.oml_forkserver import OmlForkServer

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
from ddp_inference import validate  # noqa: E402

pytestmark = pytest.mark.slow


def run_script(
    server: OmlForkServer, out: Path, cache_dir: Path, name: str, pipeline: str, devices: int
) -> dict[int, dict]:
    """Run ``scripts/ddp_inference.py`` in a process of its own (forked by ``server``; Lightning starts the other
    ranks as new interpreters); the records of its processes by rank."""
    env = {**os.environ, "OML_CACHE_DIR": str(cache_dir), "OMP_NUM_THREADS": "1"}
    done = server.run(
        [str(out), name, pipeline, str(devices)], env, timeout=240, script=SCRIPTS / "ddp_inference.py"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {rank: json.loads((out / f"{name}_rank{rank}.json").read_text()) for rank in range(devices)}


def test_two_processes_validate_to_the_single_process_metrics(
    tmp_path, oml_cache_dir, monkeypatch, oml_fork_server
):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    single = validate(tmp_path, "single", 1)
    ddp = run_script(oml_fork_server, tmp_path, oml_cache_dir, "ddp", "validate", 2)

    assert set(single["metrics"]) == {
        "OVERALL/cmc/1",
        "OVERALL/cmc/5",
        "OVERALL/precision/5",
        "OVERALL/map/5",
        "OVERALL/fnmr@fmr/0.1",
        "OVERALL/pcf/0.5",
    }
    assert ddp[0]["metrics"] == pytest.approx(single["metrics"], abs=1e-6)
    assert ddp[1]["metrics"] == ddp[0]["metrics"]
    assert ddp[0]["run_dir"] == ddp[1]["run_dir"]  # one run directory for both processes
    assert len(list((tmp_path / "ddp").iterdir())) == 1
    # only the process of rank 0 reports (`oml validate` prints the report where is_main_process)
    assert [record["is_main_process"] for record in (single, ddp[0], ddp[1])] == [True, True, False]

    # the gallery sharded across the processes (metric_args.shard_gallery): the same retrieval metrics
    sharded = run_script(oml_fork_server, tmp_path, oml_cache_dir, "sharded", "validate_sharded", 2)
    retrieval = {
        key: value for key, value in single["metrics"].items() if "fnmr" not in key and "pcf" not in key
    }
    assert len(retrieval) == 4
    assert sharded[0]["metrics"] == pytest.approx(retrieval, abs=1e-6) == sharded[1]["metrics"]


def predict_overrides(save_dir: Path, *extra: str) -> list[str]:
    """``oml predict``'s default config (a random ResNet18) on the mock images at 32 px, in batches of 7."""
    return [
        f"save_dir={save_dir}",
        "bs=7",
        "transforms_predict.args.im_size=32",
        "lightning_trainer_extra_args.enable_progress_bar=false",
        *extra,
    ]


def test_oml_predict_on_two_processes_writes_the_single_process_file(
    tmp_path, run_oml, oml_cache_dir, monkeypatch
):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    cfg = compose_config("extractor_prediction_pipeline", predict_overrides(tmp_path / "single"))
    single = extractor_prediction_pipeline(OmegaConf.to_container(cfg))

    done = run_oml("predict", *predict_overrides(tmp_path / "ddp", "devices=2"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("predictions have been saved") == 1  # by the process that started the run
    expected = json.loads(single.predictions_path.read_text())
    got = json.loads((tmp_path / "ddp" / "predictions.json").read_text())
    assert list(got) == list(expected) == single.paths  # every image once, in the same order
    assert len(got) == 192  # not divisible by 7, nor 7 by 2
    torch.testing.assert_close(
        torch.tensor(list(got.values())), torch.tensor(list(expected.values())), atol=1e-6, rtol=0
    )


def test_two_nodes_started_by_torchrun_validate_to_the_single_process_metrics(
    tmp_path, oml_cache_dir, monkeypatch
):
    """Two torchrun launches on this machine, one per "node" (``--nnodes=2 --node_rank=0|1``, one process each),
    meet at a rendezvous on localhost as two machines would: ``num_nodes=2 devices=1``. Lightning starts no
    process itself; the processes share the run directory that ``logs_folder`` names."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    single = validate(tmp_path, "single", 1)
    env = {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir), "OMP_NUM_THREADS": "1"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1"]
    rendezvous = ["--master_addr=127.0.0.1", f"--master_port={free_port()}"]
    script = [str(SCRIPTS / "ddp_inference.py"), str(tmp_path), "nodes", "validate", "1", "2"]
    nodes = [
        subprocess.Popen(
            [*torchrun, f"--node_rank={rank}", *rendezvous, *script],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for rank in range(2)
    ]
    for node in nodes:
        _, err = node.communicate(timeout=240)
        assert node.returncode == 0, err[-3000:]
    ranks = [json.loads((tmp_path / f"nodes_rank{rank}.json").read_text()) for rank in range(2)]
    assert ranks[0]["metrics"] == pytest.approx(single["metrics"], abs=1e-6)
    assert ranks[1]["metrics"] == ranks[0]["metrics"]
    assert ranks[0]["run_dir"] == ranks[1]["run_dir"] == str(tmp_path / "nodes" / "run")
    assert [rank["is_main_process"] for rank in ranks] == [True, False]  # the node of rank 0 reports


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
