"""``python -m agenthost`` runs the CLI."""

from agenthost._cli.main import main

raise SystemExit(main())
