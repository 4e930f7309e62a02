"""The Python snippets of README.md run as written (users copy them): the quick start trains on the mock
dataset, the metrics snippet computes metrics of its embeddings, the inference snippet embeds images and a
dataframe. The pretrained-model snippet needs a download and the plugin snippet needs a package; they are not
run here (the zoo and plugin loading have their own tests)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
import torch

from oml_core.registry import Registry
from oml_core.registry.manager import BUILTINS_NAME

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks() -> dict[str, list[str]]:
    """The ```python blocks of the README by the ``## `` heading they stand under."""
    blocks: dict[str, list[str]] = {}
    for section in re.split(r"^## ", README.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]:
        heading = section.splitlines()[0].strip()
        blocks.setdefault(heading, []).extend(BLOCK.findall(section))
    return blocks


def test_the_readme_has_the_snippets_this_test_runs():
    blocks = python_blocks()
    assert len(blocks["Quick start in Python"]) == 1
    assert len(blocks["Validation and metrics in Python"]) == 1
    assert len(blocks["Pretrained models"]) == 2  # from_pretrained (a download), then the inference functions
    assert len(blocks["Coming from OML"]) == 1


def test_the_coming_from_oml_snippet_runs_as_written(capsys):
    import oml_losses

    namespace: dict = {}
    exec(compile(python_blocks()["Coming from OML"][0], "README: coming from OML", "exec"), namespace)
    assert isinstance(namespace["criterion"], oml_losses.TripletLossWithMiner)
    assert "'norm_resize'" in capsys.readouterr().out


@pytest.mark.slow
def test_the_python_snippets_run_as_written(tmp_path, monkeypatch):
    from oml_core.builtins.transforms import get_normalisation_resize
    from oml_core.datasets import ImageQueryGalleryLabeledDataset
    from oml_core.inference import inference

    monkeypatch.chdir(tmp_path)
    blocks = python_blocks()
    namespace: dict = {}

    torch.manual_seed(0)
    exec(compile(blocks["Quick start in Python"][0], "README: quick start", "exec"), namespace)
    assert set(namespace["criterion"].last_logs) >= {"active_tri", "pos_dist", "neg_dist"}
    assert (tmp_path / "mock_dataset" / "df.csv").is_file()

    df_val = namespace["df_val"]
    transform = get_normalisation_resize(64)
    dataset = ImageQueryGalleryLabeledDataset(df_val, dataset_root="mock_dataset/", transform=transform)
    namespace.update(dataset=dataset, embeddings=inference(namespace["extractor"], dataset, batch_size=32))
    exec(compile(blocks["Validation and metrics in Python"][0], "README: metrics", "exec"), namespace)
    metrics = namespace["metrics"]
    assert set(metrics) == {"cmc", "precision", "map", "recall", "ndcg"}  # precision: its default top_k (5,)
    assert set(metrics["cmc"]) == {1, 5} and 0 <= float(metrics["cmc"][1]) <= float(metrics["cmc"][5]) <= 1

    for name, source in zip(["a.jpg", "b.jpg"], df_val["path"][:2]):
        shutil.copy(tmp_path / "mock_dataset" / source, tmp_path / name)
    namespace.update(model=namespace["extractor"], transform=transform)
    exec(compile(blocks["Pretrained models"][1], "README: inference", "exec"), namespace)
    assert namespace["features"].shape == (2, 512)
    n_train, n_val = len(namespace["df_train"]), len(namespace["df_val"])
    assert namespace["emb_train"].shape == (n_train, 512) and namespace["emb_val"].shape == (n_val, 512)
    assert (tmp_path / "embeddings.pt").is_file()


SHELL_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: The section whose commands set up a machine (``make run``, ``make test``): CI runs ``make test`` itself.
SETUP_SECTION = "The two commands"
#: Commands that train: run with ``max_epochs=1`` unless they set it.
TRAINING_COMMANDS = {"train", "train-postprocessor"}


def shell_commands() -> list[str]:
    """Every command line of the README's ```bash blocks, but the set-up section's, in order."""
    commands = []
    for section in re.split(r"^## ", README.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]:
        if section.startswith(SETUP_SECTION):
            continue
        for block in SHELL_BLOCK.findall(section):
            commands += [line for line in block.splitlines() if line.strip()]
    return commands


