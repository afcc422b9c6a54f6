#include "host/readers.h"

namespace gpudoctor::host_internal {
namespace {

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Walks `root` depth-first, at most `depth_limit` levels down and
// `file_limit` files in all, and keeps the most recently modified file.
// Symbolic links to directories are not followed, so loops cannot occur.
Field<BackupScan> ScanBackupDirectory(const HostConfig& config, const HostEnv& env, const std::string& root) {
  Result<FileStatus> root_status = env.Stat(root);
  if (!root_status) return Field<BackupScan>::Failed(root_status.error().message);
  if (root_status->type != FileType::kDirectory) return Field<BackupScan>::Failed(root + ": not a directory");

  BackupScan scan;
  struct Pending {
    std::string path;
    uint32_t depth;
  };
  std::vector<Pending> pending{{root, 0}};
  while (!pending.empty() && !scan.truncated) {
    Pending dir = std::move(pending.back());
    pending.pop_back();
    Result<std::vector<DirEntry>> entries = env.ListDir(dir.path);
    if (!entries) {
      if (dir.depth == 0) return Field<BackupScan>::Failed(entries.error().message);
      continue;  // an unreadable subdirectory does not hide the rest
    }
    for (const DirEntry& entry : *entries) {
      const std::string path = JoinPath(dir.path, entry.name);
      if (entry.type == FileType::kDirectory) {
        if (dir.depth < config.backup_scan_depth)
          pending.push_back({path, dir.depth + 1});
        else
          scan.truncated = true;
        continue;
      }
      if (entry.type != FileType::kRegular && entry.type != FileType::kSymlink) continue;
      Result<FileStatus> status = env.Stat(path);
      if (!status || status->type != FileType::kRegular) continue;
      ++scan.files_examined;
      if (!scan.newest || status->modified > scan.newest->modified) scan.newest = NewestFile{path, status->modified};
      if (scan.files_examined >= config.backup_scan_file_limit) {
        scan.truncated = true;
        break;
      }
    }
  }
  return Field<BackupScan>::Value(std::move(scan));
}

}  // namespace

void ReadStorageSignals(const HostConfig& config, const HostEnv& env, HostSignals& signals) {
  for (const std::string& path : config.disk_paths) {
    DiskUsage usage{path, {}};
    Result<FileSystemSpace> space = env.SpaceOf(path);
    usage.space = space ? Field<FileSystemSpace>::Value(*space) : Field<FileSystemSpace>::Failed(space.error().message);
    signals.disks.push_back(std::move(usage));
  }
  for (const std::string& path : config.backup_dirs) {
    signals.backups.push_back({path, ScanBackupDirectory(config, env, path)});
  }
}

}  // namespace gpudoctor::host_internal
