"""The reconciler's early wake-up: set by services that want the next pass now rather than at the
next tick (a stop signalled, say). In-process only; the loops (loops.py) wait on it."""
import threading

reconciler_wakeup = threading.Event()
