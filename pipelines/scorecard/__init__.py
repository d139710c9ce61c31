"""The shadow scorecard: per pool, what Foresight's plan would have changed (docs/scorecard.md)."""
