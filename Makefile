# The two commands of the README: `make run` and `make test`. Both install what they need
# into .venv (Python packages from PyPI, jars from Maven Central into .cache/) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test unit install clean

run: $(VENV)/.installed
	$(BIN)/shadowtwin demo

# The container tests need a Docker engine: docker/engine starts one (as root, from Debian's
# docker.io) or fails; docker/build brings the images up to date; the engine it started is
# stopped again at the end, whatever the outcome.
test: $(VENV)/.installed
	$(BIN)/shadowtwin jars fetch
	scripts/chromium
	docker/engine start
	status=0; docker/build && $(BIN)/pytest || status=$$?; docker/engine stop; exit $$status

unit: $(VENV)/.installed
	$(BIN)/pytest -m "not integration"

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

clean:
	-$(BIN)/shadowtwin kafka stop
	-docker/engine stop
	rm -rf $(VENV) .cache .run
