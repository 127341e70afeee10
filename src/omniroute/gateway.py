"""The one ``Gateway`` object per process: owns the store, the routing snapshot, the routing state, the
upstream client and the background writers, and serves one request from model string to outcome.

No module globals (DESIGN house style 8): ``create_app`` builds one ``Gateway`` and every surface
reaches it through the ASGI app. The gateway's one :class:`~omniroute.clock.Clock` is handed to
everything that reads the time or waits: routing state, the ladder, the engine, the planner (through
``Gateway.clock``), the store, the store watch and the background writers.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import itertools
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omniroute import bootstrap, wire
from omniroute.accounting.admission import admit
from omniroute.accounting.budget import Budgets
from omniroute.accounting.ratelimit import RateLimits
from omniroute.clock import Clock, SystemClock
from omniroute.config import Config, ConfigError, load_config
from omniroute.core.combo import Combo, ComboMapping
from omniroute.core.egress import EgressPolicy
from omniroute.deadlines import BodyDeadlines
from omniroute.errors import AuthenticationFailed, PermissionDenied
from omniroute.extensions import Extensions
from omniroute.observe.access import note as note_access
from omniroute.observe.accounting import accounting_writers, spool_gauge
from omniroute.observe.batch import BatchWriter
from omniroute.observe.metrics import Metrics
from omniroute.providers.catalog import Catalog
from omniroute.providers.upstream import AttemptTimeouts, ReadLimits, UpstreamClient
from omniroute.references import stored_problems, warn_stored_problems
from omniroute.routing.combos import log_shadowing
from omniroute.routing.decision import Decision, StoredDecision, expand_stored
from omniroute.routing.engine import Engine, Outcome, RetrySettings, StreamOutcome
from omniroute.routing.member_estimate import multi_call_estimate_usd
from omniroute.routing.multicall import execute_multi_call, is_multi_call
from omniroute.routing.permissions import allowed_candidates
from omniroute.routing.plan import Planner
from omniroute.routing.registry import Registry
from omniroute.routing.resolve import check_alias_routes, resolve, with_context_1m_beta
from omniroute.simulated import (
    SAMPLE_COMBO,
    SimulatedFleet,
    retire_sample_combo,
    simulated_providers,
    store_sample_combo,
)
from omniroute.state.base import RoutingState
from omniroute.state.memory import MemoryRoutingState
from omniroute.store import Store, hash_key
from omniroute.store.retention import RetentionPruner
from omniroute.values import Candidate, ChatRequest, Connection, Usage
from omniroute.wire.base import ProviderAdapter

if TYPE_CHECKING:  # imported on use: only a gateway with redis_url loads the redis client (PERF-5)
    from omniroute.state.redis import ResilientRoutingState

log = logging.getLogger("omniroute")

DECISIONS_IN_MEMORY = 2_000  # decisions not yet stored, served from memory (OBS-2); a bound under backlog
SERIALISE_SLICE_S = 0.002
"""Longest stretch (s) of decision serialisation before the writer yields to the event loop."""
DECISION_BACKLOG = 20_000
"""Decisions queued for the store at most; past it the oldest are dropped with a logged count
(a decision is a diagnostic record; usage rows, which carry spend, keep the writer's larger bound)."""
DECISION_COMPACT_AFTER = 256
"""Decisions queued for the store past which a newly finished one is queued (and held for
``/api/routing/decisions/{id}``) in its stored form, :class:`StoredDecision` — the JSON bytes the writer
would write, ≈ 10.7 kB in one allocation — instead of as a :class:`Decision` holding its ≈ 50 scoring
records (≈ 20 kB in ≈ 150 objects). A store that falls behind then holds only what it will write, and the
allocator keeps no peak of scoring records afterwards (PERF-5; measured with ``bench memdiff``). Below
it, serialisation stays off the request path (PERF-1 p99)."""
MAX_REQUEST_ID = 128
#: client-supplied request ids remembered to refuse their reuse (≈ 10 MB at 128-character ids)
CLAIMED_IDS_REMEMBERED = 100_000
_REQUEST_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")
STORE_POLL_S = 2.0
"""How often (s) a running gateway checks the store for changes written by another process (the CLI,
another replica) and rebuilds its snapshot; bounds how long a key revoked from the CLI keeps working."""
KEY_MEMO_MAX = 10_000  # plaintext → record cache of valid keys, so a key is hashed once per snapshot


class Gateway:
    """Process-wide services. Call :meth:`start` once inside the event loop and :meth:`stop` at exit.

    ``clock`` is the time every part of this gateway reads and waits on (default the process clock;
    tests and the simulator pass a :class:`~omniroute.clock.FakeClock`). ``client`` is the upstream
    client every provider attempt goes through (default the aiohttp one built from the config's
    timeouts and limits; the simulator passes one that answers from a fleet model)."""

    def __init__(
        self,
        config: Config,
        *,
        clock: Clock | None = None,
        extensions: Extensions | None = None,
        client: UpstreamClient | None = None,
    ) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.extensions = extensions or Extensions()
        self.strategies = self.extensions.strategy_registry()  # combo strategies by name
        self.routers = self.extensions.router_registry()  # auto router strategies by name
        self.formats = self.extensions.wire_formats()  # client routes and provider formats
        self.store: Store | None = None
        self.client = client or UpstreamClient(
            AttemptTimeouts(
                connect_s=config.resilience.timeouts.connect_s,
                ttft_s=config.resilience.timeouts.ttft_s,
                idle_s=config.resilience.timeouts.idle_s,
                total_s=config.resilience.timeouts.total_s,
            ),
            limits=ReadLimits.from_mb(
                config.upstream_limits.max_response_mb, config.upstream_limits.max_event_mb
            ),
            policy=EgressPolicy.from_config(config.security),
        )
        # STORE-2: shared routing state in Redis when configured (degrades to local state), else local
        self.redis_state: ResilientRoutingState | None = None
        if config.redis_url:
            from omniroute.state.redis import ResilientRoutingState

            self.redis_state = ResilientRoutingState.from_url(
                config.redis_url, clock=self.clock, max_entries=config.state_max_entries
            )
        self.state: RoutingState = self.redis_state or MemoryRoutingState(
            self.clock, max_entries=config.state_max_entries
        )
        # API-8: key budgets (reserve/settle, in Redis when configured) and per-key rate limits
        self.budgets = Budgets(
            self.clock,
            lambda: self.store,
            self.redis_state.primary if self.redis_state else None,
            hold_s=config.resilience.timeouts.total_s + 300,
        )
        self.rate_limits = RateLimits(
            config.redis_url, rpm=config.rate_limits.rpm, tpm=config.rate_limits.tpm
        )
        self.resilience = bootstrap.build_resilience(config, self.state, self.clock)
        self.adapters: dict[str, ProviderAdapter] = wire.adapters(self.formats)
        self.engine = Engine(
            clock=self.clock,
            client=self.client,
            resilience=self.resilience,
            adapters=self.adapters,
            retries=RetrySettings(
                per_target=config.resilience.retries.per_target,
                max_attempts=config.resilience.retries.max_attempts,
                max_hint_wait_s=config.resilience.retries.max_hint_wait_s,
                total_s=config.resilience.timeouts.total_s,
                stream_rescue=config.resilience.stream_rescue.enabled,
            ),
            timeouts=self.client.timeouts,
        )
        self.catalog: Catalog = Catalog.builtin()
        self.registry = Registry.build(self.catalog, ())
        self.planner = Planner(self)
        self.simulated: SimulatedFleet | None = None
        self._retired_fleet: SimulatedFleet | None = None  # switched off at run time, stopped at stop()
        self.keys_by_hash: dict[str, dict[str, Any]] = {}
        self.keys_by_id: dict[str, dict[str, Any]] = {}
        self._key_memo: dict[str, dict[str, Any]] = {}
        self._unpriced_warned: set[str] = set()
        self._rid_prefix = os.urandom(6).hex()
        self._rid_counter = itertools.count(1)
        # client-supplied request ids already used here (oldest first): a reused one is replaced
        self._claimed_ids: OrderedDict[str, None] = OrderedDict()
        self.usage: BatchWriter[dict[str, Any]] | None = None
        self.decision_writer: BatchWriter[Decision | StoredDecision] | None = None
        self.decisions: OrderedDict[str, Decision | StoredDecision] = OrderedDict()
        self.decision_compact_after = DECISION_COMPACT_AFTER
        self.started_at = self.clock.time()
        self.metrics = Metrics()
        self.draining = False  # set on SIGTERM: readiness answers 503 while requests in flight finish
        self.body_deadlines = BodyDeadlines()  # 408 for request bodies that stop arriving
        self._fingerprint: tuple[Any, ...] | None = None  # store fingerprint the snapshot was built from
        self._store_watch: asyncio.Task[None] | None = None
        self._retention: RetentionPruner | None = None  # usage/decision rows past retention_days
        self._reload_lock = asyncio.Lock()  # a SIGHUP and POST /api/reload arriving together apply in turn

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, *, background: bool = True) -> None:
        """Open the store (migrations), load config objects into it, start simulated providers when
        nothing is configured, build the routing snapshot and start the background writers.

        ``background=False`` starts no background task (no usage or decision writer, no store watch):
        for the simulator, which runs the request path alone on virtual time and keeps its own record.

        Raises :class:`ConfigError` naming the key when the config names an unknown wire format or
        provider, or a non-auto combo without targets."""
        bootstrap.check_provider_formats(self.config, self.formats)
        data_dir = data_dir_for(self.config.database_url)
        self.store = await Store.open(self.config.database_url, data_dir=data_dir, clock=self.clock)
        await self._check_config_references(self.config, await self._reference_catalog(), aliases=False)
        await bootstrap.load_config_into_store(self.config, self.store)
        await self._start_simulated_unless_connected()
        await self.refresh()
        await self._check_config_references(self.config, self.catalog, aliases=True)
        warn_stored_problems(
            stored_problems(self.catalog, await self.store.list_connections(), await self.store.list_combos())
        )
        log_shadowing(self.registry)  # SPEC §4: one line listing every combo that shadows a model id
        if self.redis_state is not None:  # connect now: an unreachable Redis is reported at start
            await self.redis_state.ready()
        if not background:
            return
        assert self.store is not None
        self.usage, self.decision_writer = accounting_writers(
            self.clock,
            data_dir,
            self._write_usage,
            self._write_decisions,
            self.store.save_decisions,
            decision_backlog=DECISION_BACKLOG,
        )
        self.usage.start()
        self.decision_writer.start()
        self.metrics.gauge_sources.append(
            lambda: spool_gauge((("usage", self.usage), ("decisions", self.decision_writer)))
        )
        self._store_watch = asyncio.create_task(self._watch_store(), name="store-watch")
        self._retention = RetentionPruner(self.store, self.clock, self.config.retention_days)
        self._retention.start()

    async def _reference_catalog(self) -> Catalog:
        """The catalog config references are checked against before the config is loaded into the
        store: stored provider nodes and the config's providers, plus the simulated ones when no
        connection is configured or stored (they will be served)."""
        assert self.store is not None
        cat = bootstrap.build_catalog(self.config, await self.store.list_provider_nodes(), None, self.formats)
        if self.config.connections or await self.store.list_connections():
            return cat
        return Catalog([*cat.providers, *simulated_providers()])

    async def _start_simulated_unless_connected(self) -> None:
        """Simulated mode when no connection is configured or stored: start the simulated providers and
        store the sample combo (listed by ``/api/combos`` and ``omniroute combos list``). Otherwise say
        in the start-up log that they are off, removing a sample combo a previous simulated run stored
        (it would only dangle)."""
        assert self.store is not None
        conns = await self.store.list_connections()
        if not conns:
            self.simulated = SimulatedFleet()
            await self.simulated.start()
            await store_sample_combo(self.store)
            log.warning(
                "simulated mode: no providers configured; serving %d built-in simulated providers (%s) "
                "and the sample combo '%s'; adding a connection switches them off",
                len(self.simulated.providers),
                ", ".join(self.simulated.provider_ids),
                SAMPLE_COMBO,
            )
            return
        retired = await retire_sample_combo(self.store)
        log.log(
            logging.WARNING if retired else logging.INFO,
            "simulated providers off: %d connection(s) configured (%s)%s",
            len(conns),
            ", ".join(sorted({c.provider for c in conns})),
            f"; the sample combo '{SAMPLE_COMBO}' was removed" if retired else "",
        )

    async def _switch_simulated_off(self, conns: list[Connection]) -> None:
        """A real connection was added while simulated mode runs: drop the simulated providers from the
        catalog and delete the stored sample combo. Their servers keep running until :meth:`stop` so a
        request already routed to one finishes."""
        assert self.store is not None and self.simulated is not None
        self._retired_fleet, self.simulated = self.simulated, None
        retired = await retire_sample_combo(self.store)
        log.warning(
            "simulated providers off: connection %s added (%s)%s",
            ", ".join(c.id for c in conns),
            ", ".join(sorted({c.provider for c in conns})),
            f"; the sample combo '{SAMPLE_COMBO}' was removed" if retired else "",
        )

    async def _watch_store(self) -> None:
        """Every :data:`STORE_POLL_S` seconds on the gateway's clock, rebuild the snapshot when the
        store's fingerprint differs from the one the snapshot was built from, so writes by another
        process (``omniroute keys revoke``) take effect without a restart. A failed poll (database
        locked or unreachable) is logged and retried on the next tick; it never ends the task."""
        failing = False  # warn once per outage, then debug, so a down database does not flood the log
        while True:
            await self.clock.sleep(STORE_POLL_S)
            try:
                await self._refresh_if_changed()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.log(
                    logging.DEBUG if failing else logging.WARNING,
                    "store watch: check failed, retrying every %.0fs: %s",
                    STORE_POLL_S,
                    exc,
                )
                failing = True
            else:
                failing = False

    async def _refresh_if_changed(self) -> bool:
        """Rebuild the snapshot when the store fingerprint changed since the last build; ``True`` if so."""
        assert self.store is not None
        fp = await self.store.snapshot_fingerprint()
        if fp == self._fingerprint:
            return False
        log.info("store changed outside this process: refreshing the routing snapshot")
        await self.refresh()
        return True

    async def reload(self) -> None:
        """Re-read the config file and apply it as at start (OPS-2): its providers, connections, API keys
        and combos are loaded into the store and the routing snapshot is rebuilt; requests in flight
        finish on the snapshot they started with. Settings read once at start (listen address, workers,
        timeouts, resilience, Redis, database) keep their start-up values until a restart.

        Raises :class:`ConfigError` (naming the key) for an invalid file, ``FileNotFoundError`` for a
        missing one, before anything changes: the running config is kept."""
        assert self.store is not None
        if self.config.source_path is None:
            raise ConfigError("no config file to reload: the gateway was started without one")
        async with self._reload_lock:
            new = load_config(self.config.source_path, strategies=self.strategies.names())
            bootstrap.check_provider_formats(new, self.formats)
            catalog = bootstrap.build_catalog(
                new, await self.store.list_provider_nodes(), self.simulated, self.formats
            )
            await self._check_config_references(new, catalog, aliases=False)
            await bootstrap.load_config_into_store(new, self.store)
            self.config = new
            if isinstance(self.client, UpstreamClient):  # a simulated client sends nowhere
                self.client.policy = EgressPolicy.from_config(new.security)
            await self.refresh()
        log.info("configuration reloaded from %s", new.source_path)

    async def _check_config_references(self, config: Config, catalog: Catalog, *, aliases: bool) -> None:
        """Checks the config schema cannot make (OPS-2): every connection names a known provider, every
        non-auto combo has targets, every combo target, mapping and chain names a known provider,
        model, connection or combo (in the file or stored); with ``aliases`` (at start-up, once the
        snapshot is built) also that every ``model_aliases`` route resolves (a reload applies new
        aliases with the snapshot it rebuilds).
        Raises :class:`ConfigError` naming the key; warns about API keys whose secret is empty (an
        unset ``${ENV}`` reference admits nobody)."""
        assert self.store is not None
        errors = bootstrap.config_reference_errors(
            config,
            catalog,
            stored_connection_ids=[c.id for c in await self.store.list_connections()],
            stored_combo_names=[r["name"] for r in await self.store.list_combos()],
        )
        if aliases:
            errors.extend(check_alias_routes(self.registry))
        if errors:
            raise ConfigError(errors)
        for i, k in enumerate(config.api_keys):
            if not k.key:
                log.warning(
                    "api_keys[%d] (%s): the key is empty (unset ${ENV} reference?); it admits nobody",
                    i,
                    k.name,
                )

    async def stop(self) -> None:
        """Flush usage and decisions (nothing lost), close the upstream client, the simulated fleet and
        the store."""
        if self._retention is not None:
            await self._retention.stop()
        if self._store_watch is not None:
            self._store_watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._store_watch
            self._store_watch = None
        await self.budgets.drain()
        if self.usage is not None:
            await self.usage.stop()
        if self.decision_writer is not None:
            await self.decision_writer.stop()
        await self.client.close()
        await self.rate_limits.aclose()
        if self.redis_state is not None:
            await self.redis_state.aclose()
        for fleet in (self.simulated, self._retired_fleet):
            if fleet is not None:
                await fleet.stop()
        if self.store is not None:
            await self.store.close()

    async def refresh(self) -> None:
        """Rebuild the in-memory routing snapshot from the store (after any management edit, and when
        the store watch sees another process's write) and record the store fingerprint it reflects."""
        assert self.store is not None
        # read first: a write landing during the rebuild then shows as a change on the next poll
        fingerprint = await self.store.snapshot_fingerprint()
        conns = await self.store.list_connections()
        if self.simulated is not None and conns:
            await self._switch_simulated_off(conns)
        self.catalog = bootstrap.build_catalog(
            self.config, await self.store.list_provider_nodes(), self.simulated, self.formats
        )
        combos = [Combo.from_row(row) for row in await self.store.list_combos()]
        if self.simulated is not None:
            conns = conns + self.simulated.connections()
        self.registry = Registry.build(
            self.catalog,
            conns,
            await self.store.list_chains(),
            combos,
            [ComboMapping.from_row(row) for row in await self.store.list_mappings()],
            version=self.registry.version + 1,
            aliases=self.config.model_aliases,
        )
        self.keys_by_hash = {k["key_hash"]: k for k in await self.store.api_keys_for_auth()}
        self.keys_by_id = {k["id"]: k for k in self.keys_by_hash.values()}
        self._key_memo = {}
        self._fingerprint = fingerprint

    async def state_ready(self) -> bool:
        """Whether the routing-state store answers (OBS-4): Redis answers a PING and the state is not
        degraded to local (STORE-2); the in-process backend always does."""
        if self.redis_state is not None:
            return await self.redis_state.ready()
        return True

    @property
    def max_body_bytes(self) -> int:
        """``server.max_body_mb`` in bytes (413 above it)."""
        return int(self.config.server.max_body_mb * 1024 * 1024)

    # -- auth --------------------------------------------------------------------------------
    def authenticate(
        self, headers: Mapping[str, str], *, allow_x_api_key: bool = False
    ) -> dict[str, Any] | None:
        """The API key record for the request, or ``None`` when keys are not required.

        Raises :class:`AuthenticationFailed` (401) for a missing or unknown key when
        ``server.require_api_key`` is on, and for a non-ASCII key always (no key can be one) (API-8).
        """
        key = None
        auth = headers.get("authorization")
        if auth and auth[:7].lower() == "bearer ":
            key = auth[7:].strip()
        elif allow_x_api_key:
            key = headers.get("x-api-key") or headers.get("x-goog-api-key")
        if not key:
            if self.config.server.require_api_key:
                raise AuthenticationFailed("Missing API key: send 'Authorization: Bearer <key>'.")
            return None
        if not key.isascii():
            raise AuthenticationFailed("Invalid API key: keys are ASCII text.")
        rec = self._key_memo.get(key)
        if rec is not None:
            return self._unexpired(rec)
        rec = self.keys_by_hash.get(hash_key(key))
        if rec is None:
            if self.config.server.require_api_key:
                raise AuthenticationFailed("Invalid API key.")
            return None
        if len(self._key_memo) < KEY_MEMO_MAX:
            self._key_memo[key] = rec
        return self._unexpired(rec)

    def _unexpired(self, rec: dict[str, Any]) -> dict[str, Any]:
        """``rec``, or 401 ``api_key_expired`` once the clock has reached its ``expires_at``."""
        expires = rec.get("expires_at")
        if expires is not None and self.clock.time() >= float(expires):
            when = datetime.fromtimestamp(float(expires), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            raise AuthenticationFailed(f"This API key expired at {when}.", code="api_key_expired")
        return rec

    def check_key_allows(self, rec: dict[str, Any] | None, model: str) -> None:
        """Per-key model allowlist (403) and a quick budget pre-check from memory (402) (API-8); the
        exact budget check is the reservation :meth:`execute` makes."""
        if rec is None:
            return
        allowed = rec.get("allowed_models") or ["*"]
        budget = rec.get("budget_usd")
        if budget is None and allowed == ["*"]:
            return
        if not any(fnmatch.fnmatchcase(model.lower(), str(p).lower()) for p in allowed):
            raise PermissionDenied(
                f"This API key may not use model '{model}' (allowed: {', '.join(allowed)}).", param="model"
            )
        over = self.budgets.over_budget(rec) if budget is not None else None
        if over is not None:
            raise over

    def allowed_models_for(self, api_key_id: str | None) -> list[str] | None:
        """The ``allowed_models`` globs of an API key (``None``: no key, or an unknown one)."""
        if api_key_id is None:
            return None
        rec = self.keys_by_id.get(api_key_id)
        return list(rec.get("allowed_models") or ["*"]) if rec is not None else None

    # -- requests ----------------------------------------------------------------------------
    def request_id_for(self, headers: Mapping[str, str], *, claim: bool = False) -> str:
        """The client's ``X-Request-Id`` when it is a usable id — at most 128 characters of
        ``A-Z a-z 0-9 . _ : -`` — else a new one (API-7). Ids are echoed in headers, stored and
        looked up in ``/api/routing/decisions/{id}``, so anything else is replaced.

        ``claim``: the id will key a stored decision and usage row (the client routes). A client id
        is then used only once per process: an id this gateway has already used (another request's,
        or the same client's again) gets a gateway-issued id instead, so no request can overwrite
        another's decision; the client's own id is kept as ``client_request_id`` in the decision.
        """
        rid = headers.get("x-request-id")
        if rid and len(rid) <= MAX_REQUEST_ID and _REQUEST_ID_CHARS.issuperset(rid):
            if not claim:
                return rid
            if rid not in self._claimed_ids and rid not in self.decisions:
                self._claimed_ids[rid] = None
                if len(self._claimed_ids) > CLAIMED_IDS_REMEMBERED:
                    self._claimed_ids.popitem(last=False)
                return rid
        return self.new_request_id()

    def new_request_id(self) -> str:
        """A process-unique request id: a random per-process prefix and a counter (no syscall)."""
        return f"req_{self._rid_prefix}{next(self._rid_counter):012x}"

    async def execute(
        self, req: ChatRequest, decision: Decision | None = None
    ) -> tuple[Outcome | StreamOutcome, Decision]:
        """Resolve ``req.model``, order candidates and run the attempt loop (SPEC §4, §5), recording
        into ``decision`` (a new one when ``None``; pass your own to keep it when this raises).

        Returns the outcome and the decision; raises a :class:`~omniroute.errors.GatewayError`."""
        if decision is None:
            decision = Decision(request_id=req.request_id, requested_model=req.model, ts=self.clock.time())
        plan = resolve(self.registry, req.model)
        decision.route = plan.route
        client_rid = req.headers.get("x-request-id")
        if client_rid:
            decision.extra["client_request_id"] = client_rid[:MAX_REQUEST_ID]
        if req.api_key_id:  # whose request it was: routing feedback is accepted from that key only
            decision.extra["api_key_id"] = req.api_key_id
        if plan.context_1m:  # keep the [1m] intent; only Anthropic-format upstreams receive the header
            req.headers["anthropic-beta"] = with_context_1m_beta(req.headers.get("anthropic-beta"))
        if is_multi_call(plan.combo):  # fusion / pipeline call several models (COMBO-5, COMBO-6)
            estimate = multi_call_estimate_usd(self.registry, req, plan.combo)
            req.reservation = await self.admit(req, (), estimate)
            try:
                return await execute_multi_call(self, req, plan, decision), decision
            finally:
                self.remember(decision)
        candidates, opts = await self.planner.candidates(plan, req, decision)
        req.reservation = await self.admit(req, candidates)
        try:
            candidates = allowed_candidates(
                self.allowed_models_for(req.api_key_id), candidates, decision, req.model
            )
            out = await self.engine.run(
                req,
                candidates,
                decision,
                max_attempts=opts.max_attempts,
                per_target=opts.per_target,
                on_success=opts.on_success,
                prepare=opts.prepare,
            )
        finally:
            self.remember(decision)
        return out, decision

    async def admit(
        self, req: ChatRequest, candidates: Sequence[Candidate], estimate: float | None = None
    ) -> Any:
        """The key's rate limits (429) and budget reservation (402) for ``req`` on ``candidates``
        (:func:`omniroute.accounting.admission.admit`; ``estimate`` in USD overrides the one-call
        estimate); returns the reservation or ``None``."""
        rec = self.keys_by_id.get(req.api_key_id) if req.api_key_id else None
        return await admit(self.budgets, self.rate_limits, rec, req, candidates, estimate)

    def release_unsettled(self, req: ChatRequest) -> None:
        """Release ``req``'s budget reservation if no usage row settled it (a request that ended on an
        unexpected path); a no-op otherwise."""
        self.budgets.release(req.reservation)

    def remember(self, decision: Decision) -> None:
        """Queue the decision for the store and keep it in memory until it is stored, so
        ``GET /api/routing/decisions/{id}`` finds it at once (OBS-2). Past
        :attr:`decision_compact_after` queued decisions it is kept in its stored form instead
        (:data:`DECISION_COMPACT_AFTER`), so a backlog holds no engine objects."""
        writer = self.decision_writer
        held: Decision | StoredDecision = decision
        if writer is not None and len(writer) >= self.decision_compact_after:
            held = StoredDecision.of(decision)
        self.decisions[decision.request_id] = held
        if len(self.decisions) > DECISIONS_IN_MEMORY:
            self.decisions.popitem(last=False)
        if writer is not None:
            writer.put(held)

    async def get_decision(self, request_id: str) -> dict[str, Any] | None:
        """The decision of ``request_id`` as JSON (OBS-2): from memory while it waits to be stored,
        else from the store; ``None`` when unknown."""
        d = self.decisions.get(request_id)
        if d is not None:
            return d.to_dict()
        assert self.store is not None
        stored = await self.store.get_decision(request_id)
        return expand_stored(stored) if stored is not None else None

    def record_usage(
        self,
        req: ChatRequest,
        decision: Decision,
        *,
        status: int,
        cand: Candidate | None,
        usage: Usage | None,
        latency_ms: float,
        ttft_ms: float | None,
        error: str | None = None,
        member: str | None = None,
        charge: bool = True,
    ) -> None:
        """Queue one usage-log row (OBS-1); cost from catalog prices (USD per 1M tokens).

        ``member`` labels one member call of a multi-call strategy (fusion panel answer, pipeline
        step); ``charge=False`` keeps the row out of the key's spend because the request's main row
        already carries its cost (COMBO-5, COMBO-6)."""
        if self.usage is None:
            return
        u = usage or Usage()
        cost = u.cost_usd(cand.model) if cand is not None else 0.0
        price_unknown = cand is not None and not cand.model.price_known
        if price_unknown and cand is not None:
            self._warn_price_unknown(cand)
        release = 0.0
        if member is None:  # a member call is part of its request, observed once by the main row
            self.metrics.observe_request(decision, status, cand, usage, latency_ms, ttft_ms, cost)
            release = self.budgets.settle(req.reservation, cost if charge else 0.0)
        elif charge:  # a failed multi-call request's member: its own row carries the cost
            self.budgets.note_member_charge(req.reservation, cost)
        rec = self.keys_by_id.get(req.api_key_id) if req.api_key_id else None
        self.usage.put(
            row := {
                "ts": self.clock.time(),
                "request_id": req.request_id,
                "api_key_id": req.api_key_id,
                "requested_model": req.model,
                "provider": cand.provider.id if cand else None,
                "model": cand.model.id if cand else None,
                "connection_id": cand.connection.id if cand else None,
                "strategy": decision.strategy,
                "attempts": len(decision.attempts),
                "status": status,
                "latency_ms": latency_ms,
                "ttft_ms": ttft_ms,
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "cached_tokens": u.cached_tokens,
                "cache_write_tokens": u.cache_write_tokens,
                "cache_write_1h_tokens": u.cache_write_1h_tokens,
                "reasoning_tokens": u.reasoning_tokens,
                "price_unknown": price_unknown,
                "rescued": bool(decision.extra.get("rescued")),
                "cost_usd": cost,
                "error": error,
                "stream": req.stream,
                "member": member,
                "charge": charge,
                "release_usd": release,
                "period_start": self.budgets.period_start(rec),
            }
        )
        if member is None:
            note_access(row, decision)  # the access line and trace (omniroute.observe.access)
        if cost and charge:
            self.budgets.note_spend(rec, cost)

    def _warn_price_unknown(self, cand: Candidate) -> None:
        """Log once per model that its requests are recorded at $0, so key budgets do not limit it
        (OBS-1, API-8)."""
        if cand.model_str in self._unpriced_warned:
            return
        self._unpriced_warned.add(cand.model_str)
        log.warning(
            "No price known for %s: its requests are recorded at $0 and flagged price_unknown, "
            "so API key budgets do not limit it. Set input_price and output_price (USD per 1M "
            "tokens) under providers[].models[] in the config.",
            cand.model_str,
        )

    async def _write_decisions(self, batch: list[Decision | StoredDecision]) -> None:
        """Decision sink: serialised here, off the request path (OBS-2), in stretches of at most
        :data:`SERIALISE_SLICE_S` between yields to the event loop, so a burst of auto decisions
        (50 scored candidates each) never holds requests up for long (PERF-1 p99) while the writer
        still gets its share under load. Stored decisions leave memory (PERF-5). The stretches are
        measured in real time whatever the gateway's clock: they bound CPU time, which no fake clock
        sees pass."""
        assert self.store is not None
        items: list[tuple[str, float, bytes]] = []
        cpu = time.perf_counter  # noqa: TID251 - slices CPU work for the event loop: real time by nature
        started = cpu()
        for d in batch:
            items.append(d if isinstance(d, StoredDecision) else StoredDecision.of(d))
            if cpu() - started > SERIALISE_SLICE_S:
                await self.clock.sleep(0)  # a yield to the event loop
                started = cpu()
        await self.store.save_decisions(items)
        held = self.decisions
        for d in batch:
            if held.get(d.request_id) is d:
                del held[d.request_id]

    async def _write_usage(self, rows: list[dict[str, Any]]) -> None:
        """Usage sink: one batch insert, then per key and period one atomic update adding the batch's
        spend and releasing its database reservations (API-8 budgets)."""
        assert self.store is not None
        await self.store.write_usage(rows)
        settle: dict[tuple[str, float], list[float]] = {}
        for r in rows:
            key_id = r.get("api_key_id")
            if not key_id:
                continue
            usd = float(r.get("cost_usd") or 0) if r.get("charge", True) else 0.0
            release = float(r.get("release_usd") or 0)
            if usd or release:
                acc = settle.setdefault((key_id, float(r.get("period_start") or 0)), [0.0, 0.0])
                acc[0] += usd
                acc[1] += release
        for (key_id, start), (usd, release) in settle.items():
            await self.store.settle_spend(key_id, start, usd, release)


def data_dir_for(database_url: str) -> str | None:
    if database_url.startswith("sqlite"):
        path = database_url.split("///", 1)[-1]
        if path and path != ":memory:":
            return str(Path(path).expanduser().resolve().parent)
    return None
