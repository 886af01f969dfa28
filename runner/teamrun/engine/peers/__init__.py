"""Peer teams: agents around a board (``peers:`` with a ``kind: board`` workspace entry), no supervisor."""

from teamrun.engine.peers.driver import PEERS_FRAME, run_peers, stopped_summary

__all__ = ["PEERS_FRAME", "run_peers", "stopped_summary"]
