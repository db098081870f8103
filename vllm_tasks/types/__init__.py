"""Typed request and response models, one module per endpoint family."""

from .server import Advisory, ModelCard, ProbeReport, ServerInfo, TaskProbe, TaskStatus

__all__ = ["Advisory", "ModelCard", "ProbeReport", "ServerInfo", "TaskProbe", "TaskStatus"]
