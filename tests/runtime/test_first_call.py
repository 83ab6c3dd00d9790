"""The shortcuts of a process's first call (benchmarks/first_call.py) keep what they replace:
the disk cache's keys and entries."""

from __future__ import annotations


def test_program_key_names_the_device_as_its_info_queries_do(queue):
    """The disk cache's device identity comes from DeviceInfo's one set of queries: the same
    strings the key was always made of (so existing entries stay valid)."""
    from fusejit.runtime.opencl.build import program_key

    d = queue.device
    key = program_key(d, "__kernel void k() {}", [])
    assert (key.platform, key.device, key.driver) == (
        f"{d.platform.name.strip()} {d.platform.version.strip()}", d.name.strip(),
        f"{d.driver_version.strip()} / {d.version.strip()}")


def test_private_dir_creates_tightens_and_refuses_files(tmp_path):
    import pytest

    from fusejit.runtime.files import private_dir as _private_dir

    made = tmp_path / "a" / "b"
    _private_dir(made)
    assert made.is_dir() and made.stat().st_mode & 0o777 == 0o700
    made.chmod(0o755)  # as an older fusejit left it
    _private_dir(made)
    assert made.stat().st_mode & 0o777 == 0o700
    plain = tmp_path / "file"
    plain.write_bytes(b"x")
    with pytest.raises(OSError):
        _private_dir(plain)


def test_is_pocl_from_the_device_info(queue):
    from fusejit.runtime.opencl.build import _is_pocl

    assert _is_pocl(queue.device) == (
        "Portable Computing Language" in queue.device.platform.name)
