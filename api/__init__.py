"""Decisions and serving: call-chain analysis, consumers' formats, the app (docs/api.md)."""
