"""The system calls a sandboxed worker may not make: a seccomp filter bwrap installs.

Namespaces keep a worker from seeing the host; these calls are how it would make
namespaces of its own (a user namespace lets it mount a tmpfs past its ``/tmp``
limit), or reach the kernel's rarely used and often vulnerable paths (io_uring,
userfaultfd, BPF, keyrings, perf) and other processes' memory. Each answers
``EPERM`` as if not permitted; ``clone3`` answers ``ENOSYS``, so the C library
falls back to ``clone``, whose namespace flags can be checked. ``socket`` refuses
``AF_VSOCK``, which reaches the hypervisor whatever the network namespace. Calls
of another architecture's ABI (x32 or 32-bit on a 64-bit kernel) kill the whole
process: libseccomp's filter admits only the native one.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import platform
import socket
import tempfile
from typing import Any

__all__ = ["DENIED", "filter_fd", "unavailable"]

DENIED = (
    # namespaces and mounts
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen",
    "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    # the kernel's rarely used paths
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "bpf",
    "perf_event_open", "add_key", "request_key", "keyctl", "open_by_handle_at",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # the machine
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd",
    "lookup_dcookie", "iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime",
)  # fmt: skip

# clone's flags that make a namespace (CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
# NEWUSER, NEWPID, NEWNET)
_NAMESPACE_FLAGS = (
    0x80, 0x20000, 0x2000000, 0x4000000, 0x8000000, 0x10000000, 0x20000000, 0x40000000,
)  # fmt: skip


def unavailable() -> str | None:
    """Why workers cannot get the filter here, or None."""
    program = _program()
    return program if isinstance(program, str) else None


def filter_fd() -> int | None:
    """A descriptor to read the filter from (bwrap's ``--seccomp``; the caller closes
    it once the process started), or None where there is no filter."""
    program = _program()
    if isinstance(program, str):
        return None
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below a pipe's buffer
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read


@functools.lru_cache(maxsize=1)
def _program() -> bytes | str:
    """The filter as BPF, or why it cannot be built."""
    try:
        import pyseccomp as seccomp  # type: ignore[import-untyped]  # untyped ctypes binding
    except (ImportError, RuntimeError) as exc:  # RuntimeError: no libseccomp on the system
        return f"the system call filter needs libseccomp and pyseccomp ({exc})"
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        # another ABI's call (x32 on x86-64) ends the whole worker, not the one thread: a
        # call in a thread the kernel killed would wait for its timeout, or for ever
        rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
        for name in DENIED:
            _deny(seccomp, rules, seccomp.ERRNO(errno.EPERM), name)
        flags = 1 if platform.machine().startswith("s390") else 0  # where clone's flags are
        for flag in _NAMESPACE_FLAGS:
            rule = seccomp.Arg(flags, seccomp.MASKED_EQ, flag, flag)
            rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", rule)
        _deny(seccomp, rules, seccomp.ERRNO(errno.ENOSYS), "clone3")
        vsock = seccomp.Arg(0, seccomp.EQ, socket.AF_VSOCK)  # the hypervisor: no namespace
        rules.add_rule(seccomp.ERRNO(errno.EPERM), "socket", vsock)
        with tempfile.TemporaryFile() as out:
            rules.export_bpf(out)
            out.seek(0)
            return out.read()
    except OSError as exc:
        return f"the system call filter cannot be built here ({exc})"


def _deny(seccomp: Any, rules: Any, action: int, name: str) -> None:
    with contextlib.suppress(OSError):  # a call this architecture does not have
        rules.add_rule(action, name)
