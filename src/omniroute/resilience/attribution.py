"""Whose fault was a 500: the provider's, or the request's own (health attribution).

A request can make an upstream fail with 500 by its content alone (an absurd ``dimensions``, a
schema the model server cannot compile). Counting that against the provider's circuit breaker would
let one client open the breaker for everyone. The rule, per request:

- validation-like answers (400, 413, 422, context overflow, content filter) never count (they are
  :class:`~omniroute.errors.UpstreamBadRequest` and relatives,
  :func:`~omniroute.resilience.breaker.is_counted`);
- a plain 500 is *held*: not counted yet;
- when the same request then gets a 500 again on another connection (another account or another
  provider), the request reproduced it: the held 500s and this one are the request's fault and never
  count;
- when the request then succeeds elsewhere, or fails differently, or ends without another
  connection to try, the held 500s count against their providers as usual (a single-target request
  cannot show that it was its own fault).

Retries on the same connection prove nothing and are held alongside the first.
"""

from __future__ import annotations

from omniroute.errors import ServerError, UpstreamError
from omniroute.values import Candidate


class FaultAttribution:
    """The held 500s of one request (see the module docstring for the rule)."""

    __slots__ = ("held", "request_fault")

    def __init__(self) -> None:
        self.held: list[tuple[Candidate, UpstreamError]] = []
        #: the request reproduced a 500 on another connection: its 500s are its own fault
        self.request_fault = False

    def hold(self, cand: Candidate, err: UpstreamError) -> bool:
        """Whether the breaker must not count ``err`` now: ``True`` for a plain upstream 500 (held,
        or the request's own fault once reproduced on another connection)."""
        if not (type(err) is ServerError and err.upstream_status == 500):
            return False
        if self.request_fault:
            return True
        if any(c.connection.id != cand.connection.id for c, _ in self.held):
            self.request_fault = True
            self.held.clear()
            return True
        self.held.append((cand, err))
        return True

    def release(self) -> list[tuple[Candidate, UpstreamError]]:
        """The held failures that count after all (none once the request was shown at fault);
        clears them."""
        out, self.held = self.held, []
        return [] if self.request_fault else out
