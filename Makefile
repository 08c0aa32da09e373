# greylab: every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install demo test test-fast check format bench clean browser tcc

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

install: $(BIN)/.installed

## demo: the main job on embedded defaults (local SQLite MLflow store, ephemeral Prefect)
demo: install
	$(BIN)/greylab demo

## check: lint, format and types
check: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

## browser: Debian's Chromium for the browser tests (Playwright drives it; nothing downloaded)
browser:
	@command -v chromium >/dev/null || { apt-get update -q && apt-get install -y -q chromium; } \
		|| { echo "make browser: install Debian's chromium (apt-get install chromium)"; exit 1; }

## tcc: the Tiny C Compiler, optional: drive searches compile their simulators 2-5x faster
## with it (models/drivetrain/jit.py); without it they use cc
tcc:
	@command -v tcc >/dev/null || { apt-get update -q && apt-get install -y -q tcc; } \
		|| echo "make tcc: optional, not installed (apt-get install tcc); drive searches use cc"

## test: checks, then every test (fast, slow, integration and browser), on as many pytest
## workers as the machine has cores, at most 4 (pytest-xdist; every test is independent);
## the 25 slowest are listed at the end (issue 31: where the suite's time goes)
test: check browser tcc
	$(BIN)/pytest -m "" -p no:cacheprovider -n auto --maxprocesses 4 --durations=25

## test-fast: the quick loop while developing
test-fast: install
	$(BIN)/pytest -m "not slow and not integration and not browser" -x -q -n auto --maxprocesses 4

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

## bench: every benchmark, repeated (median, range, targets met in k/N runs; ratios against
## baselines of the same run; JSON in build/bench/), then README's figure blocks from the JSON
bench: install
	PYTHONPATH=. $(BIN)/python benchmarks/press_detect.py --repeats 5
	PYTHONPATH=. $(BIN)/python benchmarks/nist_strd.py --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/press_vs_scipy_fd.py --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/inverse.py --repeats 5
	PYTHONPATH=. $(BIN)/python benchmarks/press_calibration.py 100 30 --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/sensor_design.py --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/drive_search.py speed --seed 0 --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/drive_profile.py profile --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/drive_profile.py baseline --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/drive_jit.py --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/drive_work_rate.py --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/sqlite_journal.py --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/cli_overhead.py --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/cli_figures.py --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/dask_scaling.py --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/drive_timeline.py --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/drive_timeline.py --refine-at-once off --breed-ahead 0 --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/emps_validation.py --repeats 3
	PYTHONPATH=. $(BIN)/python benchmarks/paper_modes.py --seeds 5 --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/drive_recovery.py single --machines 30 --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/drive_recovery.py kit --structures 20 --repeats 1
	rm -f build/bench/search_rows.jsonl
	PYTHONPATH=. $(BIN)/python benchmarks/drive_recovery.py search --machines 2 --repeats 1 --rows build/bench/search_rows.jsonl
	PYTHONPATH=. $(BIN)/python benchmarks/drive_recovery_recheck.py --rows build/bench/search_rows.jsonl --residuals --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/drive_evidence.py --runs 100 --named-runs 3 --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/drive_gain_profile.py --seed 0 --machine 9 --repeats 1
	PYTHONPATH=. $(BIN)/python benchmarks/readme_figures.py

clean:
	rm -rf .greylab .pytest_cache .mypy_cache .ruff_cache
