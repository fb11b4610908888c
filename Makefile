# The two commands of the README: `make run` and `make test`. Both install what they need
# into .venv (Python packages from PyPI, jars from Maven Central into .cache/) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test unit install clean

run: $(VENV)/.installed
	$(BIN)/shadowtwin demo

test: $(VENV)/.installed
	$(BIN)/shadowtwin jars fetch
	$(BIN)/pytest

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
	rm -rf $(VENV) .cache .run
