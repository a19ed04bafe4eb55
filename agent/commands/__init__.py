"""The CLI's command groups: each module registers its subcommands (arguments next to their code).

Modules here must import nothing heavy at import time: `agent --help` builds every parser.
"""

COMMAND_MODULES = ("run", "runs", "report", "evaluate", "profiling", "catalog", "config")
