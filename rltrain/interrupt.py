"""Ctrl-C as a request that the trainer honours at a safe point.

Python raises ``KeyboardInterrupt`` between any two bytecodes of the main thread. In a trainer
whose main thread waits on a ``queue.Queue`` shared with actor threads, that can land inside the
queue's own locking and leave its mutex held: the shutdown that follows then blocks forever on
the same queue. :class:`GracefulInterrupt` turns the first SIGINT into a flag that the trainer
checks where nothing is half done (:meth:`check` raises ``KeyboardInterrupt`` there); a second
SIGINT raises at once, for a user who wants out regardless.
"""

from __future__ import annotations

import signal
import threading


class GracefulInterrupt:
    """Context manager: while active, the first SIGINT only sets :attr:`requested`.

    Outside the main thread (where handlers cannot be installed) it is inert and SIGINT keeps
    its default behaviour.
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def install(self) -> "GracefulInterrupt":
        if self._previous is None and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def restore(self) -> None:
        """Put back the SIGINT handler that was there before :meth:`install`."""
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    __enter__ = install

    def __exit__(self, *exc) -> None:
        self.restore()

    def _on_sigint(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True  # a plain attribute: the handler takes no lock

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` here if Ctrl-C was pressed."""
        if self.requested:
            raise KeyboardInterrupt
