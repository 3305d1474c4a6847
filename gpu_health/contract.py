"""The metric contract between exporter and evaluator (see DESIGN.md, "Exporter metrics").

The five health counters, their Prometheus names and types, and the per-card labels. The
exporter emits exactly these; the evaluator parses exactly these; the store has one nullable
column per counter key. Keep the three in step by importing from here.
"""

from __future__ import annotations

from typing import Final, Literal

CounterKey = Literal[
    "ecc_uncorrected_total",
    "ecc_corrected_total",
    "retired_pages",
    "remapped_rows_pending",
    "remapped_rows_failure",
]

# Order matters: it is the column order in the store and in every tuple of counter values.
COUNTER_KEYS: Final[tuple[CounterKey, ...]] = (
    "ecc_uncorrected_total",
    "ecc_corrected_total",
    "retired_pages",
    "remapped_rows_pending",
    "remapped_rows_failure",
)

METRIC_PREFIX: Final = "gpu_health_"

# Sample name on the wire (what Prometheus stores) for each counter key.
METRIC_NAMES: Final[dict[CounterKey, str]] = {k: METRIC_PREFIX + k for k in COUNTER_KEYS}

METRIC_TYPES: Final[dict[CounterKey, Literal["counter", "gauge"]]] = {
    "ecc_uncorrected_total": "counter",
    "ecc_corrected_total": "counter",
    "retired_pages": "gauge",
    "remapped_rows_pending": "gauge",
    "remapped_rows_failure": "gauge",
}

METRIC_HELP: Final[dict[CounterKey, str]] = {
    "ecc_uncorrected_total": "Uncorrectable ECC errors since the counter was last reset "
    "(aggregate). Absent when the tool cannot report it.",
    "ecc_corrected_total": "Correctable ECC errors since the counter was last reset "
    "(aggregate). Absent when the tool cannot report it.",
    "retired_pages": "Device memory pages retired (single-bit plus double-bit causes). "
    "Absent when unknown.",
    "remapped_rows_pending": "1 when a row remap is pending until the next GPU reset, else 0. "
    "Absent when unknown.",
    "remapped_rows_failure": "1 when a row remap failed (spare rows exhausted), else 0. "
    "Absent when unknown.",
}

INFO_METRIC: Final = METRIC_PREFIX + "gpu_info"

# The node the exporter runs on, when it was told (``--node-name`` or ``$NODE_NAME``): one
# series ``gpu_health_node_info{node="..."} 1``. A scraping evaluator names the target's node
# after it when the target has no ``node`` label (DNS discovery finds addresses, not names).
NODE_METRIC: Final = METRIC_PREFIX + "node_info"
NODE_LABEL: Final = "node"
MAX_NODE_NAME: Final = 253  # a DNS name's limit, the store's node id limit too


def is_node_name(name: str) -> bool:
    """What the exporter accepts and the evaluator takes as a node name: printable, no
    surrounding spaces, 1 to MAX_NODE_NAME characters."""
    return 0 < len(name) <= MAX_NODE_NAME and name.isprintable() and name == name.strip()

# Labels on every per-card series; gpu_info adds "model".
CARD_LABELS: Final[tuple[str, ...]] = ("gpu", "uuid", "vendor")
INFO_LABELS: Final[tuple[str, ...]] = (*CARD_LABELS, "model")

# Vendors the contract names. Later issues may add more values; the label stays the same.
VENDORS: Final[tuple[str, ...]] = (
    "nvidia",
    "kunlunxin",
    "cambricon",
    "ascend",
    "metax",
    "iluvatar",
    # Listed in gpu_health_gpu_info only (no proven health counter; see docs/vendors.md).
    "enflame",
    "hygon",
    "mthreads",
    "biren",
)

# Kernel-log Xid lines per NVIDIA card and Xid code, counted since the exporter started (so it
# restarts at 0 with the exporter; exported only while the kernel log is readable).
XID_METRIC: Final = METRIC_PREFIX + "xid_errors_total"
# NVSwitch errors from the kernel log, per switch and SXid code, with the driver's severity
# (fatal, non_fatal): a counter of error events since the exporter started following the log.
SXID_METRIC: Final = METRIC_PREFIX + "nvswitch_sxid_errors_total"
SXID_LABELS: Final[tuple[str, ...]] = ("nvswitch", "pci_bus_id", "sxid", "severity")
SXID_SEVERITIES: Final[tuple[str, ...]] = ("fatal", "non_fatal")
# Series per node: the exporter counts at most this many (switch, SXid, severity) series and the
# evaluator reads at most this many from one exposition.
MAX_SXID_SERIES: Final = 512
# Memory-related Xids (48 DBE, 63/64 page retirement / row remap events, 94/95 contained /
# uncontained ECC errors): fault events for rule sets that list them.
MEMORY_XIDS: Final[tuple[int, ...]] = (48, 63, 64, 94, 95)

# Sample sources in the store.
SOURCE_REAL: Final = "real"
SOURCE_SIMULATED: Final = "simulated"
SOURCES: Final[tuple[str, ...]] = (SOURCE_REAL, SOURCE_SIMULATED)

