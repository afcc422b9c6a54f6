/* The floor for the snapshot benchmark: the least a program can do to read
 * the same NVML fields gpudoctor reads, with no isolation, no threads and no
 * serialisation. Loads the library with dlopen like gpudoctor does.
 *
 *   nvml_floor LIBRARY SNAPSHOTS
 * prints "floor_cpu_us_per_snapshot=<n> max_rss_kb=<n>".
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

typedef int ret_t;
typedef void* dev_t_;
typedef struct { char legacy[16]; unsigned domain, bus, device, pci_device_id, subsystem_id; char bus_id[32]; } pci_t;
typedef struct { unsigned gpu, memory; } util_t;
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } proc_t;
typedef struct { unsigned field_id, scope_id; long long timestamp, latency; int type; ret_t ret; unsigned long long value; } field_t;

#define LOAD(name) name = dlsym(lib, #name); if (!name) { fprintf(stderr, "missing %s\n", #name); return 2; }

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: nvml_floor LIBRARY SNAPSHOTS\n"); return 64; }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 69; }
  int snapshots = atoi(argv[2]);
  ret_t (*nvmlInit_v2)(void); ret_t (*nvmlDeviceGetCount_v2)(unsigned*);
  ret_t (*nvmlSystemGetDriverVersion)(char*, unsigned); ret_t (*nvmlSystemGetNVMLVersion)(char*, unsigned);
  ret_t (*nvmlSystemGetCudaDriverVersion_v2)(int*);
  ret_t (*nvmlDeviceGetHandleByIndex_v2)(unsigned, dev_t_*);
  ret_t (*nvmlDeviceGetName)(dev_t_, char*, unsigned); ret_t (*nvmlDeviceGetUUID)(dev_t_, char*, unsigned);
  ret_t (*nvmlDeviceGetSerial)(dev_t_, char*, unsigned); ret_t (*nvmlDeviceGetBoardPartNumber)(dev_t_, char*, unsigned);
  ret_t (*nvmlDeviceGetVbiosVersion)(dev_t_, char*, unsigned); ret_t (*nvmlDeviceGetPersistenceMode)(dev_t_, int*);
  ret_t (*nvmlDeviceGetPciInfo_v3)(dev_t_, pci_t*);
  ret_t (*nvmlDeviceGetCurrPcieLinkGeneration)(dev_t_, unsigned*); ret_t (*nvmlDeviceGetMaxPcieLinkGeneration)(dev_t_, unsigned*);
  ret_t (*nvmlDeviceGetCurrPcieLinkWidth)(dev_t_, unsigned*); ret_t (*nvmlDeviceGetMaxPcieLinkWidth)(dev_t_, unsigned*);
  ret_t (*nvmlDeviceGetPcieReplayCounter)(dev_t_, unsigned*);
  ret_t (*nvmlDeviceGetTemperature)(dev_t_, int, unsigned*); ret_t (*nvmlDeviceGetTemperatureThreshold)(dev_t_, int, unsigned*);
  ret_t (*nvmlDeviceGetFieldValues)(dev_t_, int, field_t*);
  ret_t (*nvmlDeviceGetNumFans)(dev_t_, unsigned*); ret_t (*nvmlDeviceGetFanSpeed_v2)(dev_t_, unsigned, unsigned*);
  ret_t (*nvmlDeviceGetPowerUsage)(dev_t_, unsigned*); ret_t (*nvmlDeviceGetEnforcedPowerLimit)(dev_t_, unsigned*);
  ret_t (*nvmlDeviceGetPowerManagementDefaultLimit)(dev_t_, unsigned*);
  ret_t (*nvmlEventSetCreate)(void**); ret_t (*nvmlDeviceRegisterEvents)(dev_t_, unsigned long long, void*);
  ret_t (*nvmlEventSetWait_v2)(void*, void*, unsigned);
  ret_t (*nvmlDeviceGetClockInfo)(dev_t_, int, unsigned*);
  ret_t (*nvmlDeviceGetCurrentClocksEventReasons)(dev_t_, unsigned long long*);
  ret_t (*nvmlDeviceGetUtilizationRates)(dev_t_, util_t*); ret_t (*nvmlDeviceGetMemoryInfo)(dev_t_, mem_t*);
  ret_t (*nvmlDeviceGetComputeRunningProcesses_v3)(dev_t_, unsigned*, proc_t*);
  ret_t (*nvmlSystemGetProcessName)(unsigned, char*, unsigned);
  ret_t (*nvmlDeviceGetEccMode)(dev_t_, int*, int*); ret_t (*nvmlDeviceGetTotalEccErrors)(dev_t_, int, int, unsigned long long*);
  ret_t (*nvmlDeviceGetRetiredPages)(dev_t_, int, unsigned*, unsigned long long*);
  ret_t (*nvmlDeviceGetRetiredPagesPendingStatus)(dev_t_, int*);
  ret_t (*nvmlDeviceGetRemappedRows)(dev_t_, unsigned*, unsigned*, unsigned*, unsigned*);
  ret_t (*nvmlDeviceGetNvLinkState)(dev_t_, unsigned, int*); ret_t (*nvmlDeviceGetNvLinkErrorCounter)(dev_t_, unsigned, int, unsigned long long*);
  LOAD(nvmlInit_v2) LOAD(nvmlDeviceGetCount_v2) LOAD(nvmlSystemGetDriverVersion) LOAD(nvmlSystemGetNVMLVersion)
  LOAD(nvmlSystemGetCudaDriverVersion_v2) LOAD(nvmlDeviceGetHandleByIndex_v2) LOAD(nvmlDeviceGetName) LOAD(nvmlDeviceGetUUID)
  LOAD(nvmlDeviceGetSerial) LOAD(nvmlDeviceGetBoardPartNumber) LOAD(nvmlDeviceGetVbiosVersion) LOAD(nvmlDeviceGetPersistenceMode)
  LOAD(nvmlDeviceGetPciInfo_v3) LOAD(nvmlDeviceGetCurrPcieLinkGeneration) LOAD(nvmlDeviceGetMaxPcieLinkGeneration)
  LOAD(nvmlDeviceGetCurrPcieLinkWidth) LOAD(nvmlDeviceGetMaxPcieLinkWidth) LOAD(nvmlDeviceGetPcieReplayCounter)
  LOAD(nvmlDeviceGetTemperature) LOAD(nvmlDeviceGetTemperatureThreshold) LOAD(nvmlDeviceGetFieldValues)
  LOAD(nvmlDeviceGetNumFans) LOAD(nvmlDeviceGetFanSpeed_v2) LOAD(nvmlDeviceGetPowerUsage) LOAD(nvmlDeviceGetEnforcedPowerLimit)
  LOAD(nvmlDeviceGetClockInfo) LOAD(nvmlDeviceGetCurrentClocksEventReasons) LOAD(nvmlDeviceGetUtilizationRates)
  LOAD(nvmlDeviceGetMemoryInfo) LOAD(nvmlDeviceGetComputeRunningProcesses_v3) LOAD(nvmlSystemGetProcessName)
  LOAD(nvmlDeviceGetEccMode) LOAD(nvmlDeviceGetTotalEccErrors) LOAD(nvmlDeviceGetRetiredPages)
  LOAD(nvmlDeviceGetRetiredPagesPendingStatus) LOAD(nvmlDeviceGetRemappedRows) LOAD(nvmlDeviceGetNvLinkState)
  LOAD(nvmlDeviceGetNvLinkErrorCounter) LOAD(nvmlDeviceGetPowerManagementDefaultLimit)
  LOAD(nvmlEventSetCreate) LOAD(nvmlDeviceRegisterEvents) LOAD(nvmlEventSetWait_v2)
  if (nvmlInit_v2() != 0) { fprintf(stderr, "nvmlInit_v2 failed\n"); return 69; }
  // Like the probe: one event set for Xid errors, registered once, polled once per snapshot.
  void* events = NULL;
  nvmlEventSetCreate(&events);
  unsigned registered = 0;

  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  volatile unsigned long long sink = 0;
  for (int s = 0; s < snapshots; ++s) {
    char text[256]; int cuda; unsigned count = 0;
    nvmlSystemGetDriverVersion(text, sizeof text); nvmlSystemGetNVMLVersion(text, sizeof text);
    nvmlSystemGetCudaDriverVersion_v2(&cuda);
    nvmlDeviceGetCount_v2(&count);
    for (unsigned i = 0; i < count; ++i) {
      dev_t_ d; unsigned u; int e, p; unsigned long long ull; pci_t pci; util_t util; mem_t mem; proc_t procs[64];
      field_t field = {82, 0, 0, 0, 0, 0, 0};
      nvmlDeviceGetHandleByIndex_v2(i, &d);
      nvmlDeviceGetName(d, text, sizeof text); nvmlDeviceGetUUID(d, text, sizeof text);
      nvmlDeviceGetSerial(d, text, sizeof text); nvmlDeviceGetBoardPartNumber(d, text, sizeof text);
      nvmlDeviceGetVbiosVersion(d, text, sizeof text); nvmlDeviceGetPersistenceMode(d, &e);
      nvmlDeviceGetPciInfo_v3(d, &pci);
      nvmlDeviceGetCurrPcieLinkGeneration(d, &u); nvmlDeviceGetMaxPcieLinkGeneration(d, &u);
      nvmlDeviceGetCurrPcieLinkWidth(d, &u); nvmlDeviceGetMaxPcieLinkWidth(d, &u); nvmlDeviceGetPcieReplayCounter(d, &u);
      nvmlDeviceGetTemperature(d, 0, &u);
      for (int t = 0; t < 4; ++t) if (t != 2) nvmlDeviceGetTemperatureThreshold(d, t, &u);
      nvmlDeviceGetFieldValues(d, 1, &field);
      unsigned fans = 0; nvmlDeviceGetNumFans(d, &fans);
      for (unsigned f = 0; f < fans; ++f) nvmlDeviceGetFanSpeed_v2(d, f, &u);
      nvmlDeviceGetPowerUsage(d, &u); nvmlDeviceGetEnforcedPowerLimit(d, &u);
      nvmlDeviceGetPowerManagementDefaultLimit(d, &u);
      nvmlDeviceGetClockInfo(d, 1, &u); nvmlDeviceGetClockInfo(d, 2, &u);
      nvmlDeviceGetCurrentClocksEventReasons(d, &ull);
      nvmlDeviceGetUtilizationRates(d, &util); nvmlDeviceGetMemoryInfo(d, &mem);
      unsigned nprocs = 64; nvmlDeviceGetComputeRunningProcesses_v3(d, &nprocs, procs);
      for (unsigned k = 0; k < nprocs && k < 64; ++k) nvmlSystemGetProcessName(procs[k].pid, text, sizeof text);
      nvmlDeviceGetEccMode(d, &e, &p);
      for (int type = 0; type < 2; ++type) for (int counter = 0; counter < 2; ++counter) nvmlDeviceGetTotalEccErrors(d, type, counter, &ull);
      unsigned pages = 0; nvmlDeviceGetRetiredPages(d, 0, &pages, NULL); pages = 0; nvmlDeviceGetRetiredPages(d, 1, &pages, NULL);
      nvmlDeviceGetRetiredPagesPendingStatus(d, &e);
      unsigned a, b, c, f2; nvmlDeviceGetRemappedRows(d, &a, &b, &c, &f2);
      for (unsigned link = 0; link < 18; ++link) {
        if (nvmlDeviceGetNvLinkState(d, link, &e) != 0) break;
        for (int counter = 0; counter < 4; ++counter) nvmlDeviceGetNvLinkErrorCounter(d, link, counter, &ull);
      }
      sink += mem.used + util.gpu;
      if (i >= registered) nvmlDeviceRegisterEvents(d, 0x8ULL /* Xid critical errors */, events), registered = i + 1;
    }
    unsigned char event_data[64];
    nvmlEventSetWait_v2(events, event_data, 0);
  }
  getrusage(RUSAGE_SELF, &after);
  double us = (after.ru_utime.tv_sec - before.ru_utime.tv_sec + after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1e6 +
              (after.ru_utime.tv_usec - before.ru_utime.tv_usec + after.ru_stime.tv_usec - before.ru_stime.tv_usec);
  printf("floor_cpu_us_per_snapshot=%.1f max_rss_kb=%ld\n", us / snapshots, after.ru_maxrss);
  return (int)(sink & 0);
}
