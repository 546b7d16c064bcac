"""Connector implementations built on the mirrorline framework (first: MirrorMaker 2)."""
