"""A backend that proves nothing, for tests of what a device worker does around its backend: a test
overrides the methods it watches (`load_key`, `memory_plan`, `load_compiled`, ...), and the others
keep `ProverBackend`'s defaults, as a real backend's would."""

from __future__ import annotations

from typing import Any

from cuzk.backends.base import DeviceInfo, ProverBackend


class FakeBackend(ProverBackend):
    name = "fake"

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo(name="fake", kind="cpu")]

    def load_key(self, pk: Any, compiled: Any = None) -> None:
        pass

    def unload_key(self, pk: Any) -> None:
        pass

    def prove(self, pk: Any, asg: Any, **kwargs: Any) -> Any:
        raise AssertionError("a fake backend proves nothing")