# Row-remap details (NVIDIA drivers that list remapped_rows.* in --help-query-gpu; DCGM fields
# 392/393 for dcgm-exporter users): rows remapped for correctable and for uncorrectable errors,
# and the bank remap-availability histogram (how many banks have max/high/partial/low/none of
# their spare rows left). Gauges; absent when unknown, never 0. The store keeps one nullable
# column per key; the recommended-action policy (docs/actions.md) reads them.
RemapKey = Literal[
    "remapped_rows_correctable", "remapped_rows_uncorrectable", "remap_banks_max",
    "remap_banks_high", "remap_banks_partial", "remap_banks_low", "remap_banks_none",
]
REMAP_KEYS: Final[tuple[RemapKey, ...]] = (
    "remapped_rows_correctable", "remapped_rows_uncorrectable", "remap_banks_max",
    "remap_banks_high", "remap_banks_partial", "remap_banks_low", "remap_banks_none",
)
BANK_LEVELS: Final[tuple[str, ...]] = ("max", "high", "partial", "low", "none")
REMAP_ROW_METRICS: Final[dict[str, str]] = {
    "remapped_rows_correctable": METRIC_PREFIX + "remapped_rows_correctable",
    "remapped_rows_uncorrectable": METRIC_PREFIX + "remapped_rows_uncorrectable",
}
BANK_METRIC: Final = METRIC_PREFIX + "remap_bank_availability"  # {level}: banks at that level
REMAP_HELP: Final[dict[str, str]] = {
    "remapped_rows_correctable": "Rows remapped because of correctable errors. Absent when "
    "unknown.",
    "remapped_rows_uncorrectable": "Rows remapped because of uncorrectable errors. Absent when "
    "unknown.",
    BANK_METRIC: "Memory banks by remap availability (level: max, high, partial, low, none "
    "spare rows left). Absent when unknown.",
}

# NVIDIA's recovery action and pending page retirement (drivers that list the fields):
# ``gpu_recovery_action`` as a state set (one series per action, 1 for the current one; absent
# when unknown) and ``retired_pages.pending`` as 0/1. The evaluator stores both (the action as
# its NVML value, the index in RECOVERY_ACTIONS, in a nullable BIGINT column) and the
# recommended-action policy reads them (docs/actions.md).
RECOVERY_METRIC: Final = METRIC_PREFIX + "recovery_action"
# NVML's nvmlDeviceGpuRecoveryAction_t values 0..4 (NVIDIA, "GPU Memory Error Management",
# "Error Recovery and Response Flags"), named as our label values.
RECOVERY_ACTIONS: Final[tuple[str, ...]] = ("none", "gpu_reset", "node_reboot", "drain_p2p",
                                            "drain_and_reset")
PAGES_PENDING_METRIC: Final = METRIC_PREFIX + "retired_pages_pending"
RECOVERY_HELP: Final = ("The recovery action the driver recommends (1 for the current action: "
                        "none, gpu_reset, node_reboot, drain_p2p, drain_and_reset). Absent when "
                        "unknown.")
PAGES_PENDING_HELP: Final = ("1 when device memory pages are pending retirement until the next "
                             "reboot or GPU reset, else 0. Absent when unknown.")
RecoveryKey = Literal["recovery_action", "retired_pages_pending"]
RECOVERY_KEYS: Final[tuple[RecoveryKey, ...]] = ("recovery_action", "retired_pages_pending")

# Beyond memory (NVIDIA drivers that list the fields; absent when unknown, never 0): the PCIe
# link as trained against the most it can train to (a width below its max is a degraded link; a
# generation below its max is also what an idle card does to save power), the time the driver
# held the clocks down per reason (cumulative since the driver loaded, like dcgm-exporter's
# violation counters), and the GPU's registration with the NVLink fabric (NVSwitch systems).
# The evaluator stores those of HEALTH_KEYS (below).
LinkKey = Literal["pcie_link_generation", "pcie_link_generation_max", "pcie_link_width",
                  "pcie_link_width_max"]
LINK_KEYS: Final[tuple[LinkKey, ...]] = ("pcie_link_generation", "pcie_link_generation_max",
                                         "pcie_link_width", "pcie_link_width_max")
LINK_HELP: Final[dict[LinkKey, str]] = {
    "pcie_link_generation": "The PCIe generation the link runs at now (an idle card may train "
    "down to save power). Absent when unknown.",
    "pcie_link_generation_max": "The highest PCIe generation this card and slot can run at. "
    "Absent when unknown.",
    "pcie_link_width": "The PCIe lanes the link runs with now. Absent when unknown.",
    "pcie_link_width_max": "The most PCIe lanes this card and slot can run with. Absent when "
    "unknown.",
}
SLOWDOWN_METRIC: Final = METRIC_PREFIX + "clock_slowdown_seconds_total"
# nvidia-smi's clocks_event_reasons_counters.* names (microseconds), as our reason label values.
SLOWDOWN_REASONS: Final[tuple[str, ...]] = ("sw_power_cap", "sw_thermal_slowdown",
                                            "hw_thermal_slowdown", "hw_power_brake_slowdown")
