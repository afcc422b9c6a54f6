#!/bin/sh
# Regenerates the fake /proc and /sys trees the host tests read. The trees are
# committed; run this only to change them. Each tree is a root directory that
# LinuxHostEnv reads instead of "/".
set -eu
cd "$(dirname "$0")"
rm -rf healthy faulty

put() {  # put FILE CONTENT...: write CONTENT (printf format) to FILE
  mkdir -p "$(dirname "$1")"
  file=$1
  shift
  printf "$@" > "$file"
}

proc_common() {  # proc_common ROOT
  put "$1/proc/1/stat" '1 (systemd) S 0 1 1 0 -1 4194560 1 0 0 0\n'
  put "$1/proc/1/cmdline" '/sbin/init\0splash\0'
  put "$1/proc/1/wchan" '0'
  put "$1/proc/950/stat" '950 (python3) S 1 950 950 0 -1 4194560 1 0 0 0\n'
  put "$1/proc/950/cmdline" '/usr/bin/python3\0train.py\0--epochs\0090\0'
  put "$1/proc/self/stat" 'not a pid dir, must be skipped\n'
  put "$1/proc/7/stat" '7 (kworker/0:1-events) I 2 0 0 0 -1 69238880 0 0 0 0\n'
  put "$1/proc/7/cmdline" ''
}

gpu() {  # gpu ROOT BUS DEVICE_ID CUR_SPEED MAX_SPEED CUR_WIDTH MAX_WIDTH DRIVER
  d="$1/sys/bus/pci/devices/$2"
  put "$d/vendor" '0x10de\n'
  put "$d/device" "$3\\n"
  put "$d/class" '0x030200\n'
  put "$d/current_link_speed" "$4\\n"
  put "$d/max_link_speed" "$5\\n"
  put "$d/current_link_width" "$6\\n"
  put "$d/max_link_width" "$7\\n"
  if [ -n "$8" ]; then ln -s "../../../../bus/pci/drivers/$8" "$d/driver"; fi
}

other_pci() {  # other_pci ROOT BUS VENDOR CLASS
  d="$1/sys/bus/pci/devices/$2"
  put "$d/vendor" "$3\\n"
  put "$d/device" '0x0001\n'
  put "$d/class" "$4\\n"
}

# healthy: two H100 GPUs at full link, everything in order.
r=healthy
proc_common $r
put $r/proc/loadavg '3.52 3.58 3.40 2/1134 12345\n'
put $r/proc/pressure/cpu 'some avg10=1.20 avg60=0.80 avg300=0.50 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n'
put $r/proc/pressure/memory 'some avg10=0.00 avg60=0.00 avg300=0.00 total=10\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=5\n'
put $r/proc/pressure/io 'some avg10=0.50 avg60=0.40 avg300=0.30 total=5000\nfull avg10=0.10 avg60=0.10 avg300=0.10 total=2000\n'
put $r/proc/meminfo 'MemTotal:       527988412 kB\nMemFree:        400000000 kB\nMemAvailable:   480000000 kB\nBuffers:          100000 kB\nSwapTotal:       8388604 kB\nSwapFree:        8388604 kB\n'
put $r/proc/sys/kernel/hung_task_detect_count '0\n'
put $r/proc/812/stat '812 (nvidia-persiste) S 1 812 812 0 -1 1077936448 1 0 0 0\n'
put $r/proc/812/cmdline '/usr/bin/nvidia-persistenced\0--user\0nvidia-persistenced\0'
put $r/proc/driver/nvidia/version 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 19:33:33 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n'
put $r/sys/module/nvidia/version '550.54.15\n'
put $r/sys/devices/system/cpu/online '0-63\n'
gpu $r 0000:1b:00.0 0x2330 '32.0 GT/s PCIe' '32.0 GT/s PCIe' 16 16 nvidia
gpu $r 0000:43:00.0 0x2330 '32.0 GT/s PCIe' '32.0 GT/s PCIe' 16 16 nvidia
other_pci $r 0000:1b:00.1 0x10de 0x040300
other_pci $r 0000:00:00.0 0x8086 0x060000
put $r/sys/class/hwmon/hwmon0/name 'coretemp\n'
put $r/sys/class/hwmon/hwmon0/temp1_label 'Package id 0\n'
put $r/sys/class/hwmon/hwmon0/temp1_input '45000\n'
put $r/sys/class/hwmon/hwmon0/temp1_max '84000\n'
put $r/sys/class/hwmon/hwmon0/temp1_crit '100000\n'
put $r/sys/class/hwmon/hwmon0/temp1_crit_alarm '0\n'
put $r/sys/class/hwmon/hwmon1/name 'nct6798\n'
put $r/sys/class/hwmon/hwmon1/fan1_input '1450\n'
put $r/sys/class/hwmon/hwmon1/fan1_alarm '0\n'
put $r/sys/class/hwmon/hwmon1/in0_input '1204\n'
put $r/sys/class/hwmon/hwmon1/in0_label 'Vcore\n'

