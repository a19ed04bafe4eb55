"""`agent config`: where the user's configuration is read from, and what it comes to (agent.config)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show the user configuration: its file, AGENT_* variables, what they set",
                       description="Settings and prices come from $AGENT_CONFIG (else ~/.config/agent/config.toml) "
                                   "and AGENT_<SECTION>__<KEY> environment variables (they win over the file); a "
                                   "flag wins over both. This prints where they were read from and what they set.")
    p.add_argument("--json", action="store_true", help="print the effective configuration as JSON")
    p.set_defaults(func=show_config)


def show_config(args: argparse.Namespace) -> int:
    import os

    from agent.config import ENV_PREFIX, config_path
    from agent.view import console

    user = args.user  # loaded and validated by agent.cli before any command runs
    path = config_path()
    env = sorted(k for k in os.environ if k.startswith(ENV_PREFIX) and "__" in k)
    if args.json:
        print(json.dumps({"file": str(path), "file_exists": path.is_file(), "environment": env,
                          "settings": user.model_dump(mode="json", exclude_defaults=True)}))
        return 0
    out = console()
    out.print(f"file: {path}" + ("" if path.is_file() else "  (none: built-in defaults)"))
    out.print("environment: " + (", ".join(env) if env else "none"))
    out.print_json(data=user.model_dump(mode="json", exclude_defaults=True) or {})
    return 0
