"""CLI commands: (placeholder, filled in by its owner)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    pass
