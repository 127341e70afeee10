"""``omniroute doctor``: read-only checks of the config, the database, the secret key and upstream
reachability (OPS-1).

Nothing is opened for writing: the database is opened read-only (no migrations, no config objects
loaded into it), and a missing key file is reported, never created. Each check adds one row to a
table (check, result, detail); any ``fail`` row makes the command exit 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from omniroute import bootstrap
from omniroute.config import Config, ConfigError
from omniroute.core.egress import EgressPolicy
from omniroute.errors import UpstreamError
from omniroute.gateway import data_dir_for
from omniroute.providers.upstream import AttemptTimeouts, UpstreamClient
from omniroute.store import SecretKeyMismatch
from omniroute.store.db import parse_database_url
from omniroute.store.errors import SECRET_KEY_ENV
from omniroute.store.readonly import ReadonlyStore, open_readonly
from omniroute.store.secrets import key_file_path
from omniroute.values import Connection

if TYPE_CHECKING:
    from omniroute.cli.common import LazyConsole
    from omniroute.providers.catalog import Catalog

__all__ = ["run_doctor"]

REACH_TIMEOUT_S = 5.0
"""How long each upstream ``GET …/models`` may take before the provider is reported unreachable (s)."""

# How each provider wire format takes an API key on ``GET /models`` (the provider's API reference:
# Anthropic ``x-api-key`` plus a version, Gemini ``x-goog-api-key``, everyone else a bearer token).
_KEY_HEADER = {"anthropic": "x-api-key", "gemini": "x-goog-api-key"}
_EXTRA_HEADERS = {"anthropic": {"anthropic-version": "2023-06-01"}}


@dataclass
class Report:
    """The rows printed as the doctor's table: ``(check, ok, detail)``; ``failed`` once any is not ok."""

    rows: list[tuple[str, str, str]] = field(default_factory=list)
    failed: bool = False

    def add(self, check: str, status: str, detail: str) -> None:
        """One row; ``status`` is ``ok``, ``warn`` or ``fail`` (only ``fail`` makes the run fail)."""
        self.rows.append((check, status, detail))
        self.failed = self.failed or status == "fail"


def _check_config(
    cfg: Config,
    catalog: Catalog,
    report: Report,
    stored: list[Connection] | None,
    combos: list[dict[str, Any]],
) -> None:
    """Config references as start-up checks them: every connection names a known provider, every
    non-auto combo has targets, and combo targets, mappings and chains name known providers, models,
    connections and combos (declared in the file or stored)."""
    problems = bootstrap.config_reference_errors(
        cfg,
        catalog,
        stored_connection_ids=[c.id for c in stored or ()],
        stored_combo_names=[str(r["name"]) for r in combos],
    )
    if problems:
        report.add("config", "fail", "; ".join(f"{key}: {problem}" for key, problem in problems))
    else:
        report.add("config", "ok", str(cfg.source_path or "(defaults)"))


def _check_stored(
    catalog: Catalog, stored: list[Connection] | None, combos: list[dict[str, Any]], report: Report
) -> None:
    """Dangling references in stored data (a warning, as at start): stored connections of unknown
    providers, stored combo targets naming unknown providers, models, connections or combos."""
    from omniroute.references import stored_problems

    problems = stored_problems(catalog, stored, combos)
    if problems:
        report.add("stored data", "warn", "; ".join(f"{where}: {problem}" for where, problem in problems))
    else:
        report.add("stored data", "ok", f"{len(combos)} combo(s), no dangling reference")


async def _check_database(db: ReadonlyStore, report: Report) -> bool:
    """Schema revision read without migrating; ``False`` when the tables cannot be read."""
    stamped, head = await db.schema()
    where = db.target.display()
    if not stamped:
        report.add("database", "fail", f"{where}: no schema yet (the first start creates it)")
        return False
    if head is not None and stamped != [head]:
        report.add(
            "database",
            "warn",
            f"{where}: schema {', '.join(stamped)}, migrations to {head} pending (run at start)",
        )
    else:
        report.add("database", "ok", f"{where}: schema {stamped[0]}")
    return True


async def _check_secret_key(db: ReadonlyStore, data_dir: str | None, report: Report) -> list[Connection]:
    """Whether the configured key decrypts the stored secrets; the stored connections when it does."""
    secrets = await db.encrypted_secret_count()
    if db.key is None:
        path = key_file_path(sqlite_path=db.target.sqlite_path, data_dir=data_dir)
        if secrets:
            report.add(
                "secret key",
                "fail",
                f"{secrets} stored secret(s) but no key: set {SECRET_KEY_ENV} or restore {path}",
            )
        else:
            report.add("secret key", "warn", f"no key yet; the first start creates {path}")
        return []
    recorded = await db.fingerprint()
    if recorded is not None and recorded not in db.key.fingerprints():
        report.add("secret key", "fail", str(SecretKeyMismatch(f"key source: {db.key.source}")))
        return []
    try:
        conns = await db.store.list_connections()
    except SecretKeyMismatch as exc:
        report.add("secret key", "fail", str(exc))
        return []
    report.add("secret key", "ok", f"{db.key.source} decrypts {secrets} stored secret(s)")
    return conns


