# Engram: `make run` serves UI + API + worker on 127.0.0.1:$(PORT); `make test` runs every check.
# Both do all set-up on a fresh machine: venv, torch (CPU, from the local wheel dir) first, the
# project with dev extras and the Python client (clients/python) with its integrations, the embedded
# database, migrations.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PORT ?= 8000
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
CLIENT := clients/python
# Reinstall whenever pyproject.toml or the client's changes.
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(CLIENT)/pyproject.toml | sha1sum | cut -c1-12)

# axe-core (MPL-2.0) runs the accessibility check inside the browser tests; installed from the npm
# registry into var/ (gitignored), pinned so a new rule release cannot change the verdict unseen.
AXE_VERSION := 4.14.1
AXE := var/node/node_modules/axe-core/axe.min.js

.PHONY: install bytecode chromium db run test test-fast screenshots lint bench bench-me bench-locomo bench-recall bench-sizes bench-cost bench-deletion evaluate db-stop clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(CLIENT)/pyproject.toml | $(PY)
	$(PIP) install --upgrade pip setuptools wheel
	# torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
	$(PIP) install --no-compile torch==2.13.0
	# The server with its dev tools, and the Python client with every integration (its tests run here).
	$(PIP) install --no-compile -e '.[dev]' -e './$(CLIENT)[all]'
	# Their bytecode on every core: pip writes it one file at a time (45 s against 31 s here). As with pip, a file
	# that does not compile (a package's own template) is left to fail where it would, if it is ever imported.
	$(PY) -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_paths()['purelib'], quiet=2, workers=0)"
	rm -f $(VENV)/.installed-*
	touch $@

$(AXE):
	npm install --prefix var/node --no-audit --no-fund axe-core@$(AXE_VERSION)

# The embedder's ONNX graph, exported offline from the installed weights (memory/embedder_onnx.py).
ONNX := var/models/.exported-$(shell sha1sum memory/embedder_onnx.py | cut -c1-12)
$(ONNX): $(STAMP) memory/embedder_onnx.py
	$(PY) -m memory.embedder_onnx
	mkdir -p var/models && rm -f var/models/.exported-* && touch $@

# The project's own modules byte-compiled once: an environment that sets PYTHONDONTWRITEBYTECODE (this one does)
# would otherwise have every process the suite starts, servers and workers among them, compile them again.
bytecode: $(STAMP)
	$(PY) -m compileall -q -j 0 config memory api review procedures tests $(CLIENT)/src manage.py

install: $(STAMP) $(AXE) $(ONNX) bytecode

# Browser tests drive Debian's Chromium; Playwright cannot download browsers here.
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update && apt-get install -y chromium; }

db: install
	$(PY) manage.py migrate --noinput

run: db
	$(PY) manage.py seed_demo
	$(PY) manage.py serve --port $(PORT)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy .
	$(PY) manage.py makemigrations --check --dry-run

# The remaining set-up and the checks side by side first: the model's export (about 15 s) and mypy (about 35 s) each
# keep a core busy while Chromium's install waits on the network. Then the tests: two processes, one test file
# at a time each (files share fixtures and live servers; the most expensive files go first, see tests/conftest.py);
# then, alone, the tests that stop the database server the others use.
test: $(STAMP)
	$(MAKE) --no-print-directory -j3 --output-sync=target install chromium lint
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m "not serial"
	$(PY) -m pytest -m serial

test-fast: install
	$(PY) -m pytest -m "not browser and not worker" -x -q

# The browser tests that take the screenshots the docs show, writing them into docs/screenshots (a plain test run
# keeps them in a temporary directory, so that it leaves the checkout unchanged).
SCREENSHOT_TESTS = tests/evaluation/test_evaluate_command.py tests/review/test_overview_browser.py \
	tests/review/test_demo_browser.py tests/review/test_retrieval_inspector_browser.py \
	tests/review/test_queue_browser.py tests/me/test_scale_browser.py tests/procedures/test_browser.py
screenshots: install chromium
	ENGRAM_SCREENSHOTS=1 $(PY) -m pytest -q -n 2 --dist loadfile $(SCREENSHOT_TESTS)

bench: db
	$(PY) bench/retrieval.py

bench-me: db
	$(PY) bench/me_page.py

# Retrieval quality and latency on LoCoMo through HTTP (reads ../shared/datasets/locomo/; skips if absent).
bench-locomo: db
	$(PY) bench/locomo.py $(ARGS)

# Recall that generalises: LoCoMo under the two-fold protocol (every tunable choice made on the other half) and the
# everyday paraphrase set against exact MiniLM alone, one table (docs/retrieval.md "make bench-recall").
bench-recall: db
	$(PY) bench/locomo.py --folds --paraphrase $(ARGS)

# Retrieve against one subject of 1,000, 10,000 and 100,000 records (its own database).
bench-sizes: db
	$(PY) bench/retrieval.py --profile sizes $(ARGS)

# Retrieve and conversation-ingest cost as ratios to baselines of the same run (the in-process floor, the
# embedder's own rate), at 600 to 100,000 records per subject (its own database).
bench-cost: db
	$(PY) bench/cost.py $(ARGS)

# Single-record deletions while three clients retrieve and one writes on the same subject; then a deletion's
# purge and verification time with 10,000 retrieval logs on the subject against none (its own database).
bench-deletion: db
	$(PY) bench/deletion.py $(ARGS)

evaluate: db
	$(PY) manage.py evaluate

db-stop:
	@$(PY) -c "from config.embedded_db import stop_server; from pathlib import Path; stop_server(Path('.'))"

clean: db-stop
	rm -rf $(VENV) var
