"""``agenthost cluster status``: the replicas of ``serve --redis``, as their records say.

One look tells whether every replica behind the balancer is alive and serves the
same plugins, and if not, which plugin on which replica differs. redis-py is the
``cluster`` extra, so it is imported only when the command runs: ``agenthost
--help`` and every other command work without it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agenthost._cli.arguments import add_command, count, fail
from agenthost._common.install import install_command
from agenthost._common.text import inert

if TYPE_CHECKING:
    from agenthost._cluster.status import Status

__all__ = ["add_parser", "run"]

EPILOG = """\
Each replica of `agenthost serve --http ... --redis URL` keeps a record in Redis,
rewritten every second and expiring 5 s after its last beat: a replica whose beat
is older than 3 s is listed as stale, one killed drops out by itself.

exit status:
  0  every replica serves the same plugins, tools and agenthost version
  1  the replicas disagree, or the cluster has no replica in this Redis
  2  Redis cannot be read (unreachable, refused, wrong password), or a usage error

--json prints {"cluster", "redis", "replicas": [{"replica", "url", "state", "healthy",
"age_s", "beat", "started", "version", "plugins": {name: content hash}, "tools": count}],
"agree", "differences": [sentence, ...]}.
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = add_command(
        commands, "cluster", run,
        help="inspect the replicas of `serve --redis`: are they up, do they agree",
        description="Inspect a cluster of `agenthost serve --redis` replicas.",
    )  # fmt: skip
    actions = sub.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser(
        "status",
        help="each replica's address, health and plugins, and whether they all agree",
        description="List the replicas of a cluster and compare the plugins they serve.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    status.add_argument(
        "--redis",
        metavar="URL",
        default=os.environ.get("AGENTHOST_REDIS_URL"),
        help="the cluster's Redis, as given to serve --redis (default: $AGENTHOST_REDIS_URL)",
    )
    status.add_argument(
        "--cluster-name",
        default="agenthost",
        metavar="NAME",
        help="the cluster's key prefix in Redis, as given to serve (default: agenthost)",
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument(  # `cluster status -v` as well as `-v cluster status`
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
        help="log debug details to stderr",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """``status`` is the one action so far."""
    return _status(args)


def _status(args: argparse.Namespace) -> int:
    if not args.redis:
        return fail("cluster status", "which Redis? Pass --redis URL or set AGENTHOST_REDIS_URL")
    try:
        from agenthost._cluster.status import Unreachable, masked, read_members, status
    except ModuleNotFoundError as exc:
        if exc.name != "redis" and not (exc.name or "").startswith("redis."):
            raise
        return fail("cluster status", f"needs the cluster extra: {install_command('cluster')}")
    try:
        members, unreadable = read_members(args.redis, args.cluster_name)
    except Unreachable as exc:
        return fail("cluster status", f"cannot read Redis at {masked(args.redis)}: {exc}")
    found = status(args.cluster_name, members, unreadable)
    if args.json:
        print(json.dumps(_record(found, masked(args.redis)), indent=2))
    elif not found.replicas:
        print(f"no replica of cluster {args.cluster_name!r} at {masked(args.redis)}")
    else:
        print(f"cluster {found.cluster!r} at {masked(args.redis)}: "
              f"{count(len(found.replicas), 'replica')}\n")  # fmt: skip
        _print_status(found)
    return 0 if found.agree else 1


def _print_status(found: Status) -> None:
    from agenthost._cluster.status import short

    rows = [["REPLICA", "URL", "STATE", "HEALTH", "LAST BEAT", "VERSION", "PLUGINS", "TOOLS"]]
    rows += [
        [m.replica, m.url, m.state, "ok" if r.healthy else "stale", f"{r.age_s:.1f}s ago",
         m.version, str(len(m.plugins)), str(len(m.tools))]
        for r in found.replicas
        for m in [r.member]
    ]  # fmt: skip
    _print_table(rows)
    members = [r.member for r in found.replicas]
    plugins = sorted({name for m in members for name in m.plugins})
    if plugins:
        print()
        _print_table([["PLUGIN", *(m.replica for m in members)]] + [
            [name, *(short(m.plugins[name]) if name in m.plugins else "-" for m in members)]
            for name in plugins
        ])  # fmt: skip
    print()
    if len(members) == 1 and found.agree:
        print("1 replica: nothing to compare")
    elif found.agree:
        print(f"all {len(members)} replicas agree")
    else:
        print("replicas disagree:")
        for difference in found.differences:
            print(f"  {inert(difference, lines=False)}")


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    rows = [[inert(cell, lines=False) for cell in row] for row in rows]  # Redis's, not ours
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _record(found: Status, redis: str) -> dict[str, Any]:
    """The status as JSON: tools by number only (their names are hashed, their permissions
    are the operator's business), and nothing else Redis holds."""
    replicas = [
        {"replica": r.member.replica, "url": r.member.url, "state": r.member.state,
         "healthy": r.healthy, "age_s": r.age_s, "beat": r.member.beat,
         "started": r.member.started, "version": r.member.version,
         "plugins": dict(sorted(r.member.plugins.items())), "tools": len(r.member.tools)}
        for r in found.replicas
    ]  # fmt: skip
    return {"cluster": found.cluster, "redis": redis, "replicas": replicas,
            "agree": found.agree, "differences": list(found.differences)}  # fmt: skip