# faulty: a GPU on a narrowed link, a GPU the driver never bound, nouveau
# loaded next to a mismatched nvidia module, nvidia-smi stuck in D state,
# memory pressure and a fan alarm.
r=faulty
proc_common $r
put $r/proc/loadavg '97.10 88.02 60.55 5/2201 40000\n'
put $r/proc/pressure/cpu 'some avg10=4.00 avg60=3.00 avg300=2.00 total=999\n'
put $r/proc/pressure/memory 'some avg10=40.00 avg60=35.50 avg300=20.00 total=8000000\nfull avg10=30.00 avg60=25.25 avg300=12.00 total=6000000\n'
put $r/proc/pressure/io 'some avg10=5.00 avg60=4.00 avg300=3.00 total=77\nfull avg10=2.00 avg60=1.00 avg300=0.50 total=33\n'
put $r/proc/meminfo 'MemTotal:       65536000 kB\nMemAvailable:    1024000 kB\nSwapTotal:       2097148 kB\nSwapFree:              0 kB\n'
put $r/proc/sys/kernel/hung_task_detect_count '3\n'
put $r/proc/2001/stat '2001 (nvidia-smi) D 1 2001 2001 0 -1 4194560 1 0 0 0\n'
put $r/proc/2001/cmdline 'nvidia-smi\0'
put $r/proc/2001/wchan 'os_acquire_mutex\n'
put $r/proc/2002/stat '2002 (my (odd) name) D 1 2002 2002 0 -1 4194560 1 0 0 0\n'
put $r/proc/2002/cmdline './my (odd) name\0'
put $r/sys/module/nvidia/version '550.54.14\n'
put $r/sys/module/nouveau/initstate 'live\n'
put $r/sys/devices/system/cpu/online '0-7,16-23\n'
gpu $r 0000:1b:00.0 0x2330 '16.0 GT/s PCIe' '32.0 GT/s PCIe' 8 16 nvidia
gpu $r 0000:43:00.0 0x2330 'Unknown' '32.0 GT/s PCIe' 255 16 ''
put $r/sys/class/hwmon/hwmon0/name 'nct6798\n'
put $r/sys/class/hwmon/hwmon0/fan1_input '0\n'
put $r/sys/class/hwmon/hwmon0/fan1_alarm '1\n'
put $r/sys/class/hwmon/hwmon0/fan1_label 'CPU_FAN\n'
put $r/sys/class/hwmon/hwmon0/temp1_input '101000\n'
put $r/sys/class/hwmon/hwmon0/temp1_crit '100000\n'
put $r/sys/class/hwmon/hwmon0/temp2_input 'garbage\n'

# proc_task TREE PID NAME STATE PARENT START: a /proc/PID/stat line with every field up to the start time (22).
proc_task() {
  put "$1/proc/$2/stat" "$2 ($3) $4 $5 $2 $2 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 $6 1000000 200\\n"
  put "$1/proc/$2/status" "Name:\\t$3\\nState:\\t$4\\nvoluntary_ctxt_switches:\\t40\\nnonvoluntary_ctxt_switches:\\t2\\n"
}

# hung_tasks: tasks in uninterruptible sleep. gpudoctor itself (pid 3000, /proc/self) and its probe
# (3001) wait on a page; rsync waits on storage; a training job holds /dev/nvidia0 open; nvidia-smi
# has nvidia frames in its kernel stack; a kernel thread sleeps in an nvidia symbol. The kernel's
# hung-task detector runs with its default timeout and has fired once.
r=hung_tasks
rm -rf $r
put $r/proc/sys/kernel/hung_task_timeout_secs '120\n'
put $r/proc/sys/kernel/hung_task_detect_count '1\n'
proc_task $r 1 systemd S 0 1
proc_task $r 3000 gpudoctor D 1 90000
put $r/proc/3000/wchan 'folio_wait_bit_common\n'
ln -s 3000 $r/proc/self
proc_task $r 3001 gpudoctor D 3000 90010
proc_task $r 4100 rsync D 1 5000
put $r/proc/4100/wchan 'folio_wait_bit_common\n'
proc_task $r 4200 python3 D 1 6000
put $r/proc/4200/wchan 'schedule_timeout\n'
mkdir -p $r/proc/4200/fd
ln -s /dev/null $r/proc/4200/fd/0
ln -s /dev/nvidiactl $r/proc/4200/fd/3
ln -s /dev/nvidia0 $r/proc/4200/fd/4
ln -s /dev/nvidia0 $r/proc/4200/fd/5
ln -s 'socket:[123456]' $r/proc/4200/fd/6
proc_task $r 4300 nvidia-smi D 1 7000
put $r/proc/4300/wchan 'os_acquire_mutex\n'
put $r/proc/4300/stack '[<0>] down+0x47/0x60\n[<0>] os_acquire_mutex+0x2d/0x50 [nvidia]\n[<0>] _nv041133rm+0x10/0x20 [nvidia]\n[<0>] nvidia_ioctl+0x5c6/0x8d0 [nvidia]\n[<0>] __x64_sys_ioctl+0x8d/0xd0\n'
proc_task $r 4400 'kworker/u64:3' D 2 100
put $r/proc/4400/wchan '_nv012345rm\n'
proc_task $r 4500 nvme_poll D 2 100
put $r/proc/4500/wchan 'nvme_poll_cq\n'

# pci_topology: the kernel's view of a GPU behind a PCIe root port. Each entry of
# /sys/bus/pci/devices links into /sys/devices, where a device's directory lies
# inside that of the port above it.
r=pci_topology
rm -rf $r
pci_device() {  # pci_device TREE PATH VENDOR CLASS: PATH under /sys/devices
  put "$1/sys/devices/$2/vendor" "$3\\n"
  put "$1/sys/devices/$2/class" "$4\\n"
  mkdir -p "$1/sys/bus/pci/devices"
  ln -s "../../../devices/$2" "$1/sys/bus/pci/devices/$(basename "$2")"
}
pci_device $r pci0000:00/0000:00:03.0 0x8086 0x060400
pci_device $r pci0000:00/0000:00:03.0/0000:01:00.0 0x10de 0x030200
pci_device $r pci0000:00/0000:00:1f.0 0x8086 0x060100
