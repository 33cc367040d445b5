# Entry points: `make run` (the main job), `make test` (the fast test suite), `make test-full` (the rest).
# Each creates or reuses a virtual environment in $(VENV).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Installed first so that the distribution's `torch>=2.4` is already satisfied.
TORCH_SPEC ?= torch==2.13.0

.PHONY: run demo test test-full venv clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

venv: $(VENV)/.installed

# The main job: PPO on CartPole-v1 (EnvPool); solves it in a few minutes on a 2-core CPU.
run: venv
	$(PY) scripts/ppo.py

# Every estimator on a small random rollout, checked against the float64 reference.
demo: venv
	$(PY) scripts/demo.py

# The tests run the Triton kernels on the CPU through Triton's interpreter.
# `test`: the fast suite (minutes on 2 cores): every estimator in both layouts with terminations and
# truncations, every dtype, every bad input, a sample of each kernel test matrix, the trainers' short
# runs and resume. `test-full`: the rest, so that the two together run every test once: the
# exhaustive matrices (marker `exhaustive`), the learning runs and the end-to-end runs of whole scripts
# or of several processes (`slow`).
test: venv
	TRITON_INTERPRET=1 $(PY) -m pytest -q -ra -m "not exhaustive and not slow"

test-full: venv
	TRITON_INTERPRET=1 $(PY) -m pytest -q -ra -m "exhaustive or slow"

clean:
	rm -rf $(VENV)