def test_the_readme_has_the_shell_commands_this_test_runs():
    commands = shell_commands()
    assert len(commands) == 21
    assert all(shlex.split(command, comments=True)[0] == "oml" for command in commands)
    setup = SHELL_BLOCK.findall(README.read_text(encoding="utf-8"))[0]
    assert [line.split()[:2] for line in setup.splitlines()] == [["make", "run"], ["make", "test"]]


@pytest.mark.slow
def test_every_shell_command_runs_as_written(tmp_path, oml_cache_dir, monkeypatch, capsys):
    """Each command of the README, top to bottom in one folder as a user types them (``oml ARGS`` is
    ``oml_core.cli.main(ARGS)``), with ``max_epochs=1`` added to the ones that train and set no epochs; what
    each one says it does is checked."""
    from oml_core.cli import main

    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.chdir(tmp_path)
    outputs = {}
    for command in shell_commands():
        argv = shlex.split(command, comments=True)[1:]
        if argv and argv[0] in TRAINING_COMMANDS and not any(a.startswith("max_epochs=") for a in argv):
            argv.append("max_epochs=1")
        status = main(argv)
        captured = capsys.readouterr()
        assert status == 0, f"{command}\n{captured.out[-2000:]}\n{captured.err[-2000:]}"
        assert "Traceback" not in captured.err, command
        outputs[command] = captured.out

    def out(start: str) -> str:
        return next(text for command, text in outputs.items() if command.startswith(start))

    assert (tmp_path / "my_dataset" / "df.csv").is_file()
    first_run = tmp_path / "logs" / "first_run" / "checkpoints"
    assert (first_run / "best.ckpt").is_file() and (first_run / "last.ckpt").is_file()
    assert "name: sgd" in out("oml train --show-config") and "momentum: 0.9" in out("oml train --show-config")
    assert "Resumed from:     logs/first_run/checkpoints/last.ckpt" in out("oml train resume=")
    assert "OVERALL/cmc/1" in out("oml validate ")
    (predictions,) = tmp_path.glob("logs/*_prediction/predictions.json")
    assert predictions.is_file()
    assert (tmp_path / "logs" / "reranker" / "checkpoints" / "best.ckpt").is_file()
    # every installed plugin and every component it provides load (the one `oml plugins --check` of the suite)
    registry = Registry()
    plugins = [r.info.name for r in registry.plugins() if r.info.name != BUILTINS_NAME]
    count = sum(len(names) for plugin in plugins for names in registry.provided_by(plugin).values())
    checked = out("oml plugins --check")
    assert checked.splitlines()[-1] == f"OK: {len(plugins)} plugins, {count} components load"
    assert "FAILED" not in checked and "BROKEN" not in checked
    assert "in_features" in out("oml registry loss arcface")
    assert out("oml --version").startswith("oml-core ")
    assert (tmp_path / "oml-acme" / "oml_acme" / "plugin.py").is_file()
    assert "Next: pip install -e" in out("oml plugin new oml-acme")


#: The README's ```text block of the rows that ``make run`` prints: the final table's header and its cmc@1 row.
FIGURES_BLOCK = re.compile(r"^```text\n(metric .*?)^```", re.MULTILINE | re.DOTALL)


@pytest.mark.slow
def test_make_runs_training_prints_the_readmes_figures_and_learns(run_oml, tmp_path):
    """``make run``'s training (``oml train``, the default config, one thread as the Makefile runs it) prints the
    README's rows of cmc@1 (start, best and last) as they stand there, the README's sentence rounds the same
    figures, and the last epoch is at least 0.25 above the initial weights (issue 36)."""
    (block,) = FIGURES_BLOCK.findall(README.read_text(encoding="utf-8"))
    header, cmc_row = block.splitlines()
    start, best, last = (float(value) for value in cmc_row.split()[1:])
    prose = " ".join(README.read_text(encoding="utf-8").split())
    assert (
        f"goes from {start:.2f} with the initial weights to {best:.2f} at its best epoch and {last:.2f}"
        in prose
    )
    assert last - start >= 0.25
    make_run = "run: install\n\tOMP_NUM_THREADS=1 ONEDNN_MAX_CPU_ISA=AVX2 $(VENV)/bin/oml train\n"
    assert make_run in (README.parent / "Makefile").read_text(encoding="utf-8")

    done = run_oml(
        "train",
        f"logs_root={tmp_path}",
        env={"OMP_NUM_THREADS": "1", "ONEDNN_MAX_CPU_ISA": "AVX2"},
        timeout=600,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    printed = done.stdout.splitlines()
    assert header in printed and cmc_row in printed, done.stdout[-3000:]
