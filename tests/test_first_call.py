"""The shortcuts of a process's first call (benchmarks/first_call.py) keep what they replace:
the disk cache's keys and entries."""

from __future__ import annotations


def test_program_key_names_the_device_as_its_info_queries_do(queue):
    """The disk cache's device identity comes from DeviceInfo's one set of queries: the same
    strings the key was always made of (so existing entries stay valid)."""
    from fusejit.runtime.build import program_key

    d = queue.device
    key = program_key(d, "__kernel void k() {}", [])
    assert (key.platform, key.device, key.driver) == (
        f"{d.platform.name.strip()} {d.platform.version.strip()}", d.name.strip(),
        f"{d.driver_version.strip()} / {d.version.strip()}")
