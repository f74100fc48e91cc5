"""``python -m agenthost`` runs the CLI."""

from agenthost._cli import main

raise SystemExit(main())
