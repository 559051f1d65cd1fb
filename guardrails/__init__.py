"""Guardrails: decision-model checks on user turns, agent sentences and agent turns."""
