"""The kernel sandbox a worker runs in: bubblewrap's namespaces, the host's files read-only.

On Linux with bubblewrap (``bwrap``) each worker starts in its own pid, mount,
ipc, uts and network namespaces (and user namespace, unless the host is root):
it sees a fresh ``/proc`` holding its own processes only, the Python
installation and its own plugin version read-only, a private size-limited
``/tmp``, and no network unless the operator allowed it for the plugin. It dies
with the host (``--die-with-parent``), and every process it starts dies with it:
they live in its pid namespace, which ends when it does.

As root, bwrap runs without a user namespace (so it can read the installation
wherever it is) and the worker drops to a uid of its own before any other code
runs (see ``worker.boot``). Otherwise the user namespace maps the worker to the
host's uid, which buys it nothing: it can name no process and open no file of
the host's.

Where this cannot work (not Linux, bwrap missing, namespaces refused), the host
says once which guarantees are lost (:func:`lost_guarantees`) and runs workers
as plain processes, unless the operator required the sandbox.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agenthost._isolation.syscalls import filter_fd

__all__ = ["Layout", "Probe", "command", "lost_guarantees", "probe", "search_path"]

PACKAGE = Path(__file__).resolve().parents[1]  # agenthost itself, bound for the worker
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_MOUNTED = frozenset({Path("/proc"), Path("/dev"), Path("/tmp")})  # the sandbox's own, first
_PACKAGES = frozenset({"site-packages", "dist-packages"})
_ETC = (  # what name resolution, TLS, time zones and MIME types read; nothing else of /etc
    "/etc/ssl/certs", "/etc/ca-certificates", "/etc/pki/tls/certs", "/etc/resolv.conf",
    "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf", "/etc/localtime",
    "/etc/timezone", "/etc/mime.types", "/etc/protocols", "/etc/services",
)  # fmt: skip


@dataclass(frozen=True)
class Probe:
    """Whether workers can be sandboxed here, and if not, why."""

    available: bool
    reason: str = ""  # why not, in the host's words
    bwrap: str = ""
    root: bool = False  # bwrap runs without a user namespace; workers drop to their own uid


@dataclass(frozen=True)
class Layout:
    """What one worker's sandbox holds besides the Python installation.

    ``files`` is the host's copy of the plugin version, shown read-only at
    ``directory`` (the plugin directory's path), so the worker reads its own
    version where the host read it, and nothing else of that directory.
    """

    directory: Path | None = None
    files: Path | None = None
    network: bool = False
    tmp_mb: int = 256


def probe(bwrap: str | None) -> Probe:
    """Can this host start a worker in a sandbox? Checked once per bwrap path, by doing it."""
    return _probe(bwrap or os.environ.get("AGENTHOST_BWRAP") or "bwrap")


@functools.lru_cache(maxsize=8)
def _probe(name: str) -> Probe:
    if not sys.platform.startswith("linux"):
        return Probe(False, f"namespaces are a Linux feature and this is {sys.platform}")
    path = shutil.which(name)
    if path is None:
        return Probe(
            False,
            f"bubblewrap is not installed ({name!r} not found): install it (Debian and Ubuntu: "
            "apt-get install bubblewrap), or point AGENTHOST_BWRAP at it",
        )
    root = os.geteuid() == 0
    argv = [sys.executable, "-I", "-c", "pass"]
    seccomp = filter_fd()
    try:
        done = subprocess.run(
            command(path, Layout(), argv, {}, root=root, seccomp=seccomp),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
            pass_fds=[] if seccomp is None else [seccomp],
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(False, f"{path} cannot run here ({exc})", path)
    finally:
        if seccomp is not None:
            os.close(seccomp)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        why = said[-1] if said else f"exit code {done.returncode}"
        return Probe(False, f"{path} cannot create the namespaces here: {why}", path)
    return Probe(True, "", path, root)


def lost_guarantees(probe: Probe) -> str:
    """What a plugin in a worker can do without the sandbox, for the one warning at start."""
    return (
        f"process isolation runs without a sandbox: {probe.reason}. Workers still cannot "
        "crash or hang the host and keep their memory, CPU, file and output limits, but "
        "they run as the host's own user: they can signal, trace and read the host and "
        "any process of that user, read and write that user's files (the plugin directory "
        "too) and use the network, and, unless the host can give them a cgroup, leave "
        "processes behind that leave their process group. Pass sandbox='required' "
        "(agenthost --sandbox required) to refuse instead."
    )


def command(
    bwrap: str,
    layout: Layout,
    argv: list[str],
    env: dict[str, str],
    *,
    root: bool,
    seccomp: int | None,
) -> list[str]:
    """The bwrap command line that runs ``argv`` in ``layout``'s sandbox with ``env``, under
    the system call filter read from descriptor ``seccomp`` (see ``syscalls``)."""
    args = [bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if seccomp is not None:
        args += ["--seccomp", str(seccomp)]
    if not root:
        args.append("--unshare-user")
    if not layout.network:
        args.append("--unshare-net")
    args += ["--die-with-parent", "--new-session", "--hostname", "agenthost-worker"]
    args += ["--tmpfs", "/", *_system_binds(), "--proc", "/proc", *_kernel_files()]
    args += ["--perms", "01777", "--size", str(layout.tmp_mb * 2**20), "--tmpfs", "/tmp"]
    binds = _python_binds(layout.directory)  # after /tmp: a plugin directory may be in it
    mounts = [*binds, *([layout.directory] if layout.directory is not None else [])]
    for folder in _folders_for(mounts, covered=[*map(Path, _SYSTEM), *binds]):
        args += ["--perms", "0755", "--dir", str(folder)]
    for path in binds:
        args += ["--ro-bind", str(path), str(path)]
    if layout.directory is not None and layout.files is not None:
        args += ["--ro-bind", str(layout.files), str(layout.directory)]
    args += ["--clearenv", *[x for k, v in env.items() for x in ("--setenv", k, v)]]
    return [*args, "--chdir", "/tmp", "--", *argv]


def _kernel_files() -> list[str]:
    """``/proc/sys`` read-only (some of it is the whole machine's, ``core_pattern`` say),
    and a ``/dev`` of data devices only: no ``/dev/ptmx``, whose pseudo-terminals are a
    pool the whole machine shares, and no ``/dev/shm``."""
    args = ["--ro-bind", "/proc/sys", "/proc/sys", "--perms", "0755", "--dir", "/dev"]
    for name in ("null", "zero", "full", "random", "urandom"):
        args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    args += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{number}", f"/dev/{name}"]
    return args


def search_path(directory: Path | None) -> list[str]:
    """The worker's ``sys.path``: the host's, but only folders bound into the sandbox, so
    nothing of the plugin directory (``python -m agenthost watch .`` puts it first) is
    imported before the worker has dropped its privileges."""
    binds = [*_python_binds(directory), PACKAGE.parent]  # (an editable install's entry)
    outside = [directory] if directory is not None else []
    return [
        p
        for p in sys.path
        if os.path.isabs(p) and _under(Path(p), binds) and not _under(Path(p), outside)
    ]


@functools.lru_cache(maxsize=1)
def _system_binds() -> tuple[str, ...]:
    """``/usr`` and the top-level links or folders beside it, and the safe part of ``/etc``."""
    args: list[str] = []
    for name in _SYSTEM:
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    for name in _ETC:
        if os.path.exists(name):
            args += ["--ro-bind", name, name]
    return tuple(args)


def _python_binds(directory: Path | None) -> list[Path]:
    """Where the worker reads Python and agenthost from: the installation, the virtual
    environment, other ``site-packages`` on ``sys.path``, and agenthost's own folder, not
    the project around it; never a folder that holds the plugin directory (it would show
    every other plugin), nor one inside it."""
    prefixes = {
        Path(p) for p in (sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix)
    }
    found = {*prefixes, Path(sys.executable).parent, Path(os.path.realpath(sys.executable)).parent}
    found |= {
        Path(p)
        for p in sys.path
        if os.path.isabs(p) and (_under(Path(p), prefixes) or Path(p).name in _PACKAGES)
    }
    found.add(PACKAGE)
    usable = [p for p in found if p.is_dir() and not _under(p, [Path(s) for s in _SYSTEM])]
    if directory is not None:
        usable = [p for p in usable if not _under(directory, [p]) and not _under(p, [directory])]
    kept: list[Path] = []
    for path in sorted(usable, key=lambda p: len(p.parts)):
        if not _under(path, kept):
            kept.append(path)
    return kept


def _folders_for(mounts: Iterable[Path], covered: list[Path]) -> list[Path]:
    """The folders to create (readable by anyone) so that each mount point can exist."""
    folders: set[Path] = set()
    for mount in mounts:
        folders.update(p for p in mount.parents if p != Path("/") and not _under(p, covered))
    return sorted(folders - _MOUNTED, key=lambda p: len(p.parts))


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)
