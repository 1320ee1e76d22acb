"""An opt-in wall-clock limit for one call, such as scoring one sample (--sample-time-limit).

SIGALRM raises SampleTimeLimit inside the running Python code (one long C call stops when it
returns). POSIX main thread only; elsewhere the call runs without a limit (limits_available()).

Usage:
    value = call_with_limit(metric, 10.0, prediction, reference, all_classes=classes)
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any, Callable

REPEAT_S = 0.05  # after the limit, the alarm repeats this often until the call ends


class SampleTimeLimit(Exception):
    def __init__(self, seconds: float):
        super().__init__(f"took longer than {seconds:g} s")


def limits_available() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def call_with_limit(fn: Callable[..., Any], seconds: float | None, *args, **kwargs) -> Any:
    """fn(*args, **kwargs), or SampleTimeLimit after `seconds` (no limit for None or <= 0).

    >>> call_with_limit(sum, 5, [1, 2, 3])
    6
    """
    if not seconds or seconds <= 0 or not limits_available():
        return fn(*args, **kwargs)
    state = {"armed": True, "fired": False}

    def on_alarm(signum, frame):
        if state["armed"]:  # a signal that lands after the call returned is ignored
            state["fired"] = True
            raise SampleTimeLimit(seconds)

    def hook(unraisable) -> None:  # drops the SampleTimeLimit Python could not raise (see below)
        if not isinstance(unraisable.exc_value, SampleTimeLimit):
            previous_hook(unraisable)

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_hook, sys.unraisablehook = sys.unraisablehook, hook
    # The timer repeats: an exception the call swallows (its own `except`, or one raised inside a
    # gc callback, where Python drops it) is raised again REPEAT_S later, never sooner (a limit of
    # microseconds repeating as often would be a storm of signals the cleanup could not outrun).
    (outer_delay, outer_interval), start = (0.0, 0.0), time.monotonic()
    try:  # armed inside the try: an alarm due at once still reaches the cleanup below
        outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds, REPEAT_S)
        result = fn(*args, **kwargs)
    except Exception as exc:
        if state["fired"] and not isinstance(exc, SampleTimeLimit):  # it wrapped our exception
            raise SampleTimeLimit(seconds) from exc
        raise
    finally:
        # Nested: an alarm landing in the first statement still restores timer and handler.
        try:
            state["armed"] = False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_handler)
            sys.unraisablehook = previous_hook
            if outer_delay > 0:
                remaining = outer_delay - (time.monotonic() - start)
                signal.setitimer(signal.ITIMER_REAL, max(remaining, 1e-6), outer_interval)
    if state["fired"]:  # the call caught SampleTimeLimit and returned a value anyway
        raise SampleTimeLimit(seconds)
    return result
