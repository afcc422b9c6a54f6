#!/usr/bin/env python3
"""Writes a synthetic kernel log for the log engine benchmark (bench/logs_bench).

Most lines are ordinary kernel noise of a GPU server; a small share (0.1% by
default) are GPU and host events of the kinds gpudoctor recognises. Lines use
the syslog format with a kernel uptime stamp, as in /var/log/kern.log.

    python3 bench/logs_gen.py --size-mb 1024 --output /tmp/kern-1g.log

With --storm, every event line is the same Xid 95 of one GPU, as a driver in
trouble writes it thousands of times a second (memory of `check` on a storm).
"""
import argparse
import random

STORM = "NVRM: Xid (PCI:0000:3b:00): 95, pid=4242, name=python3, Uncontained: FBHUB. RST: No, D-RST: No"

NOISE = [
    "audit: type=1400 audit({t}:{n}): apparmor=\"DENIED\" operation=\"open\" profile=\"snap.lxd.daemon\" name=\"/proc/{n}/mounts\" pid={n} comm=\"lxd\" requested_mask=\"r\" denied_mask=\"r\" fsuid=0 ouid=0",
    "IPv4: martian source 10.{a}.{b}.{c} from 10.{c}.{b}.{a}, on dev eth0",
    "TCP: request_sock_TCP: Possible SYN flooding on port {n}. Sending cookies.  Check SNMP counters.",
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
    "mlx5_core 0000:{a:02x}:00.0: mlx5_fw_tracer_handle_traces:{n}:(pid {n}): FW tracer message",
    "usb 1-{a}: new high-speed USB device number {b} using xhci_hcd",
    "systemd-journald[{n}]: Data hash table of /var/log/journal/system.journal has a fill level at 75.0",
    "device veth{n:x}: entered promiscuous mode",
    "docker0: port {a}(veth{n:x}) entered blocking state",
    "br-{n:x}: port {b}(veth{c:x}) entered forwarding state",
    "xfs filesystem being remounted at /data/{n} supports timestamps until 2038 (0x7fffffff)",
    "nfs: server storage{a} OK",
    "perf: interrupt took too long ({n} > {b}), lowering kernel.perf_event_max_sample_rate to {c}000",
    "kauditd_printk_skb: {a} callbacks suppressed",
    "igb 0000:{a:02x}:00.1 eno2: igb: eno2 NIC Link is Up 1000 Mbps Full Duplex, Flow Control: RX/TX",
    "nvidia-nvswitch{a}: open (major={n})",
    "cgroup: fork rejected by pids controller in /kubepods.slice/kubepods-burstable.slice/pod{n:x}.slice",
    "blk_update_request: I/O error, dev loop{a}, sector {n} op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 0",
    "Lustre: {n}:0:(client.c:2282:ptlrpc_expire_one_request()) @@@ Request sent has timed out for slow reply",
]

EVENTS = [
    "NVRM: Xid (PCI:0000:{a:02x}:00): 79, pid={n}, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:{a:02x}:00): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB. RST: Yes, D-RST: No",
    "NVRM: Xid (PCI:0000:{a:02x}:00): 13, pid={n}, name=python3, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Illegal Instruction Encoding",
    "NVRM: Xid (PCI:0000:{a:02x}:00): 119, pid={n}, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801813 0x4c).",
    "pcieport 0000:{a:02x}:01.0: AER: Corrected error received: 0000:{a:02x}:01.0",
    "INFO: task python3:{n} blocked for more than 120 seconds.",
    "Out of memory: Killed process {n} (python3) total-vm:{n}kB, anon-rss:{n}kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:{b}kB oom_score_adj:0",
    "NVRM: GPU 0000:{a:02x}:00.0: RmInitAdapter failed! (0x24:0x72:1568)",
    "mce: CPU{a}: Package temperature above threshold, cpu clock throttled (total events = {n})",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--event-share", type=float, default=0.001, help="share of lines that are events")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", required=True)
    parser.add_argument("--storm", action="store_true", help="every event line the same Xid 95 of one GPU")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    # A pool of rendered noise lines keeps generation fast; events are rendered on demand.
    def render(template):
        return template.format(a=rng.randrange(1, 200), b=rng.randrange(1, 64), c=rng.randrange(1, 250),
                               n=rng.randrange(1000, 9999999), t=rng.randrange(1_700_000_000, 1_800_000_000))
    noise_pool = [render(rng.choice(NOISE)) for _ in range(20000)]
    target = args.size_mb * 1024 * 1024
    written = 0
    uptime = 1000.0
    events = 0
    lines = 0
    with open(args.output, "w") as out:
        while written < target:
            chunk = []
            for _ in range(20000):
                uptime += rng.random() * 0.01
                second = int(uptime) % 60
                minute = int(uptime) // 60 % 60
                hour = int(uptime) // 3600 % 24
                if rng.random() < args.event_share:
                    message = STORM if args.storm else render(rng.choice(EVENTS))
                    events += 1
                else:
                    message = noise_pool[rng.randrange(len(noise_pool))]
                chunk.append(f"Mar  3 {hour:02d}:{minute:02d}:{second:02d} gpu-node-17 kernel: [{uptime:12.6f}] {message}\n")
            text = "".join(chunk)
            out.write(text)
            written += len(text)
            lines += len(chunk)
    print(f"wrote {args.output}: {written / 1e6:.0f} MB, {lines} lines, {events} event lines")


if __name__ == "__main__":
    main()
