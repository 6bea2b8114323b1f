"""One module per ``headroom`` subcommand, each with ``register(subparsers)``."""
