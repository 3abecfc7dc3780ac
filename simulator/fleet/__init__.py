"""The fleet level: routers' token counts, the front door (``[admission]``), the autoscaler
(``[autoscale]``), the replicas' roll and what it costs. docs/fleet.md describes them;
:class:`simulator.fleet.fleet.Fleet` is what ``simulator.cluster`` drives."""
