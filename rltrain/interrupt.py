"""Ctrl-C as a request that the trainer honours at a safe point.

Python raises ``KeyboardInterrupt`` between any two bytecodes of the main thread. In a trainer
whose main thread waits on a ``queue.Queue`` shared with actor threads, that can land inside the
queue's own locking and leave its mutex held: the shutdown that follows then blocks forever on
the same queue. :class:`GracefulInterrupt` turns the first SIGINT into a flag that the trainer
checks where nothing is half done (:meth:`check` raises ``KeyboardInterrupt`` there); a second
SIGINT raises at once, for a user who wants out regardless.

One request often arrives as several signals: ``timeout -s INT`` signals its child and then the
child's whole process group (the child again), and a terminal's Ctrl-C reaches every process of
the foreground group, torchrun's agent forwarding it to its workers once more. SIGINTs within
:data:`REPEAT_WINDOW_S` of the first are therefore the same request (and :meth:`restore` waits out
that window, so that the rest of a burst never meets the default handler); only a later one is a
second Ctrl-C. Otherwise a bounded run (``timeout -s INT 1200 python scripts/ppo.py ...``) would stop
mid-iteration, without the checkpoint it asked for.
"""

from __future__ import annotations

import signal
import threading
import time

REPEAT_WINDOW_S = 0.5  # SIGINTs this close to the first one are the same request


class GracefulInterrupt:
    """Context manager: while active, the first SIGINT only sets :attr:`requested`.

    Outside the main thread (where handlers cannot be installed) it is inert and SIGINT keeps
    its default behaviour.
    """

    def __init__(self):
        self.requested = False
        self._previous = None
        self._first_at = 0.0

    def install(self) -> "GracefulInterrupt":
        if self._previous is None and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def restore(self) -> None:
        """Put back the SIGINT handler that was there before :meth:`install`, once the repeat window
        of a recorded request has passed."""
        if self._previous is not None:
            if self.requested:
                time.sleep(max(0.0, self._first_at + REPEAT_WINDOW_S - time.monotonic()))
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    __enter__ = install

    def __exit__(self, *exc) -> None:
        self.restore()

    def _on_sigint(self, signum, frame) -> None:
        now = time.monotonic()
        if not self.requested:
            self.requested, self._first_at = True, now  # plain attributes: the handler takes no lock
        elif now - self._first_at > REPEAT_WINDOW_S:
            raise KeyboardInterrupt

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` here if Ctrl-C was pressed."""
        if self.requested:
            raise KeyboardInterrupt
