"""Incidents: grouping signals, the incident state machine, the timeline and its summaries."""
