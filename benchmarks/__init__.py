"""Benchmarks run by `make bench` (never by `make test`); each module has a ``main()``."""
