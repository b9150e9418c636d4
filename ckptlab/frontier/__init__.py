"""Checkpointing a frontier run: the same questions as the course's units at the scale of 16,000
GPUs and 54 days, where they can only be simulated (Lesson 10, Unit 10).

- :mod:`ckptlab.frontier.formulas`: closed forms (the job's MTBF, Young's and Daly's intervals, the
  goodput an interval gives, the bandwidth a target needs, bytes per parameter);
- :mod:`ckptlab.frontier.simulation`: the job simulated with SimPy (failures per cause, planned
  interruptions, local and persistent tiers, replicas, shared storage bandwidth, restarts);
- :mod:`ckptlab.frontier.published`: published figures (Llama 3 405B's run), each with its source,
  and the trace of interruptions they give.
"""
