"""Benchmarks: small, bounded runs that print numbers to compare over time."""
