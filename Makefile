# The two commands of the quick start, the documentation site and the benchmark. Needs only python3 (>= 3.11) and make;
# a C compiler makes the parse kernel native (without one logetl still works, in pure Python, slowly).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO   := demo-output

.PHONY: demo test check lint bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
SOURCES := pyproject.toml setup.py src/logetl/_scan.c src/logetl/_kernel.h src/logetl/_json.h src/logetl/_parquet.c

$(VENV)/.installed-run: $(BIN)/python $(SOURCES)
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python $(SOURCES)
	$(PIP) -e '.[test]'
	touch $@

$(VENV)/.installed-docs: $(BIN)/python $(SOURCES)
	$(PIP) -e '.[docs]'
	touch $@

$(VENV)/.installed-bench: $(BIN)/python $(SOURCES)
	$(PIP) -e '.[bench,spark]'
	touch $@

demo: $(VENV)/.installed-run
	mkdir -p $(DEMO)
	$(BIN)/logetl generate --overwrite --lines 200000 --seed 42 $(DEMO)/access.log
	$(BIN)/logetl join --overwrite $(DEMO)/access.log $(DEMO)/joined
	@echo
	@echo "Join result: $(DEMO)/joined/part-00000 ($$(wc -l < $(DEMO)/joined/part-00000) records); first lines:"
	@head -n 3 $(DEMO)/joined/part-00000

# two workers (pytest-xdist): much of the suite waits on child processes, JVMs and servers; each worker has its
# own Spark session, PostgreSQL server and Chromium (docs/design/testing.md); PYTEST_ARGS="-n 0" runs it serially.
# --no-loadscope-reorder: the modules go to the workers in the order tests/conftest.py gives, the longest first
PYTEST_ARGS ?= -n 2 --dist loadfile --no-loadscope-reorder

# the tests that assert a wall-clock bound run after the others, alone: beside another worker's Spark job a
# bound that holds on any idle machine would measure the neighbour instead
# --durations: every run's log ends with its slowest tests, where a new slow test shows first
test: $(VENV)/.installed-test
	status=0; $(BIN)/python -m pytest --durations=25 $(PYTEST_ARGS) -m "not timing" || status=$$?; \
	$(BIN)/python -m pytest --durations=25 -m timing || status=$$?; exit $$status

# the fast loop: no Spark, no browser, no PostgreSQL, nothing slow (markers: pyproject.toml, tests/conftest.py)
check: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q $(PYTEST_ARGS) -m "not spark and not browser and not postgres and not slow"

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests bench examples

bench: $(VENV)/.installed-bench
	$(BIN)/python bench/run.py --spark

# the documentation site, strictly (a broken link or reference fails); the result in site/, which works offline
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) $(DEMO) bench/out build site src/*.egg-info src/logetl/*.so
