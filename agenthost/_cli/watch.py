"""``agenthost watch``: load a directory and log every reload until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from agenthost._cli.arguments import add_command, directory, host_options, isolation
from agenthost._cli.events import json_event, summary, text_event
from agenthost._host import PluginHost

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(
        commands, "watch", run, needs_directory=True,
        help="load a directory and log every reload until Ctrl-C",
    )  # fmt: skip
    directory(sub)
    sub.add_argument("--json", action="store_true", help="one JSON object per event")
    sub.add_argument("--debounce", type=float, metavar="MS", help="debounce window in ms")
    isolation(sub)
    sub.add_argument("--create", action="store_true", help="create the directory if missing")


def run(args: argparse.Namespace) -> int:
    debounce = args.debounce / 1000 if args.debounce is not None else None
    host = PluginHost(Path(args.dir), watch=True, debounce=debounce, **host_options(args))
    printer = json_event if args.json else text_event
    host.on_event(lambda event: printer(event, sys.stdout))
    stop = threading.Event()

    def request_stop(signum: int, frame: object) -> None:
        stop.set()

    previous = signal.signal(signal.SIGTERM, request_stop)
    try:
        host.start()
        print(summary(host), file=sys.stderr, flush=True)
        print(
            f"watching {host.directory} ({host.watch_mode}, debounce {host.debounce * 1000:g} ms); "
            "Ctrl-C to stop",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        # A second Ctrl-C must not interrupt the orderly retirement of every plugin.
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            host.stop()
        finally:
            signal.signal(signal.SIGINT, interrupt)
            signal.signal(signal.SIGTERM, previous)
    print("stopped", file=sys.stderr, flush=True)
    return 0
