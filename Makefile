# Two entry points: `make run` (the main job) and `make test` (the test suite).
# Each creates or reuses a virtual environment in $(VENV).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Installed first so that the distribution's `torch>=2.4` is already satisfied.
TORCH_SPEC ?= torch==2.13.0

.PHONY: run demo test venv clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

venv: $(VENV)/.installed

# The main job: PPO on CartPole-v1 (EnvPool); solves it in a few minutes on a 2-core CPU.
run: venv
	$(PY) scripts/ppo.py

demo: venv
	$(PY) scripts/demo.py

# The Triton kernels run on the CPU through Triton's interpreter.
test: venv
	TRITON_INTERPRET=1 $(PY) -m pytest -q -ra

clean:
	rm -rf $(VENV)