SLOWDOWN_HELP: Final = ("Time the driver held the clocks below the requested clocks, by reason "
                        "(sw_power_cap, sw_thermal_slowdown, hw_thermal_slowdown, "
                        "hw_power_brake_slowdown), since the driver loaded. Absent when unknown.")
FABRIC_STATE_METRIC: Final = METRIC_PREFIX + "fabric_state"
# NVML's NVML_GPU_FABRIC_STATE_* values, as our label values.
FABRIC_STATES: Final[tuple[str, ...]] = ("not_supported", "not_started", "in_progress",
                                         "completed")
FABRIC_STATE_HELP: Final = ("The GPU's registration with the NVLink fabric (1 for the current "
                            "state: not_supported, not_started, in_progress, completed). Absent "
                            "when unknown.")
# nvidia-smi -q's PCIe replay counters (no --query-gpu field has them), since the last GPU
# reset or driver load: transactions the link layer resent, and the replay number wrapping
# (after which the link retrains). dcgm-exporter exports the first as
# DCGM_FI_DEV_PCIE_REPLAY_COUNTER.
PCIE_REPLAYS_METRIC: Final = METRIC_PREFIX + "pcie_replays_total"
PCIE_REPLAYS_HELP: Final = ("PCIe transactions the link layer had to resend (replays) since "
                            "the last GPU reset or driver load. Absent when unknown.")
PCIE_ROLLOVERS_METRIC: Final = METRIC_PREFIX + "pcie_replay_rollovers_total"
PCIE_ROLLOVERS_HELP: Final = ("Times the PCIe replay number wrapped (the link then retrains) "
                              "since the last GPU reset or driver load. Absent when unknown.")
# nvidia-smi nvlink -e's error counters per NVLink link (drivers before Blackwell), since the
# driver loaded or the counters were reset: packets the link layer resent (replay), link
# retrains after a lost lock (recovery), flits that arrived corrupt (crc). One series per link
# and counter (at most 18 links); the card's total adds them up, as DCGM's *_TOTAL fields add
# up the links, and is what the evaluator stores.
NVLINK_COUNTERS: Final[tuple[str, ...]] = ("replay", "recovery", "crc")
NVLINK_ERRORS_METRIC: Final = METRIC_PREFIX + "nvlink_errors_total"
NVLINK_ERRORS_HELP: Final = ("NVLink errors of one link since the driver loaded or the "
                             "counters were reset, by counter (replay, recovery, crc). Absent "
                             "when unknown.")
NVLINK_CARD_METRIC: Final = METRIC_PREFIX + "nvlink_card_errors_total"
NVLINK_CARD_HELP: Final = ("Every NVLink error counter of every link of the card added up "
                           "(gpu_health_nvlink_errors_total summed). Absent when unknown or "
                           "when one of them is.")
FABRIC_OK_METRIC: Final = METRIC_PREFIX + "fabric_status_success"
FABRIC_OK_HELP: Final = ("1 when the fabric registration completed without error, 0 when the "
                         "driver reports an error. Absent when unknown or not completed.")

# What the store keeps of them, one nullable BIGINT column each (the weak-signal layer reads
# them, docs/rules.md): the link width now and at most (a width below its max is a degraded
# link), the cumulative thermal and power-brake slowdown time in microseconds (the driver's
# unit), the fabric state (its index in FABRIC_STATES) and status (0/1). Not stored: the link
# generation, which an idle card lowers to save power (a row per idle spell, no fault), and
# the power-cap slowdown, which a busy card under its power limit accrues on every read (a
# policy, not a fault; it would turn change-only writes into a row a minute). The PCIe replays
# since reset are kept too (added later); their rollovers are not (no other exporter has them,
# and a rollover is a retrain the link width already shows when it sticks). So is the card's
# NVLink error total (the last column, added later; not each link's).
HealthKey = Literal["pcie_link_width", "pcie_link_width_max", "sw_thermal_slowdown_us",
                    "hw_thermal_slowdown_us", "hw_power_brake_slowdown_us", "fabric_state",
                    "fabric_status_success", "pcie_replays", "nvlink_errors"]
HEALTH_KEYS: Final[tuple[HealthKey, ...]] = (
    "pcie_link_width", "pcie_link_width_max", "sw_thermal_slowdown_us", "hw_thermal_slowdown_us",
    "hw_power_brake_slowdown_us", "fabric_state", "fabric_status_success", "pcie_replays",
    "nvlink_errors")
# The slowdown reasons the store keeps, as (label value, column).
STORED_SLOWDOWNS: Final[dict[str, HealthKey]] = {
    "sw_thermal_slowdown": "sw_thermal_slowdown_us",
    "hw_thermal_slowdown": "hw_thermal_slowdown_us",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown_us",
}

# Every per-card detail the store keeps beside the five counters, in column order.
DETAIL_KEYS: Final[tuple[str, ...]] = (*REMAP_KEYS, *RECOVERY_KEYS, *HEALTH_KEYS)
