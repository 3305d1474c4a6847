"""``dns_sd_configs``: targets from DNS records, as Prometheus's ``dns_sd_configs`` finds them.

Each name is looked up (SRV: the records' targets and ports; A/AAAA: the addresses with the
configured port) once per ``refresh_interval``, every discovery tick until each name first
answers. An answer is the truth, even an empty one: a name that does not exist (NXDOMAIN) or has
no record of the type lists no target. A lookup that gets no answer (a timeout, SERVFAIL, no
reachable server) keeps that name's last good targets and is reported once per change, like a
bad file_sd file. ``scrape.target_limit`` bounds each name's answer (refused whole beyond it).
Targets found by DNS carry no ``node`` label: each exporter names its own node
(``gpu_health_node_info``, evaluator/ingest/identity.py); until it does, the address is the node.

The resolver is dnspython's (SRV records need more than ``getaddrinfo``): ``/etc/resolv.conf``
(search domains and ``ndots`` included, so a Kubernetes Service's short name works), or the
``nameservers`` of the config (e.g. Consul's DNS on port 8600). One lookup has 5 s in all.
"""

from __future__ import annotations

import asyncio
import ipaddress
from datetime import datetime, timedelta
from typing import Final

import dns.asyncresolver
import dns.exception
import dns.nameserver
import dns.resolver

from gpu_health.errors import DiscoveryError
from gpu_health.evaluator.config.discovery import DnsSDConfig
from gpu_health.evaluator.config.targets import TargetGroup, address_problem

LOOKUP_S: Final = 5.0


def _resolver(config: DnsSDConfig) -> dns.asyncresolver.Resolver:
    """The configured servers, else /etc/resolv.conf (DiscoveryError when it cannot be read)."""
    try:
        resolver = dns.asyncresolver.Resolver(configure=not config.nameservers)
    except (dns.resolver.NoResolverConfiguration, OSError) as exc:
        raise DiscoveryError(f"dns_sd: cannot read the system resolver configuration: {exc}",
                             reason="dns") from exc
    if config.nameservers:
        resolver.nameservers = [dns.nameserver.Do53Nameserver(host, port)
                                for host, port in config.nameservers]
    resolver.lifetime = LOOKUP_S
    return resolver


def addresses(answer: dns.resolver.Answer, kind: str, port: int | None) -> list[str]:
    """``host:port`` of each record of ``answer`` (sorted, no repeats)."""
    found: set[str] = set()
    for record in answer:
        if kind == "SRV":
            host = record.target.to_text(omit_final_dot=True)
            found.add(f"{host}:{record.port}")
        else:
            ip = ipaddress.ip_address(record.address)
            found.add(f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}")
    return sorted(found)


class DnsSD:
    """One ``dns_sd_configs`` item: its names' last good target groups."""

    mechanism = "dns_sd"

    def __init__(self, config: DnsSDConfig, target_limit: int | None = None) -> None:
        self.config = config
        self.target_limit = target_limit
        self.name = "dns_sd " + ", ".join(config.names)
        self._groups: dict[str, TargetGroup] = {}
        self._next: datetime | None = None
        self._resolver: dns.asyncresolver.Resolver | None = None

    @property
    def produced(self) -> bool:
        return all(n in self._groups for n in self.config.names)

    @property
    def groups(self) -> list[TargetGroup]:
        return [self._groups[n] for n in self.config.names if n in self._groups]

    async def refresh(self, now: datetime) -> list[DiscoveryError]:
        if self._next is not None and now < self._next and self.produced:
            return []
        self._next = now + timedelta(seconds=self.config.refresh_interval)
        try:
            if self._resolver is None:
                self._resolver = _resolver(self.config)
        except DiscoveryError as exc:
            return [exc]
        outcomes = await asyncio.gather(*(self._lookup(n) for n in self.config.names))
        errors = []
        for name, outcome in zip(self.config.names, outcomes, strict=True):
            if isinstance(outcome, DiscoveryError):
                errors.append(outcome)
            else:
                self._groups[name] = outcome
        return errors

    async def _lookup(self, name: str) -> TargetGroup | DiscoveryError:
        assert self._resolver is not None
        kind = self.config.type
        try:
            answer = await self._resolver.resolve(name, kind, search=True,
                                                  raise_on_no_answer=False)
        except dns.resolver.NXDOMAIN:
            return TargetGroup((), self.config.labels)  # an answer: no such name, no target
        except (dns.exception.DNSException, OSError) as exc:
            return DiscoveryError(f"dns_sd {name} ({kind}): no answer: "
                                  f"{type(exc).__name__}: {exc}"[:300], reason="dns")
        found = addresses(answer, kind, self.config.port)
        if self.target_limit is not None and len(found) > self.target_limit:
            return DiscoveryError(f"dns_sd {name}: {len(found)} targets, more than "
                                  f"scrape.target_limit ({self.target_limit}): refused whole",
                                  reason="target_limit")
        bad = [a for a in found if address_problem(a) is not None]
        if bad:
            return DiscoveryError(f"dns_sd {name}: {len(bad)} record(s) name no usable target, "
                                  f"e.g. {bad[0][:80]!r}", reason="invalid")
        return TargetGroup(tuple(found), self.config.labels)
