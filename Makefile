# Sugar over dev.sh, which creates .venv and installs what is missing.
.PHONY: reproduce quick test setup

reproduce:
	./dev.sh reproduce

quick:
	./dev.sh reproduce --quick

test:
	./dev.sh test

setup:
	./dev.sh setup
