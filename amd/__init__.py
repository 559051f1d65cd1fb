"""Answering-machine detection: person, voicemail, IVR menu, call screener."""
