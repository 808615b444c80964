"""Peer job queues on Redis (BullMQ, Dramatiq, arq), driven through the workloads we run."""
