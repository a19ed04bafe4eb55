"""`agent config`: the effective configuration, each value with where it came from (agent.config), and the store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show the effective configuration, where each value came from, and the store",
                       description="Settings and prices come from $AGENT_CONFIG (else ~/.config/agent/config.toml) "
                                   "and AGENT_<SECTION>__<KEY> environment variables (they win over the file); a "
                                   "flag wins over both. This prints every setting in effect with its source "
                                   "(default, the file, the variable), and the store commands use (with --root: "
                                   "that one) and why.")
    p.add_argument("--json", action="store_true", help="print the effective configuration as JSON")
    p.add_argument("--root", type=Path, default=None, metavar="DIR", help="show this store as the commands would "
                   "take it (default: as they find it)")
    p.set_defaults(func=show_config)


def effective(user: Any) -> list[tuple[str, Any, str]]:
    """(dotted key, value, source) for every setting, the defaults included; prices one row per model."""
    from agent.config import source_of, value_sources

    sources = value_sources()
    rows: list[tuple[str, Any, str]] = []
    for section, values in user.model_dump(mode="json").items():
        if section == "prices":
            rows += [(f'prices."{m}"', v, source_of(f'prices."{m}"', sources)) for m, v in values.items()]
            continue
        rows += [(f"{section}.{k}", v, source_of(f"{section}.{k}", sources)) for k, v in values.items()]
    return rows


def show_config(args: argparse.Namespace) -> int:
    import os

    from rich.table import Table

    from agent.config import ENV_PREFIX, config_path
    from agent.view import console

    user = args.user  # loaded and validated by agent.cli before any command runs, as the store below was found
    path = config_path()
    env = sorted(k for k in os.environ if k.startswith(ENV_PREFIX) and "__" in k)
    rows = effective(user)
    store = {"root": str(args.root.resolve()), "source": args.store_root.source, "why": args.store_root.describe()}
    if args.json:
        print(json.dumps({"file": str(path), "file_exists": path.is_file(), "environment": env,
                          "settings": user.model_dump(mode="json", exclude_defaults=True),
                          "effective": [{"key": k, "value": v, "source": s} for k, v, s in rows], "store": store}))
        return 0
    out = console()
    out.print(f"file: {path}" + ("" if path.is_file() else "  (none: built-in defaults)"), markup=False)
    out.print("environment: " + (", ".join(env) if env else "none"), markup=False)
    out.print(f"store: {store['root']}  ({store['why']})", markup=False)
    table = Table(title="effective configuration", title_justify="left", header_style="bold")
    for col in ("setting", "value", "source"):
        table.add_column(col, overflow="fold")
    for key, value, source in rows:
        shown = "– (unset)" if value is None else json.dumps(value) if isinstance(
            value, dict | list) else str(value)
        table.add_row(key, shown, source, style="" if source != "default" else "dim")
    out.print(table)
    return 0