def _headers(fmt: str, conn: Connection) -> dict[str, str]:
    headers = dict(_EXTRA_HEADERS.get(fmt, {}))
    secret = conn.secret
    if secret:
        key_header = _KEY_HEADER.get(fmt)
        if key_header is None or conn.auth_type == "oauth":
            headers["Authorization"] = f"Bearer {secret}"
        else:
            headers[key_header] = secret
    return headers


async def _check_upstreams(conns: list[Connection], catalog: Catalog, cfg: Config, report: Report) -> None:
    """``GET <base_url>/models`` with each connection's credentials; 401/403 and 5xx fail."""
    t = cfg.resilience.timeouts
    client = UpstreamClient(
        AttemptTimeouts(connect_s=t.connect_s, ttft_s=t.ttft_s, idle_s=t.idle_s, total_s=t.total_s),
        policy=EgressPolicy.from_config(cfg.security),  # keys go only where the gateway would send them
    )
    try:
        for c in conns:
            check = f"{c.provider}/{c.id}"
            provider = catalog.provider(c.provider)
            if provider is None:
                report.add(check, "fail", f"unknown provider '{c.provider}'")
                continue
            url = (c.base_url or provider.base_url).rstrip("/") + "/models"
            try:
                status, _ = await client.get(url, _headers(provider.format, c), timeout_s=REACH_TIMEOUT_S)
            except UpstreamError as exc:
                report.add(check, "fail", exc.message)
                continue
            good = status < 500 and status not in (401, 403)
            report.add(check, "ok" if good else "fail", f"GET {url} → {status}")
    finally:
        await client.close()


def _print(report: Report, console: LazyConsole) -> None:
    from rich.table import Table

    colour = {"ok": "green", "warn": "yellow", "fail": "red"}
    table = Table("check", "result", "detail")
    for check, status, detail in report.rows:
        table.add_row(check, f"[{colour[status]}]{status}[/{colour[status]}]", detail)
    console.print(table)


async def run_doctor(cfg: Config, console: LazyConsole) -> bool:
    """Run every check read-only and print the table; ``True`` when no check failed."""
    report = Report()
    data_dir = data_dir_for(cfg.database_url)
    stored: list[Connection] = []
    readable: list[Connection] | None = []  # None: stored connections exist but could not be read
    combos: list[dict[str, Any]] = []
    nodes: list[dict[str, object]] = []
    db = None
    if parse_database_url(cfg.database_url, create_dirs=False).memory:
        report.add("database", "warn", "in memory: nothing is kept between runs, nothing to check")
    else:
        try:
            db = open_readonly(cfg.database_url, data_dir=data_dir)
        except FileNotFoundError as exc:
            report.add("database", "warn", f"{exc}: no database yet (the first start creates it)")
        except ValueError as exc:
            report.add("database", "fail", str(exc))
    if db is not None:
        try:
            if await _check_database(db, report):
                nodes = list(await db.store.list_provider_nodes())
                stored = await _check_secret_key(db, data_dir, report)
                readable = stored if stored or not await db.encrypted_secret_count() else None
                combos = list(await db.store.list_combos())
        except Exception as exc:  # unreachable server, unreadable file: reported, never raised
            report.add("database", "fail", f"{db.target.display()}: {exc}")
        finally:
            await db.close()
    try:
        catalog = bootstrap.build_catalog(cfg, nodes, None)
    except (ConfigError, ValueError) as exc:
        report.add("config", "fail", str(exc))
    else:
        if not cfg.connections and readable == []:  # simulated mode at start: their ids are known
            from omniroute.providers.catalog import Catalog as _Catalog
            from omniroute.simulated import simulated_providers

            catalog = _Catalog([*catalog.providers, *simulated_providers()])
        _check_config(cfg, catalog, report, readable, combos)
        if db is not None:
            _check_stored(catalog, readable, combos, report)
        by_id = {c.id: c for c in stored}
        by_id.update((c.id, bootstrap.connection_from_config(c)) for c in cfg.connections)
        await _check_upstreams([c for c in by_id.values() if c.is_active], catalog, cfg, report)
    _print(report, console)
    return not report.failed
